"""The price and cost columns of the dataset: computed when a row is built, kept with it, read back by pandas."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from pipeline.cli import main
from pipeline.dataset import LATEST_DIR, RESULTS_DIR, build, read_latest
from pipeline.prices import COST_COLUMNS, PRICE_COLUMNS, load_pricing
from pipeline.records import COLUMN_NAMES, dump_record
from tests.support.records import sample_failure, sample_record

PRICES = """instances:
  trn2.48xlarge:
    price_per_hour:
      on_demand: {usd: 64.0, source: "the test's first table", as_of: 2026-01-01, region: us-east-2}
"""


def _records() -> list[dict]:
    gpu = sample_record(
        model_id="acme/gpu-row",
        device="cuda",
        hardware={"name": "nvidia-l40s", "instance_type": "g6e.xlarge", "accelerator": "NVIDIA L40S",
                  "core_config": None, "memory_per_core_bytes": 48 * 1024**3, "cores_available": 1},
        versions={"torch_neuronx": None, "neuronx_cc": None, "runtime": None, "driver": None, "sdk": None,
                  "cuda": "12.8"},
        metrics={"decode_tokens_per_s": 400.0, "compile_s": 0.0, "warm_start_s": None, "compile_cache_hit": None},
    )  # fmt: skip
    unpriced = sample_record(
        model_id="acme/unpriced", hardware={"name": "trn2u.48xlarge", "instance_type": "trn2u.48xlarge"}
    )
    return [sample_record(), gpu, unpriced, sample_failure(model_id="acme/broken")]


def test_a_built_rows_cost_matches_the_hand_computation(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    build(_records(), out, pricing=load_pricing())
    latest = pd.read_parquet(out / LATEST_DIR, dtype_backend="pyarrow").set_index("model_id")
    assert list(pd.read_parquet(out / RESULTS_DIR).columns) == list(COLUMN_NAMES)
    row = latest.loc["trncat-demo/tiny-llama"]
    # By hand: a trn2.48xlarge at $85.964/h, the run on 1 of its 64 NeuronCores at 77.1 decode tok/s:
    # $85.964 / 64 = $1.3431875 an hour; 77.1 x 3600 = 277,560 tokens an hour; x 1e6 / 277,560 = $4.8393.
    assert row["cost_usd_per_million_tokens"] == pytest.approx(1.3431875 / 277_560 * 1e6)
    assert round(row["cost_usd_per_million_tokens"], 4) == 4.8393
    assert row["price_usd_per_hour"] == 85.964 and row["price_option"] == "on_demand"
    assert row["price_source"].endswith("(third party)") and row["price_region"] == "us-east-2"
    assert pd.isna(row["price_as_of"])  # the source is undated: said as null, never guessed
    # The GPU row: its one L40S is the whole g6e.xlarge: $1.861 / (400 x 3600) x 1e6 = $1.2924 per million tokens.
    assert latest.loc["acme/gpu-row", "cost_usd_per_million_tokens"] == pytest.approx(1.861 / 1_440_000 * 1e6)
    # An instance the table does not price: every price and cost column null (never 0).
    assert all(pd.isna(latest.loc["acme/unpriced", c]) for c in (*PRICE_COLUMNS, *COST_COLUMNS))
    # A failed run: the instance's price is kept, the cost per output is null.
    assert latest.loc["acme/broken", "price_usd_per_hour"] == 85.964
    assert all(pd.isna(latest.loc["acme/broken", c]) for c in COST_COLUMNS)
    # The other tasks' cost columns stay null in a text-generation row.
    assert pd.isna(row["cost_usd_per_thousand_images"]) and pd.isna(row["cost_usd_per_million_sentences"])


def test_a_row_keeps_the_price_it_was_built_with(tmp_path: Path) -> None:
    """History stays true: a later build at new prices prices its own rows only."""
    prices = tmp_path / "prices.yaml"
    prices.write_text(PRICES)
    out = tmp_path / "ds"
    build([sample_record()], out, pricing=load_pricing(prices))
    prices.write_text(PRICES.replace("64.0", "128.0").replace("first", "second").replace("2026-01-01", "2026-06-01"))
    newer = sample_record(run={"started_at": "2026-12-01T10:00:00+00:00", "finished_at": "2026-12-01T10:01:00+00:00"})
    build([newer], out, pricing=load_pricing(prices))
    rows = pd.concat(pd.read_parquet(p) for p in sorted((out / RESULTS_DIR).glob("*.parquet")))
    by_time = rows.sort_values("finished_at")
    assert list(by_time.price_usd_per_hour) == [64.0, 128.0]
    assert list(by_time.price_as_of) == ["2026-01-01", "2026-06-01"]
    assert list(by_time.price_source) == ["the test's first table", "the test's second table"]
    # 1 of 64 cores: $1/h then $2/h, over 277,560 tokens an hour.
    assert list(by_time.cost_usd_per_million_tokens) == pytest.approx([1e6 / 277_560, 2e6 / 277_560])
    [latest] = read_latest(out)
    assert latest["price_usd_per_hour"] == 128.0 and latest["history"][0]["record_id"] != latest["record_id"]


def test_build_and_publish_take_prices_and_the_option_on_the_command_line(tmp_path: Path) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text(PRICES.replace("on_demand", "reserved"))
    records = tmp_path / "records"
    records.mkdir()
    (records / "a.json").write_text(dump_record(sample_record()))
    out = tmp_path / "built"
    assert main(["build", str(records), "--out", str(out), "--prices", str(prices), "--price-option", "reserved"]) == 0
    [row] = read_latest(out)
    assert (row["price_usd_per_hour"], row["price_option"]) == (64.0, "reserved")
    assert row["cost_usd_per_million_tokens"] == pytest.approx(1e6 / 277_560)
    folder = tmp_path / "published"
    assert main(["publish", str(records), "--to-folder", str(folder), "--prices", str(prices)]) == 0
    [row] = read_latest(folder)  # on_demand by default: this table has no such price
    assert row["price_usd_per_hour"] is None and row["cost_usd_per_million_tokens"] is None
    # argparse refuses an option it does not offer: a usage error, exit 2 (one line, tests/cli/test_bad_input.py)
    assert main(["build", str(records), "--out", str(tmp_path / "x"), "--price-option", "spot"]) == 2
    assert not (tmp_path / "x").exists()
    prices.write_text("instances:\n  trn2.48xlarge: {price_per_hour: {on_demand: 3}}\n")
    assert main(["build", str(records), "--out", str(tmp_path / "y"), "--prices", str(prices)]) != 0
    assert not (tmp_path / "y").exists()  # a bad price file stops the build before it writes anything
