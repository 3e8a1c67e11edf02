"""The page's second-machine warm checks: each row's warm-start badge and the catalog's warm-start line.

A row shows "warm start verified" only after a check on a real machine verified *that row's* bundle (the model, its
revision and the bundle's sha256 all match: a rebuilt bundle needs its own check). An emulated check that verified
is shown, labelled emulated, never as verified, and only where no real machine checked the bundle; a real check that
missed, was refused or failed is shown as such.
The line counts the bundles of the page's Trainium2 rows, how many a real machine verified, and the graph hit rate
over the real checks of those bundles (hits ÷ (hits + misses)). Checks are dataset content: untrusted, escaped by
the template like everything else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

#: What a row's warm-start cell (``wv``) can say, beside None (no check of its bundle).
WARM_STATES = ("verified", "emulated", "missed", "refused", "error")

BundleKey = tuple[str, str, str]


def _bundle(model_id: Any, revision: Any, sha256: Any) -> BundleKey:
    return (str(model_id).lower(), str(revision), str(sha256))


def warm_index(checks: Iterable[Mapping[str, Any]]) -> dict[BundleKey, dict[bool, Mapping[str, Any]]]:
    """Each bundle's newest check on a real machine (``False``) and on the emulator (``True``)."""
    out: dict[BundleKey, dict[bool, Mapping[str, Any]]] = {}
    for check in checks:
        kinds = out.setdefault(_bundle(check["model_id"], check["revision"], check["sha256"]), {})
        emulated = check.get("emulated") is not False  # anything but a plain False is no real machine's
        if not emulated and not check.get("machine"):
            continue  # no machine compared with the bundle's (issue 47.4): no second-machine claim
        if emulated not in kinds or str(check["checked_at"]) > str(kinds[emulated]["checked_at"]):
            kinds[emulated] = check
    return out


def warm_state(row: Mapping[str, Any], index: Mapping[BundleKey, Mapping[bool, Mapping[str, Any]]]) -> str | None:
    """The warm-start cell of a latest row: one of :data:`WARM_STATES`, or None when its bundle has no check."""
    sha256 = row.get("compiled_cache_sha256")
    if not sha256 or row.get("emulated"):
        return None
    kinds = index.get(_bundle(row.get("model_id"), row.get("revision"), sha256), {})
    real, emulated = kinds.get(False), kinds.get(True)
    if real is not None:  # a real machine's word stands, whatever the emulator said
        status = str(real.get("status"))
        return status if status in WARM_STATES and status != "emulated" else None
    if emulated is not None and emulated.get("status") == "verified":
        return "emulated"
    return None


def warm_summary(
    trainium_rows: Sequence[Mapping[str, Any]], index: Mapping[BundleKey, Mapping[bool, Mapping[str, Any]]]
) -> dict[str, Any] | None:
    """The catalog's warm-start line over the bundles of ``trainium_rows`` (the page's Trainium2 rows), or None when
    none names a bundle: ``bundles``, ``verified``, ``checks`` (real ones), ``hits``, ``misses``, ``rate`` (percent,
    None without a counted graph) and ``emulated`` (bundles only the emulator checked)."""
    bundles = {
        _bundle(r.get("model_id"), r.get("revision"), r["compiled_cache_sha256"])
        for r in trainium_rows
        if r.get("compiled_cache_sha256") and not r.get("emulated")
    }
    if not bundles:
        return None
    real = [index[b][False] for b in sorted(bundles) if False in index.get(b, {})]
    hits = sum(int(c["hits"]) for c in real if isinstance(c.get("hits"), int) and isinstance(c.get("misses"), int))
    misses = sum(int(c["misses"]) for c in real if isinstance(c.get("hits"), int) and isinstance(c.get("misses"), int))
    return {
        "bundles": len(bundles),
        "verified": sum(1 for c in real if c.get("status") == "verified"),
        "checks": len(real),
        "hits": hits,
        "misses": misses,
        "rate": round(100 * hits / (hits + misses), 1) if hits + misses else None,
        "emulated": sum(1 for b in bundles if True in index.get(b, {}) and False not in index.get(b, {})),
    }


#: Each warm-start cell's badge: (CSS class, text, title), drawn by :mod:`pipeline.page.cells`.
WARM_BADGES = {
    "verified": ("b-warm", "warm start verified",
                 "a second trn2 runner with an empty cache ran this row's run.py --require-warm: every graph came from "
                 "its compiled-cache bundle, none compiled"),
    "emulated": ("b-dev", "warm start: emulated",
                 "only the Neuron emulator checked this bundle's warm start: not a Trainium2 verification"),
    "missed": ("b-fallback", "warm check missed",
               "a second trn2 runner ran this row's run.py --require-warm: some graphs compiled instead of coming "
               "from the bundle"),
    "refused": ("b-fallback", "warm check refused",
                "a second trn2 runner's run.py would not start warm from this bundle (another key or toolchain)"),
    "error": ("b-fallback", "warm check failed", "the second machine's run.py --require-warm failed before counting"),
}  # fmt: skip
