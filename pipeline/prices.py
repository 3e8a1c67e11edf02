"""Instance prices with their provenance (``runners/instances.yaml``) and what a run's output costs at them.

Every price is ``{usd, source, as_of, region}`` (plus ``third_party`` and a ``note``) under its purchase option
(:data:`pipeline.types.PRICE_KINDS`): AWS sets prices per region and changes them, so a figure without where it
came from, where it holds and when it was seen is no fact. A price the file leaves null is unknown, never 0.

A run's cost is its share of its instance's price over what it produced in that hour::

    share = cores / the instance's cores (NeuronCores on Trainium, GPUs on a GPU instance)
    USD per output = price per instance-hour x share / (outputs per second x 3600)

with each task's speed per its own count of outputs (its spec's cost, :class:`pipeline.taskspec.Cost`:
``decode_tokens_per_s`` per million tokens, ``seconds_per_image`` per thousand images, ...), each at the
benchmark's own batch size. It assumes the rest of the instance is sold to other work at the same rate; a
single-stream figure (batch 1) is the costliest case, since batching raises throughput for little more memory.
The dataset computes these columns when a row is built, with the table in force then, and keeps them with the
row: history stays true when prices change.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

import yaml

from pipeline import hardware
from pipeline.constants import REPO_ROOT
from pipeline.errors import ConfigError
from pipeline.taskspec import COST_COLUMNS, REGISTRY
from pipeline.types import PRICE_KINDS

DEFAULT_PRICES = REPO_ROOT / "runners" / "instances.yaml"
#: Where an installed wheel carries the same file (pyproject.toml force-includes it, as it does the schemas).
_PACKAGED_PRICES = Path(__file__).resolve().parent / "_runners" / "instances.yaml"
DEFAULT_OPTION = "on_demand"
#: The instance name trncat's offline demo gives this machine's CPU, so that an invented, labelled demo price prices
#: its rows (``pipeline.cli.demo``); the page badges every row of it "demo". No real runner ever names it.
DEMO_INSTANCE = "demo.cpu"
#: An EC2 instance type: family, a dot, a size (``trn2.48xlarge``, ``p5en.48xlarge``, ``g6e.xlarge``).
_INSTANCE_NAME = re.compile(r"^[a-z][a-z0-9-]{0,15}\.[a-z0-9]{1,16}$")
#: ``as_of``: a day, a month or a year (sources date their figures at any of the three).
_AS_OF = re.compile(r"^\d{4}(-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?)?$")
_PRICE_KEYS = frozenset({"usd", "source", "as_of", "region", "third_party", "note"})
_REQUIRED_PRICE_KEYS = ("usd", "source", "as_of", "region")
#: The keys of one instance's entry (anything else, e.g. ``on_demand:`` one level too high, is refused).
_INSTANCE_KEYS = frozenset({"host_memory_gib", "price_per_hour", "accelerators"})
_MAX_TEXT = 500

#: The dataset columns a price gives a row (in this order, after the record's own columns).
PRICE_COLUMNS: tuple[str, ...] = ("price_usd_per_hour", "price_option", "price_region", "price_source", "price_as_of")
#: Each task's cost column: (column, speed column, outputs the cost is per, whether the speed is seconds per output),
#: from its spec (:class:`pipeline.taskspec.Cost`).
TASK_COSTS: dict[str, tuple[str, str, float, bool]] = {
    name: (spec.cost.column, spec.cost.speed, spec.cost.per, spec.cost.seconds_each) for name, spec in REGISTRY.items()
}


@dataclass(frozen=True)
class Price:
    """One price: USD per instance-hour under one purchase option, and where it comes from.

    Args:
        usd: Per instance-hour, positive.
        source: The page or file it was read from.
        as_of: When the source gave it (``YYYY-MM-DD``, ``YYYY-MM`` or ``YYYY``); None: the source is undated.
        region: The AWS region it holds in; None: the source does not say.
        third_party: Not AWS's own figure (a public catalog, a report).
        note: What a reader should know (a caveat, how it was derived).
    """

    usd: float
    source: str
    as_of: str | None
    region: str | None
    third_party: bool = False
    note: str | None = None

    def citation(self) -> str:
        """The source as a row's ``price_source`` says it (a third party's figure says so)."""
        return f"{self.source} (third party)" if self.third_party else self.source

    def summary(self) -> str:
        """``$85.964/h (us-east-2; SOURCE (third party); undated)``, for the estimate and the page."""
        where = self.region or "region not stated"
        return f"${self.usd:g}/h ({where}; {self.citation()}; {self.as_of or 'undated'})"


@dataclass(frozen=True)
class Accelerators:
    """The GPUs of a GPU instance (Trainium instances take theirs from :mod:`pipeline.hardware`)."""

    name: str
    count: int
    memory_bytes: int


@dataclass(frozen=True)
class InstancePrices:
    """One instance type of ``runners/instances.yaml``: its prices by purchase option, host RAM, accelerators."""

    name: str
    host_memory_bytes: int | None
    prices: dict[str, Price | None]
    accelerators: Accelerators | None = None

    @property
    def price_per_hour(self) -> dict[str, float | None]:
        """USD per instance-hour by option (None: not known)."""
        return {kind: (p.usd if p is not None else None) for kind, p in self.prices.items()}

    def price(self, option: str) -> Price | None:
        """The price under ``option`` (None: not known)."""
        return self.prices.get(option)

    def cores(self, *, lnc: int | None = None) -> int | None:
        """The accelerator cores a run's share is counted against: NeuronCores at ``lnc`` on Trainium, GPUs on a
        GPU instance; None when neither table knows the instance."""
        if self.accelerators is not None:
            return self.accelerators.count
        if self.name in hardware.INSTANCE_NAMES:
            try:
                return hardware.get_instance(self.name, lnc=lnc).cores
            except ConfigError:
                return None
        return None


@dataclass(frozen=True)
class Pricing:
    """The price table and the purchase option a build or an estimate prices with (``--prices``, ``--price-option``)."""

    table: Mapping[str, InstancePrices] = field(default_factory=dict)
    option: str = DEFAULT_OPTION
    path: Path | None = None

    def __post_init__(self) -> None:
        check_option(self.option)

    def price(self, instance: str | None) -> Price | None:
        """The price of ``instance`` under the option (None: no such instance, or no price)."""
        known = self.table.get(instance) if instance else None
        return known.price(self.option) if known else None


def check_option(option: str) -> str:
    """``option`` when it is a purchase option; raises :class:`ConfigError` otherwise."""
    if option not in PRICE_KINDS:
        raise ConfigError(f"unknown price option {option!r}; choose from {', '.join(PRICE_KINDS)}")
    return option


def _positive(value: object) -> TypeGuard[float]:
    """Whether ``value`` is a finite number above 0 (a bool is none)."""
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value) and value > 0


def _text(where: str, key: str, value: Any, *, null: bool) -> str | None:
    if value is None and null:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > _MAX_TEXT:
        raise ConfigError(f"{where}: {key} must be text of 1 to {_MAX_TEXT} characters{' or null' if null else ''}")
    return value.strip()


def _price(where: str, value: Any) -> Price | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ConfigError(
            f"{where}: a price is a mapping {{usd, source, as_of, region}} (a bare number says nowhere where it "
            f"comes from), got {value!r}"
        )
    unknown = set(value) - _PRICE_KEYS
    missing = [k for k in _REQUIRED_PRICE_KEYS if k not in value]
    if unknown or missing:
        raise ConfigError(
            f"{where}: unknown key(s) {sorted(unknown)}, missing {missing}; a price has {sorted(_PRICE_KEYS)}"
        )
    usd = value["usd"]
    if not _positive(usd):
        raise ConfigError(
            f"{where}: usd must be a positive number of USD per instance-hour (unknown: null), got {usd!r}"
        )
    as_of = value["as_of"]
    if as_of is not None:
        as_of = str(as_of)  # YAML reads 2025-10-17 as a date
        if not _AS_OF.fullmatch(as_of):
            raise ConfigError(f"{where}: as_of must be YYYY-MM-DD, YYYY-MM or YYYY (undated: null), got {as_of!r}")
    third = value.get("third_party", False)
    if not isinstance(third, bool):
        raise ConfigError(f"{where}: third_party must be true or false, got {third!r}")
    return Price(
        usd=float(usd),
        source=_text(where, "source", value["source"], null=False) or "",
        as_of=as_of,
        region=_text(where, "region", value["region"], null=True),
        third_party=third,
        note=_text(where, "note", value.get("note"), null=True),
    )


def _accelerators(where: str, value: Any) -> Accelerators | None:
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != {"name", "count", "memory_gib"}:
        raise ConfigError(f"{where}: accelerators must be {{name, count, memory_gib}}, got {value!r}")
    count, memory = value["count"], value["memory_gib"]
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ConfigError(f"{where}: accelerators.count must be a positive integer, got {count!r}")
    if not _positive(memory):
        raise ConfigError(f"{where}: accelerators.memory_gib must be a positive number, got {memory!r}")
    name = _text(where, "accelerators.name", value["name"], null=False) or ""
    return Accelerators(name=name, count=count, memory_bytes=int(memory * 1024**3))


def default_prices() -> Path:
    """``runners/instances.yaml`` of this checkout, else the copy an installed wheel carries."""
    return DEFAULT_PRICES if DEFAULT_PRICES.is_file() or not _PACKAGED_PRICES.is_file() else _PACKAGED_PRICES


def load_prices(path: Path | None = None) -> dict[str, InstancePrices]:
    """The instance types of ``runners/instances.yaml`` (or ``path``, a file of the same structure).

    Raises:
        ConfigError: unreadable file; an unknown key; an instance name that is no EC2 type; an unknown purchase
            option; a price
            that is not ``{usd, source, as_of, region}`` with a positive ``usd``; bad host memory or accelerators.
    """
    path = default_prices() if path is None else Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: unreadable instances file: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("instances"), dict):
        raise ConfigError(f"{path}: must hold an `instances` mapping")
    if extra := sorted(set(map(str, data)) - {"instances"}):
        raise ConfigError(f"{path}: unknown top-level key(s) {extra}; the file holds one `instances` mapping")
    out: dict[str, InstancePrices] = {}
    for name, spec in data["instances"].items():
        name = str(name)
        if not _INSTANCE_NAME.fullmatch(name):
            raise ConfigError(f"{path}: {name!r} is not an EC2 instance type (family.size, e.g. trn2.48xlarge)")
        spec = spec or {}
        if not isinstance(spec, dict):
            raise ConfigError(f"{path}: {name}: must be a mapping")
        if unknown_keys := sorted(set(map(str, spec)) - _INSTANCE_KEYS):
            raise ConfigError(
                f"{path}: {name}: unknown key(s) {unknown_keys}; an instance has {sorted(_INSTANCE_KEYS)} "
                "(a price goes under price_per_hour: {on_demand: {usd, source, as_of, region}})"
            )
        prices = spec.get("price_per_hour") or {}
        if not isinstance(prices, dict):
            raise ConfigError(f"{path}: {name}: price_per_hour must map a purchase option to a price")
        unknown = set(prices) - set(PRICE_KINDS)
        if unknown:
            raise ConfigError(f"{path}: {name}: unknown price kind(s) {sorted(unknown)}; use {', '.join(PRICE_KINDS)}")
        memory = spec.get("host_memory_gib")
        if memory is not None and not _positive(memory):
            raise ConfigError(f"{path}: {name}: host_memory_gib must be a positive number or null, got {memory!r}")
        out[name] = InstancePrices(
            name=name,
            host_memory_bytes=int(memory * 1024**3) if memory is not None else None,
            prices={kind: _price(f"{path}: {name}: {kind}", prices.get(kind)) for kind in PRICE_KINDS},
            accelerators=_accelerators(f"{path}: {name}", spec.get("accelerators")),
        )
    return out


def load_pricing(path: Path | None = None, *, option: str = DEFAULT_OPTION) -> Pricing:
    """:func:`load_prices` and the purchase option, as a build or an estimate takes them.

    Raises:
        ConfigError: a bad file (see :func:`load_prices`) or an unknown option.
    """
    check_option(option)
    return Pricing(table=load_prices(path), option=option, path=default_prices() if path is None else Path(path))


def run_share(row: Mapping[str, Any], instance: InstancePrices) -> float | None:
    """The share of its instance a row's run held: its cores over the instance's (None when either is unknown).

    The instance's own count comes first (a runner sees only its slice of the devices, so the row's
    ``cores_available`` may be that slice), then the row's ``cores_available``.
    """
    cores = row.get("cores")
    lnc = re.fullmatch(r"lnc=(\d)", str(row.get("core_config") or ""))  # the row's core_config, "lnc=2"
    total = instance.cores(lnc=int(lnc[1]) if lnc else None) or row.get("cores_available")
    if isinstance(cores, bool) or not isinstance(cores, int) or not isinstance(total, int) or not 1 <= cores <= total:
        return None
    return cores / total


def cost_per_output(*, usd_per_hour: float, share: float, speed: float, per: float, seconds_each: bool) -> float:
    """USD per ``per`` outputs: ``usd_per_hour x share`` over the outputs of one hour.

    Args:
        usd_per_hour: The instance's price.
        share: The run's share of the instance (cores over the instance's cores).
        speed: Outputs per second, or seconds per output when ``seconds_each``.
        per: How many outputs the cost is for (1e6 tokens, 1e3 images, ...).
        seconds_each: ``speed`` is seconds per output.
    """
    per_second = 1.0 / speed if seconds_each else speed
    try:
        return usd_per_hour * share / (per_second * 3600.0) * per
    except ZeroDivisionError:  # a speed so small that an hour's outputs round to 0.0: no finite cost
        return math.inf


def row_costs(row: Mapping[str, Any], pricing: Pricing | None) -> dict[str, Any]:
    """The price and cost columns of a flat row (:data:`PRICE_COLUMNS` then :data:`COST_COLUMNS`).

    The price is its instance's under the pricing's option; the task's cost is null (never 0) where the instance
    has no price, the row did not pass, its share or its speed is unknown; the other tasks' cost columns are null.
    """
    out: dict[str, Any] = dict.fromkeys((*PRICE_COLUMNS, *COST_COLUMNS))
    if pricing is None:
        return out
    instance = pricing.table.get(row.get("instance_type") or "")
    price = instance.price(pricing.option) if instance else None
    if instance is None or price is None:
        return out
    out.update(
        price_usd_per_hour=price.usd,
        price_option=pricing.option,
        price_region=price.region,
        price_source=price.citation(),
        price_as_of=price.as_of,
    )
    task = TASK_COSTS.get(str(row.get("task")))
    if task is None or row.get("status") != "pass":
        return out
    column, speed_column, per, seconds_each = task
    speed, share = row.get(speed_column), run_share(row, instance)
    if share is None or not _positive(speed):
        return out
    cost = cost_per_output(usd_per_hour=price.usd, share=share, speed=speed, per=per, seconds_each=seconds_each)
    out[column] = cost if math.isfinite(cost) else None  # a speed so small (5e-324) that no finite cost exists
    return out
