"""The release diff over a dataset of the same models on two toolchains: every count and delta, worked by hand."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from pipeline.dataset import build, read_release_diffs, write_release_diff
from pipeline.errors import ConfigError
from pipeline.records import flatten
from pipeline.release import diff_dataset, diff_text, release_diff
from tests.support.records import fake_revision, sample_failure, sample_record

OLD = {"neuronx_cc": "1.0.0", "torch_neuronx": "1.0.0"}
NEW = {"neuronx_cc": "2.0.0", "torch_neuronx": "1.0.0"}


def _run(day: int) -> dict[str, str]:
    return {"started_at": f"2026-11-{day:02d}T10:00:00+00:00", "finished_at": f"2026-11-{day:02d}T10:05:00+00:00"}


def _pass(model: str, pins: dict[str, str], day: int, **metrics: Any) -> dict[str, Any]:
    return sample_record(model_id=model, revision=fake_revision(model), versions=pins, run=_run(day), metrics=metrics)


def _fail(model: str, pins: dict[str, str], day: int, code: str, *, status: str = "fail") -> dict[str, Any]:
    return sample_failure(
        model_id=model, revision=fake_revision(model), versions=pins, run=_run(day), code=code, status=status
    )


def _records() -> list[dict[str, Any]]:
    m = {
        "neuronx_cc_s": 100.0,
        "compile_s": 61.5,
        "decode_tokens_per_s": 77.1,
        "peak_device_memory_bytes": 3_000_000_000,
    }
    return [
        # a: passes on both; an older old-toolchain row and a new-toolchain error row must not count
        _pass("org/a", OLD, 10, **{**m, "decode_tokens_per_s": 50.0}),
        _pass("org/a", OLD, 20, **m),
        _pass("org/a", NEW, 30, **{**m, "neuronx_cc_s": 130.0, "compile_s": 70.0, "decode_tokens_per_s": 80.0,
                                   "peak_device_memory_bytes": 3_100_000_000}),
        _fail("org/a", NEW, 29, "device_busy", status="error"),
        # i, j: pass on both, slower and faster
        _pass("org/i", OLD, 20, **m),
        _pass("org/i", NEW, 28, **{**m, "decode_tokens_per_s": 61.68, "compile_s": 51.5,
                                   "peak_device_memory_bytes": 3_500_000_000}),
        _pass("org/j", OLD, 20, **m),
        _pass("org/j", NEW, 28, **{**m, "decode_tokens_per_s": 96.375, "compile_s": 63.5}),
        # b: a regression; c: newly passing; d: another code; e: the same code
        _pass("org/b", OLD, 20, **m),
        _fail("org/b", NEW, 28, "ncc_evrf007"),
        _fail("org/c", OLD, 20, "ncc_evrf001"),
        _pass("org/c", NEW, 28, **m),
        _fail("org/d", OLD, 20, "ncc_evrf001"),
        _fail("org/d", NEW, 28, "ncc_evrf009"),
        _fail("org/e", OLD, 20, "ncc_evrf001"),
        _fail("org/e", NEW, 28, "ncc_evrf001"),
        # f: not re-measured yet; g: new; h: measured on another instance, compares nothing
        _pass("org/f", OLD, 20, **m),
        _pass("org/g", NEW, 28, **m),
        _pass("org/h", OLD, 20, **m),
        sample_record(model_id="org/h", revision=fake_revision("org/h"), versions=NEW, run=_run(28), metrics=m,
                      hardware={"name": "trn2.3xlarge", "instance_type": "trn2.3xlarge", "cores_available": 4}),
        # another toolchain entirely: on neither side
        _pass("org/z", {"neuronx_cc": "3.0.0", "torch_neuronx": "1.0.0"}, 28, **m),
    ]  # fmt: skip


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("releases") / "dataset"
    summary = build(_records(), root, page=False)
    assert not summary.set_aside
    return root


def test_every_count_and_delta_by_hand(dataset: Path) -> None:
    diff = diff_dataset(dataset, old="old", new="new", old_pins=OLD, new_pins=NEW)
    by = {e["model_id"]: e for e in diff.entries}
    assert diff.counts == {
        "newly_failing": 1, "code_changed": 1, "newly_passing": 1, "still_passing": 3, "still_failing": 1,
        "not_comparable": 1, "old_only": 1, "new_only": 1,
    }  # fmt: skip
    assert diff.compared == 7 and "org/z" not in by
    # regressions first
    assert [e["model_id"] for e in diff.entries[:3]] == ["org/b", "org/d", "org/c"]
    b, d = by["org/b"], by["org/d"]
    assert (b["old_status"], b["new_status"], b["new_failure_code"], b["new_failure_stage"]) == (
        "pass", "fail", "ncc_evrf007", "compile"
    )  # fmt: skip
    assert (d["old_failure_code"], d["new_failure_code"]) == ("ncc_evrf001", "ncc_evrf009")
    a = by["org/a"]  # the newest old row (day 20, not day 10), the new pass (not the error row)
    assert a["old_finished_at"] == dt.datetime(2026, 11, 20, 10, 5, tzinfo=dt.UTC)
    assert a["new_finished_at"] == dt.datetime(2026, 11, 30, 10, 5, tzinfo=dt.UTC)
    assert a["compile_s"] == 30.0  # neuronx-cc: 100 -> 130 s
    assert a["first_call_s"] == 8.5  # 61.5 -> 70 s
    assert a["speed_pct"] == 3.76  # 77.1 -> 80 tokens/s: 80 / 77.1 = 1.0376
    assert a["peak_memory_bytes"] == 100_000_000
    assert (by["org/i"]["speed_pct"], by["org/i"]["first_call_s"], by["org/i"]["peak_memory_bytes"]) == (
        -20.0, -10.0, 500_000_000.0
    )  # fmt: skip
    assert (by["org/j"]["speed_pct"], by["org/j"]["first_call_s"], by["org/j"]["peak_memory_bytes"]) == (25.0, 2.0, 0.0)
    # no row has an interval: no delta is a change (issue 50), the medians are of none; equal values are unchanged
    assert diff.medians == {"compile_s": None, "first_call_s": None, "speed_pct": None, "peak_memory_bytes": None}
    assert (a["speed_pct_verdict"], a["compile_s_verdict"]) == ("no_interval", "no_interval")
    assert (by["org/j"]["compile_s_verdict"], by["org/j"]["peak_memory_bytes_verdict"]) == ("within_noise",) * 2
    h = by["org/h"]
    assert h["kind"] == "not_comparable" and h["note"] == "compares nothing: measured with another instance_type"
    assert h["speed_pct"] is None and h["compile_s"] is None
    assert by["org/f"]["kind"] == "old_only" and by["org/f"]["new_status"] is None
    assert by["org/g"]["kind"] == "new_only" and by["org/g"]["old_status"] is None
    text = diff_text(diff)
    assert text.splitlines()[0] == "old -> new: 10 model(s) and task(s), 7 compared"
    assert "newly_failing   org/b (text-generation) ncc_evrf001 -> ncc_evrf007" not in text  # a pass has no code
    assert "newly_failing   org/b (text-generation) - -> ncc_evrf007 [2026-11-20 -> 2026-11-28]" in text
    assert "medians of the changes: compile_s -, first_call_s -, speed_pct -, peak_memory_bytes -" in text
    assert "  speed_pct: 3 no interval: cannot tell" in text
    assert "  compile_s: 2 unchanged (within noise), 1 no interval: cannot tell" in text
    assert "speed_pct +3.8% (no interval: cannot tell)" in text


#: One run's ten call times (shuffled 0.10 .. 0.19 s, their median 0.145 s): its interval (pipeline/records/spread.py).
_TIMES = [0.14, 0.11, 0.19, 0.10, 0.16, 0.12, 0.18, 0.13, 0.17, 0.15]


def _timed(model: str, pins: dict[str, str], day: int, slower: float = 1.0) -> dict[str, Any]:
    """A pass whose figures come from :data:`_TIMES` made ``slower`` (injected: no timed test)."""
    times = sorted(t * slower for t in _TIMES)
    speed = 10 / (0.145 * slower)  # ten tokens per median call
    spread = {"repeats": 10, "latency_low_s": times[1], "latency_high_s": times[8],
              "speed_low": 10 / times[8], "speed_high": 10 / times[1]}  # fmt: skip
    return _pass(model, pins, day, decode_tokens_per_s=speed, compile_s=0.0, spread=spread)


def test_the_same_stack_twice_is_within_noise_and_twice_as_slow_is_a_change() -> None:
    old = [flatten(_timed("org/a", OLD, 20)), flatten(_timed("org/b", OLD, 20))]
    # the second measurement of the same stack: a wobble inside the interval (+10 % on a, -8 % on b)
    same = [flatten(_timed("org/a", NEW, 28, slower=1 / 1.1)), flatten(_timed("org/b", NEW, 28, slower=1.08))]
    diff = release_diff(old, same, old="cpu-first-run", new="cpu-second-run")
    assert [e["speed_pct_verdict"] for e in diff.entries] == ["within_noise", "within_noise"]
    assert [e["first_call_s_verdict"] for e in diff.entries] == ["within_noise", "within_noise"]  # 0 s -> 0 s
    text = diff_text(diff)
    assert "  speed_pct: 2 unchanged (within noise)" in text and "medians of the changes: " in text
    assert "speed_pct unchanged (within noise)" in text and "%" not in text.split("\n", 3)[3]
    slowed = [flatten(_timed("org/a", NEW, 28, slower=2.0)), flatten(_timed("org/b", NEW, 28))]
    diff = release_diff(old, slowed, old="old", new="new")
    by = {e["model_id"]: e for e in diff.entries}
    assert (by["org/a"]["speed_pct"], by["org/a"]["speed_pct_verdict"]) == (-50.0, "changed")
    assert by["org/b"]["speed_pct_verdict"] == "within_noise"
    assert diff.medians["speed_pct"] == -50.0
    assert "speed_pct -50.0% (changed)" in diff_text(diff)


def test_the_diff_file_round_trips_and_the_same_pins_compare_nothing(dataset: Path, tmp_path: Path) -> None:
    diff = diff_dataset(dataset, old="2.33.0", new="2.34.0", old_pins=OLD, new_pins=NEW)
    path = write_release_diff(tmp_path, old="2.33.0", new="2.34.0", entries=diff.entries)
    assert path == tmp_path / "data/releases/2.33.0--2.34.0.parquet"
    [read] = read_release_diffs(tmp_path)
    assert (read["old"], read["new"]) == ("2.33.0", "2.34.0")
    assert [e["model_id"] for e in read["entries"]] == [e["model_id"] for e in diff.entries]
    assert read["entries"][0]["new_failure_code"] == "ncc_evrf007"
    with pytest.raises(ConfigError, match="pin the same versions"):
        diff_dataset(dataset, old="a", new="b", old_pins=OLD, new_pins=dict(OLD))
    with pytest.raises(ConfigError, match="cannot name a release diff file"):
        write_release_diff(tmp_path, old="../x", new="y", entries=[])


def test_rows_on_another_device_compare_nothing_and_lower_seconds_per_image_is_faster() -> None:
    base = {"task": "text-to-image", "status": "pass", "source": "ci", "device": "neuron", "instance_type": "t"}
    old = [{**base, "model_id": "o/sd", "seconds_per_image": 2.0, "finished_at": dt.datetime(2026, 1, 1)}]
    new = [{**base, "model_id": "o/sd", "seconds_per_image": 1.6, "finished_at": dt.datetime(2026, 1, 2)}]
    assert release_diff(old, new, old="a", new="b").entries[0]["speed_pct"] == 25.0
    cpu = [{**new[0], "device": "cpu"}]
    [entry] = release_diff(old, cpu, old="a", new="b").entries
    assert entry["kind"] == "not_comparable" and entry["note"] == "compares nothing: measured with another device"


def test_trncat_diff_reads_two_toolchain_files_and_writes_the_release_file(
    dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipeline.cli import main

    old, new = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old.write_text('# Neuron SDK 2.33.0\nneuronx_cc: "1.0.0"\ntorch_neuronx: "1.0.0"\napt:\n  x: "1*"\n')
    new.write_text('# Neuron SDK 2.34.0\nneuronx_cc: "2.0.0"\ntorch_neuronx: "1.0.0"\n')
    assert main(["diff", "--toolchain", str(old), str(new), "--dataset", str(dataset), "--write"]) == 0
    out = capsys.readouterr().out
    assert f"wrote {dataset / 'data/releases/2.33.0--2.34.0.parquet'}" in out
    assert "2.33.0 -> 2.34.0: 10 model(s) and task(s), 7 compared" in out
    assert [d["new"] for d in read_release_diffs(dataset)] == ["2.34.0"]
    assert main(["diff", "--toolchain", str(old), str(old), "--dataset", str(dataset)]) != 0
    assert "pin the same versions" in capsys.readouterr().err


def test_a_community_fail_never_makes_a_ci_pass_newly_failing(tmp_path: Path) -> None:
    """Issue 47.2: the new toolchain's only row of org/a is a merged community fail; the old one's is the project's
    CI pass. The diff, its Parquet file, the page's section and the feed must not call org/a newly failing: rows of
    two sources compare nothing, each side says its source, and a pair of community rows is counted apart."""
    from pipeline.page import render_page
    from pipeline.space import SiteNames, feed_xml
    from tests.support.records import as_community

    m = {"neuronx_cc_s": 100.0, "compile_s": 61.5, "decode_tokens_per_s": 77.1}
    records = [
        _pass("org/a", OLD, 20, **m),
        as_community(_fail("org/a", NEW, 28, "ncc_evrf007")),
        as_community(_pass("org/c", OLD, 20, **m)),
        as_community(_fail("org/c", NEW, 28, "ncc_evrf007")),
    ]
    root = tmp_path / "dataset"
    assert not build(records, root, page=False).set_aside
    diff = diff_dataset(root, old="2.33.0", new="2.34.0", old_pins=OLD, new_pins=NEW)
    write_release_diff(root, old="2.33.0", new="2.34.0", entries=diff.entries)
    [stored] = read_release_diffs(root)
    by = {e["model_id"]: e for e in stored["entries"]}
    a, c = by["org/a"], by["org/c"]
    assert a["kind"] == "not_comparable" and (a["old_source"], a["new_source"]) == ("ci", "community")
    assert "source" in a["note"]
    assert c["kind"] == "newly_failing" and c["new_source"] == c["old_source"] == "community"
    feed = feed_xml([], names=SiteNames(dataset_repo="acme/results", space_repo="acme/catalog"), releases=[stored])
    assert "0 newly failing" in feed and "2 from community rows, counted apart" in feed
    html = render_page(latest=[], rankings=[], exclusions=[], scripts={}, releases=[stored])
    section = html[html.index('id="release-2.33.0--2.34.0"') :]
    assert "community" in section[: section.index("</section>")]
