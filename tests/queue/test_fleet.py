"""The duration model, the sweep simulation, the fleet recommendation and the estimate (`queue --estimate`)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.dataset import build
from pipeline.errors import ConfigError
from pipeline.prices import Pricing, load_prices, load_pricing
from pipeline.queue import (
    PRIOR,
    DurationModel,
    Job,
    estimate_sweep,
    format_estimate,
    layout_fleet,
    param_bucket,
    simulate,
)
from tests import FIXTURES
from tests.support.partitions import parse_partition
from tests.support.records import fake_revision, sample_record

TOOLCHAIN = {"neuronx_cc": "2.21.0", "torch_neuronx": "2.14.0", "transformers": "5.0.0"}


def _run(model: str, minute: int, *, compile_s: float, wall_s: float, cc: str = "2.21.0", **kw) -> dict:
    run = {"started_at": f"2026-11-28T10:{minute:02d}:00+00:00", "finished_at": f"2026-11-28T10:{minute:02d}:59+00:00"}
    metrics = {"compile_s": compile_s, "wall_s": wall_s, "peak_host_memory_bytes": 9_000_000_000 + minute}
    return sample_record(model_id=model, run=run, metrics=metrics, versions={"neuronx_cc": cc}, **kw)


@pytest.fixture
def history(tmp_path: Path) -> Path:
    root = tmp_path / "dataset"
    build(
        [
            _run("a/one", 1, compile_s=100.0, wall_s=130.0),
            _run("a/two", 2, compile_s=200.0, wall_s=250.0),
            _run("a/three", 3, compile_s=300.0, wall_s=380.0),
            _run("old/cc", 4, compile_s=900.0, wall_s=1000.0, cc="2.20.0", cores=4),
            _run("cpu/row", 5, compile_s=5.0, wall_s=9.0, device="cpu", dtype="float32"),
        ],
        root,
    )
    return root


def test_durations_come_from_history_then_older_toolchains_then_the_prior(history: Path) -> None:
    model = DurationModel.from_dataset(history, toolchain=TOOLCHAIN)
    params = 1_235_814_400  # the sample records' model: the 1-3B bucket
    here = model.predict(task="text-generation", cores=1, params=params)
    assert (here.source, here.samples, here.compile_s, here.run_s) == ("history", 3, 200.0, 50.0)
    assert here.host_memory_bytes == 9_000_000_003  # a high percentile (of three runs, the largest), not the median
    older = model.predict(task="text-generation", cores=4, params=params)
    assert (older.source, older.compile_s, older.run_s) == ("older-toolchain", 900.0, 100.0)
    other_bucket = model.predict(task="text-generation", cores=1, params=70_000_000_000)
    assert other_bucket == PRIOR.duration(params=70_000_000_000, cores=1) and other_bucket.source == "prior"
    assert param_bucket(None) == 0 and param_bucket(999_999_999) == 0 and param_bucket(10**12) == 5
    empty = DurationModel.from_dataset(None, toolchain=TOOLCHAIN)
    assert empty._groups == {} and empty.predict(task="text-generation", cores=1, params=params).source == "prior"


def test_one_community_record_cannot_raise_a_groups_host_memory_guard(tmp_path: Path) -> None:
    """Issue 22.3: the guard took the max `peak_host_memory_bytes` of a (task, cores, size) group over all rows;
    one merged community record of 2**62 made every job of the group wait 30 minutes and be refused, daily.
    Only CI rows count now, and a high percentile of them (one outlier of our own does not set it either)."""
    from pipeline.queue import HOST_MEMORY_PERCENTILE

    rows = [_run(f"a/m{i}", i, compile_s=100.0, wall_s=130.0) for i in range(10)]
    for i, row in enumerate(rows):
        row["metrics"]["peak_host_memory_bytes"] = (i + 1) * 1_000_000_000
    rows[-1]["metrics"]["peak_host_memory_bytes"] = 400_000_000_000  # one CI compile that took far more
    hostile = _run("evil/forged", 30, compile_s=100.0, wall_s=130.0)
    hostile["metrics"]["peak_host_memory_bytes"] = 2**62
    hostile["run"] |= {"source": "community", "runner": None, "github_run_id": None, "github_sha": None}
    build([*rows, hostile], tmp_path / "ds")
    model = DurationModel.from_dataset(tmp_path / "ds", toolchain=TOOLCHAIN)
    predicted = model.predict(task="text-generation", cores=1, params=1_235_814_400)
    assert predicted.samples == 10, "the community row is no sample"
    assert predicted.host_memory_bytes == 9_000_000_000, f"the p{HOST_MEMORY_PERCENTILE} of the CI rows"
    assert predicted.compile_s == 100.0


def test_prior_orders_bigger_models_longer() -> None:
    small, big = PRIOR.duration(params=500_000_000, cores=1), PRIOR.duration(params=70_000_000_000, cores=16)
    assert big.total_s > small.total_s and big.host_memory_bytes > small.host_memory_bytes


def test_simulation_counts_the_tail_and_repartitions_idle_runners() -> None:
    jobs = [Job(cores=8, seconds=3600.0)] + [Job(cores=1, seconds=600.0) for _ in range(56 * 6)]
    # One instance: one 8-core runner and 56 single cores. The small jobs take 6 rounds (1 h) either way.
    static = simulate(jobs, [[8] + [1] * 56], repartition=False)
    assert static.makespan_s == pytest.approx(3600.0) and static.unrun == 0
    assert static.busy_fraction == pytest.approx((8 * 3600 + 56 * 6 * 600) / (64 * 3600))
    # Work only one size can do never runs on a fleet without that size (and says so).
    assert simulate([Job(cores=16, seconds=1.0)], [[8] * 8], repartition=False).unrun == 1
    # With re-registration, an idle 16-core runner splits for waiting 1-core jobs: the tail shrinks.
    tail = [Job(cores=16, seconds=600.0)] + [Job(cores=1, seconds=600.0) for _ in range(112)]
    fixed = simulate(tail, [[16] + [1] * 48], repartition=False, jit_delay_s=0)
    moving = simulate(tail, [[16] + [1] * 48], repartition=True, jit_delay_s=0)
    assert moving.makespan_s < fixed.makespan_s and moving.busy_fraction > fixed.busy_fraction


def test_layout_gives_each_size_its_share_chip_aligned() -> None:
    layouts = layout_fleet({1: 40 * 3600.0, 4: 16 * 3600.0, 8: 8 * 3600.0}, 1)
    assert sorted(layouts[0], reverse=True)[:1] == [8] and sum(layouts[0]) == 64
    for layout in layout_fleet({1: 1.0, 2: 5.0, 16: 30.0}, 3):
        spec = ",".join(f"1x{size}" for size in layout)
        assert sum(size for _, size in parse_partition(spec)) == 64


def _entries(n: int, runner: str, seconds: int) -> list[dict]:
    return [
        {"model_id": f"o/m{i}", "task": "text-generation", "runner": runner, "predicted_s": seconds} for i in range(n)
    ]


PRICED = """instances:
  trn2.48xlarge:
    price_per_hour:
      on_demand: {usd: 10.0, source: "a test's own figure", as_of: 2026-01-02, region: us-east-2}
      capacity_block: null
