"""The price table (runners/instances.yaml): every price with its provenance, bad files refused, and a row's cost."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.errors import ConfigError
from pipeline.prices import (
    COST_COLUMNS,
    PRICE_COLUMNS,
    TASK_COSTS,
    Pricing,
    cost_per_output,
    load_prices,
    load_pricing,
    row_costs,
)
from pipeline.records import flatten
from pipeline.types import PRICE_KINDS, TASKS
from tests.support.records import BUILD_COLUMNS, sample_failure, sample_record

_ON_DEMAND = "  trn2.48xlarge: {price_per_hour: {on_demand: "
#: Sources of figures that are not AWS's own (runners/instances.yaml names each one).
THIRD_PARTIES = ("SkyPilot", "dstack", "third party's")


def test_the_shipped_table_keeps_each_prices_provenance() -> None:
    table = load_prices()
    seen = 0
    for name, instance in table.items():
        assert set(instance.prices) == set(PRICE_KINDS), name
        for option, price in instance.prices.items():
            if price is None:
                continue
            seen += 1
            assert price.usd > 0 and price.source, (name, option)
            # A third party's figure says so, and AWS's own never does.
            assert price.third_party == any(t in price.source for t in THIRD_PARTIES), (name, option, price.source)
            assert price.citation().endswith("(third party)") == price.third_party
    assert seen >= 20
    trn2 = table["trn2.48xlarge"]
    assert trn2.host_memory_bytes == 2048 * 1024**3 and trn2.cores() == 64 and trn2.cores(lnc=1) == 128
    on_demand = trn2.price("on_demand")
    assert on_demand is not None and (on_demand.usd, on_demand.region, on_demand.as_of) == (85.964, "us-east-2", None)
    assert on_demand.third_party and "SkyPilot" in on_demand.source
    assert trn2.price("capacity_block") is None and trn2.price("reserved") is None  # nothing found: null, never 0
    trn1 = table["trn1.32xlarge"]
    assert trn1.price_per_hour == {"on_demand": 21.5, "capacity_block": 15.49, "reserved": 8.197}
    reserved = trn1.price("reserved")
    assert reserved is not None and "AWS Neuron docs" in reserved.source and reserved.as_of == "2025-10-17"
    assert not reserved.third_party
    assert table["inf2.48xlarge"].price_per_hour["on_demand"] == 12.981
    # The GPU instances a user compares with, each with its accelerators.
    for name, gpus in (("g6e.xlarge", 1), ("p5.48xlarge", 8), ("p5en.48xlarge", 8)):
        instance = table[name]
        assert instance.accelerators is not None and instance.cores() == gpus, name
        assert instance.price("on_demand") is not None, name
    assert table["p5en.48xlarge"].accelerators.name == "NVIDIA H200"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("  trn2.48xlarge: {price_per_hour: {on_demand: 85.964}}", "a bare number"),
        (
            "  trn2.48xlarge: {price_per_hour: {on_demand: {usd: 1, as_of: null, region: null}}}",
            "missing \\['source'\\]",
        ),
        (_ON_DEMAND + "{usd: 0, source: x, as_of: null, region: null}}}", "positive"),
        (
            "  trn2.48xlarge: {price_per_hour: {on_demand: {usd: .nan, source: x, as_of: null, region: null}}}",
            "positive",
        ),
        (
            "  trn2.48xlarge: {price_per_hour: {on_demand: {usd: 1, source: x, as_of: last week, region: null}}}",
            "as_of",
        ),
        (_ON_DEMAND + "{usd: 1, source: '', as_of: null, region: null}}}", "source"),
        (_ON_DEMAND + "{usd: 1, source: x, as_of: 2026, region: x, y: 1}}}", "'y'"),
        ("  trn2.48xlarge: {price_per_hour: {spot: null}}", "unknown price kind"),
        ("  trn2.48xlarge: {price_per_hour: 3}", "price_per_hour must map"),
        ("  'trn2.48xlarge; rm -rf /': {}", "not an EC2 instance type"),
        ("  p5.48xlarge: {accelerators: {name: H100, count: 0, memory_gib: 80}}", "count"),
        ("  trn2.48xlarge: {host_memory_gib: -1}", "host_memory_gib"),
        # issue 37: a price one level too high once left every row unpriced, silently
        (
            "  trn2.48xlarge: {on_demand: {usd: 1, source: x, as_of: 2026, region: x}}",
            "unknown key\\(s\\) \\['on_demand'\\]",
        ),
        ("  trn2.48xlarge: {price_per_hour: {}}\nprice_per_hour: {}", "unknown top-level key"),
    ],
)
def test_a_bad_price_file_is_refused_with_its_place(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text("instances:\n" + body + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=message) as caught:
        load_prices(path)
    assert str(path) in str(caught.value)


def test_an_unknown_price_option_is_refused() -> None:
    with pytest.raises(ConfigError, match="unknown price option 'spot'"):
        load_pricing(option="spot")
    with pytest.raises(ConfigError, match="unknown price option"):
        Pricing(option="cheapest")


def test_the_build_columns_are_the_price_and_cost_columns() -> None:
    assert BUILD_COLUMNS == (*PRICE_COLUMNS, *COST_COLUMNS)
    assert set(TASK_COSTS) == set(TASKS)  # every task has its cost column
    assert {column for column, _, _, _ in TASK_COSTS.values()} == set(COST_COLUMNS)
    assert all(flatten(sample_record())[column] is None for column in BUILD_COLUMNS)  # the record has none


def test_a_rows_cost_computed_by_hand() -> None:
    pricing = load_pricing()
    row = flatten(sample_record())  # trn2.48xlarge on demand, 1 of its 64 NeuronCores, 77.1 decode tok/s
    costs = row_costs(row, pricing)
    # By hand: $85.964/h x 1/64 = $1.3431875/h for the run's core; 77.1 tok/s x 3600 s = 277,560 tokens an hour;
    # $1.3431875 / 277,560 tokens x 1,000,000 = $4.8393 per million tokens.
    assert costs["cost_usd_per_million_tokens"] == pytest.approx(4.839269, rel=1e-6)
    assert costs["price_usd_per_hour"] == 85.964 and costs["price_option"] == "on_demand"
    assert costs["price_region"] == "us-east-2" and costs["price_as_of"] is None
    assert costs["price_source"].startswith("SkyPilot catalog") and costs["price_source"].endswith("(third party)")
    assert costs["cost_usd_per_thousand_images"] is None and costs["cost_usd_per_million_sentences"] is None
    # Four cores of the instance: four times the share, the same throughput -> four times the cost.
    four = row_costs({**row, "cores": 4}, pricing)["cost_usd_per_million_tokens"]
    assert four == pytest.approx(4 * costs["cost_usd_per_million_tokens"])


def test_each_tasks_cost_and_the_gpu_share() -> None:
    pricing = load_pricing()
    base = flatten(sample_record())
    # sentence embeddings: 250 sentences/s on 1 of 64 cores -> $1.3431875/h / 900,000 sentences x 1e6 = $1.4924
    sentences = {**base, "task": "sentence-embeddings", "decode_tokens_per_s": None, "sentences_per_s": 250.0}
    assert row_costs(sentences, pricing)["cost_usd_per_million_sentences"] == pytest.approx(1.4924306, rel=1e-6)
    assert row_costs(sentences, pricing)["cost_usd_per_million_tokens"] is None
    # text-to-image: 2.5 s per image on 4 of 64 cores -> $5.372750/h x 2.5 s / 3600 s x 1000 images = $3.7311
    images = {**base, "task": "text-to-image", "cores": 4, "decode_tokens_per_s": None, "seconds_per_image": 2.5}
    assert row_costs(images, pricing)["cost_usd_per_thousand_images"] == pytest.approx(3.7310764, rel=1e-6)
    # A cuda row on a g6e.xlarge (its one L40S): $1.861/h / (400 tok/s x 3600) x 1e6 = $1.2924 per million tokens.
    gpu = {**base, "device": "cuda", "hardware": "nvidia-l40s", "instance_type": "g6e.xlarge", "cores": 1,
           "cores_available": 1, "core_config": None, "decode_tokens_per_s": 400.0}  # fmt: skip
    assert row_costs(gpu, pricing)["cost_usd_per_million_tokens"] == pytest.approx(1.2923611, rel=1e-6)
    # On a p5.48xlarge one of its 8 H100s is an eighth of the instance, whatever the runner's own slice shows.
    p5 = row_costs({**gpu, "instance_type": "p5.48xlarge"}, pricing)["cost_usd_per_million_tokens"]
    assert p5 == pytest.approx(98.32 / 8 / (400 * 3600) * 1e6)


def test_no_price_or_no_pass_gives_null_never_zero() -> None:
    pricing = load_pricing()
    row = flatten(sample_record())
    unpriced = row_costs({**row, "instance_type": "trn2u.48xlarge"}, pricing)  # not in the table
    assert all(value is None for value in unpriced.values())
    cpu = flatten(sample_record(device="cpu", hardware={"name": "cpu-x86_64", "instance_type": None}))
    assert all(value is None for value in row_costs(cpu, pricing).values())
    # No reserved price for a trn2.48xlarge: null, under that option.
    assert all(v is None for v in row_costs(row, Pricing(table=pricing.table, option="reserved")).values())
    # A failed run keeps its instance's price (what the hour cost) but has no cost per output.
    failed = row_costs(flatten(sample_failure()), pricing)
    assert failed["price_usd_per_hour"] == 85.964 and all(failed[c] is None for c in COST_COLUMNS)
    for odd in ({"decode_tokens_per_s": 0.0}, {"decode_tokens_per_s": None}, {"cores": 65}, {"cores": None}):
        costs = row_costs({**row, **odd}, pricing)
        assert costs["price_usd_per_hour"] == 85.964 and costs["cost_usd_per_million_tokens"] is None, odd
    assert all(value is None for value in row_costs(row, None).values())


def test_cost_per_output_is_the_hour_over_its_outputs() -> None:
    assert cost_per_output(usd_per_hour=3600.0, share=1.0, speed=1.0, per=1.0, seconds_each=False) == 1.0
    assert cost_per_output(usd_per_hour=3600.0, share=0.5, speed=2.0, per=1000.0, seconds_each=True) == 1000.0


def test_an_installed_trncat_prices_with_the_table_its_wheel_carries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pipeline.prices as prices

    packaged = tmp_path / "_runners" / "instances.yaml"
    packaged.parent.mkdir()
    packaged.write_text((prices.DEFAULT_PRICES).read_text(encoding="utf-8"), encoding="utf-8")
    assert prices.default_prices() == prices.DEFAULT_PRICES  # a checkout: its own runners/instances.yaml
    monkeypatch.setattr(prices, "DEFAULT_PRICES", tmp_path / "no-checkout" / "instances.yaml")
    monkeypatch.setattr(prices, "_PACKAGED_PRICES", packaged)
    assert prices.default_prices() == packaged and prices.load_pricing().path == packaged
    assert prices.load_prices()["trn2.48xlarge"].price_per_hour["on_demand"] == 85.964
    pyproject = (Path(prices.__file__).resolve().parent.parent / "pyproject.toml").read_text(encoding="utf-8")
    assert '"runners/instances.yaml" = "pipeline/_runners/instances.yaml"' in pyproject  # what the wheel carries