"""


def test_estimate_reports_hours_money_and_a_fleet(tmp_path: Path) -> None:
    prices = tmp_path / "instances.yaml"
    prices.write_text(PRICED)
    entries = _entries(200, "trn2-1c", 1800) + _entries(10, "trn2-16c", 3600)
    estimate = estimate_sweep(entries, pricing=load_pricing(prices), target_hours=4)
    data = estimate.to_dict()
    assert data["by_size"]["1"]["jobs"] == 200 and data["by_size"]["16"]["core_hours"] == 160.0
    assert data["core_hours"] == 260.0 and data["makespan_hours"] <= 4
    assert data["cost_usd"]["on_demand"] == round(10.0 * estimate.instance_hours, 2)
    assert data["cost_usd"]["capacity_block"] is None
    assert data["price"] == {"usd_per_hour": 10.0, "source": "a test's own figure", "as_of": "2026-01-02",
                             "region": "us-east-2", "note": None}  # fmt: skip
    for item in data["fleet"]:
        parse_partition(item["partition"])  # what setup-runner.sh --partition auto will apply
    text = format_estimate(estimate)
    assert "instance-hours" in text and "--partition" in text
    dollars = f"${round(10.0 * estimate.instance_hours, 2):,.2f}"
    assert f"Cost (on_demand): {dollars} = " in text and "$10/h (us-east-2; a test's own figure; 2026-01-02)" in text
    # No price under the option asked for: "unknown", naming the option, the instance and the file; never $0.
    blocks = estimate_sweep(entries, pricing=load_pricing(prices, option="capacity_block"), target_hours=4)
    assert f"Cost (capacity_block): unknown (no capacity_block price for trn2.48xlarge in {prices})" in format_estimate(
        blocks
    )
    assert "At the other options: on_demand $" in format_estimate(blocks) and blocks.to_dict()["price"] is None
    unpriced = estimate_sweep(entries, pricing=None, target_hours=4)
    assert "Cost (on_demand): unknown" in format_estimate(unpriced) and "$0" not in format_estimate(unpriced)
    with pytest.raises(ConfigError, match="unknown price option"):
        estimate_sweep(entries, pricing=Pricing(option="spot"))


def test_instances_file_is_checked(tmp_path: Path) -> None:
    shipped = load_prices()
    assert shipped["trn2.48xlarge"].price_per_hour == {"on_demand": 85.964, "capacity_block": None, "reserved": None}
    bad = tmp_path / "bad.yaml"
    for text, message in [
        ("instances:\n  not-an-instance: {}\n", "not an EC2 instance type"),
        ("instances:\n  trn2.48xlarge: {price_per_hour: {spot: 1}}\n", "unknown price kind"),
        ("instances:\n  trn2.48xlarge: {price_per_hour: {on_demand: 1}}\n", "a bare number"),
        ("[]\n", "`instances` mapping"),
    ]:
        bad.write_text(text)
        with pytest.raises(ConfigError, match=message):
            load_prices(bad)


def test_queue_estimate_on_a_dataset_with_and_without_history(history: Path, tmp_path: Path, capsys) -> None:
    from pipeline.discover import Candidate, Discovery

    config = json.loads((FIXTURES / "configs" / "llama-3.2-1b.json").read_text())
    candidates = []
    for i in range(3):
        model = f"org/m{i}"
        candidates.append(Candidate(model_id=model, task="text-generation", view="trending", rank=i + 1,
                                    sha=fake_revision(model)))  # fmt: skip
    discovery = tmp_path / "candidates.json"
    found = Discovery(dt.date(2026, 11, 30), "text-generation", "trending", candidates)
    discovery.write_text(json.dumps(found.to_dict()))
    toolchain = tmp_path / "toolchain.yaml"
    toolchain.write_text("neuronx_cc: 2.21.0\n")

    def run(dataset: Path | None, *extra: str) -> dict:
        out = tmp_path / "cost.json"
        args = ["queue", "--candidates", str(discovery), "--toolchain", str(toolchain), "--out", str(tmp_path / "q")]
        args += ["--estimate", str(out), "--target-hours", "2"] + (["--dataset", str(dataset)] if dataset else [])
        args += list(extra)
        assert main(args) == 0
        return json.loads(out.read_text())

    import pipeline.queue.matrix as queue_module

    original = queue_module.HubPlanner.__call__
    from pipeline.plan import plan_config

    queue_module.HubPlanner.__call__ = lambda self, c: plan_config(config)  # type: ignore[method-assign]
    try:
        without = run(None)
        with_history = run(history)
        reserved = run(history, "--price-option", "reserved")
    finally:
        queue_module.HubPlanner.__call__ = original  # type: ignore[method-assign]
    assert without["duration_sources"] == {"prior": 3} and with_history["duration_sources"] == {"history": 3}
    assert without["jobs"] == with_history["jobs"] == 3
    # History says these models take 250 s; the prior says more: the estimate follows the history.
    assert with_history["core_hours"] == round(3 * 250 / 3600, 2) < without["core_hours"]
    assert "### Sweep estimate" in with_history["markdown"] and with_history["fleet"]
    assert "Sweep estimate" in capsys.readouterr().err
    # The shipped table prices a trn2.48xlarge on demand (a third party's figure, said so): dollars and the source.
    hours, usd = with_history["instance_hours"], with_history["cost_usd"]["on_demand"]
    assert usd == pytest.approx(85.964 * hours, abs=85.964 * 0.005)  # instance_hours is rounded to 0.01
    assert with_history["price"]["source"].endswith("(third party)") and with_history["price"]["region"] == "us-east-2"
    assert (
        f"Cost (on_demand): ${usd:,.2f} = {hours} instance-hours x $85.964/h (us-east-2; SkyPilot catalog"
        in (with_history["markdown"])
    )
    # No reserved price for a trn2.48xlarge: "unknown", never a guess.
    assert reserved["cost_usd"]["reserved"] is None and "Cost (reserved): unknown" in reserved["markdown"]


def test_a_re_measure_after_a_bump_fits_the_printed_budget_and_the_old_rows_stay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 30: after a Neuron bump the whole catalog is queued again. Its estimate prices every job from the old
    toolchain's runs (never the prior), and the matrix as written, run in its order on the fleet the estimate prints,
    finishes within the target at the dollars it states. The re-measured rows then join the old ones, which stay."""
    from pipeline.dataset import iter_results, read_latest
    from pipeline.discover import Candidate, Discovery
    from pipeline.plan import plan_config
    from pipeline.queue import HubPlanner

    models = [f"org/m{i}" for i in range(8)]
    root = tmp_path / "dataset"
    old_rows = [_run(m, i, compile_s=100.0 * (i + 1), wall_s=100.0 * (i + 1) + 60, cc="2.20.0",
                     revision=fake_revision(m)) for i, m in enumerate(models)]  # fmt: skip
    build(old_rows, root)
    (old_file,) = (root / "data/results").glob("*.parquet")
    old_bytes = old_file.read_bytes()
    discovery = tmp_path / "candidates.json"
    found = [Candidate(model_id=m, task="text-generation", view="trending", rank=i + 1, sha=fake_revision(m))
             for i, m in enumerate(models)]  # fmt: skip
    discovery.write_text(json.dumps(Discovery(dt.date(2026, 12, 1), "text-generation", "trending", found).to_dict()))
    toolchain, prices = tmp_path / "toolchain.yaml", tmp_path / "instances.yaml"
    toolchain.write_text('neuronx_cc: "2.21.0"\n')
    prices.write_text(PRICED)
    config = json.loads((FIXTURES / "configs" / "llama-3.2-1b.json").read_text())
    monkeypatch.setattr(HubPlanner, "__call__", lambda self, c: plan_config(config))
    out, cost = tmp_path / "queue.json", tmp_path / "cost.json"
    args = ["queue", "--candidates", str(discovery), "--toolchain", str(toolchain), "--dataset", str(root)]
    args += ["--out", str(out), "--estimate", str(cost), "--target-hours", "0.5", "--prices", str(prices)]
    assert main(args) == 0
    entries = [e for chunk in json.loads(out.read_text())["chunks"] for e in chunk["include"]]
    estimate = json.loads(cost.read_text())

    assert sorted(e["model_id"] for e in entries) == models, "every model is measured again"
    assert estimate["duration_sources"] == {"older-toolchain": 8}, "priced from the old toolchain's runs"
    # each job: the group's median compile (450 s) plus its median run (60 s), from the old rows
    assert {e["predicted_s"] for e in entries} == {510}
    assert estimate["core_hours"] == round(8 * 510 / 3600, 2)
    assert "Re-measure order: 8 job(s) that passed before first" in estimate["markdown"]
    # The matrix as written, in its order, on the fleet as printed (what an operator applies): within the target.
    layouts = [[size for _, size in parse_partition(item["partition"])] for item in estimate["fleet"]]
    jobs = [Job(cores=int(e["runner"].rsplit("-", 1)[1].removesuffix("c")), seconds=e["predicted_s"],
                name=e["model_id"]) for e in entries]  # fmt: skip
    sweep = simulate(jobs, layouts)
    assert sweep.unrun == 0 and sweep.makespan_s <= 0.5 * 3600
    assert round(sweep.makespan_s / 3600, 2) == estimate["makespan_hours"]
    assert estimate["cost_usd"]["on_demand"] == round(10.0 * sweep.instance_hours, 2)
    assert old_file.read_bytes() == old_bytes, "the queue only reads the dataset"

    # The re-measure lands: the old rows stay in the results and in each key's history; nothing is queued again.
    new_rows = [_run(m, 20 + i, compile_s=90.0, wall_s=150.0, cc="2.21.0", revision=fake_revision(m))
                for i, m in enumerate(models)]  # fmt: skip
    build(new_rows, root)
    assert old_file.read_bytes() == old_bytes and len(list((root / "data/results").glob("*.parquet"))) == 2
    latest = {row["model_id"]: row for row in read_latest(root)}
    assert {row["neuronx_cc_version"] for row in latest.values()} == {"2.21.0"}
    assert all(len(row["history"]) == 1 for row in latest.values()), "each key keeps its old run"
    versions = [row["neuronx_cc_version"] for row in iter_results(root, ["neuronx_cc_version"])]
    assert sorted(versions) == ["2.20.0"] * 8 + ["2.21.0"] * 8
    assert main(args) == 0
    assert json.loads(out.read_text())["count"] == 0
