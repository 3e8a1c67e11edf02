"""The dataset folder: Parquet read back by pandas and datasets, append-only, latest view, all-or-nothing."""

from __future__ import annotations

import hashlib
import json
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from pipeline.dataset import HISTORY_COLUMN, LATEST_DIR, RESULTS_DIR, build, earlier_runs, read_latest
from pipeline.dataset.layout import FAMILIES_FILE, families_schema, latest_schema
from pipeline.records import COLUMN_NAMES, arrow_schema
from tests import FIXTURES, ROOT
from tests.support.records import sample_community, sample_failure, sample_record


def _records() -> list[dict]:
    return [
        sample_record(),
        sample_record(
            model_id="acme/vlm",
            task="image-text-to-text",
            workload={"batch_size": 1, "input_tokens": 64, "output_tokens": 32, "image_size": 224},
        ),
        sample_failure(model_id="acme/broken", stage="compile", code="ncc_evrf001", message="NCC_EVRF001 <b>x</b>"),
    ]


def _tree(root: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file (hidden temp files included: none may be left)."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_build_reads_back_with_pandas_and_datasets(tmp_path: Path) -> None:
    import datasets

    out = tmp_path / "ds"
    summary = build(_records(), out)
    assert summary.added == 3 and summary.results_file
    results = pd.read_parquet(out / RESULTS_DIR)
    latest = pd.read_parquet(out / LATEST_DIR)
    assert list(results.columns) == list(COLUMN_NAMES)
    assert sorted(latest.model_id) == ["acme/broken", "acme/vlm", "trncat-demo/tiny-llama"]
    assert set(latest.loc[latest.status == "pass", "task"]) == {"text-generation", "image-text-to-text"}
    for path in (out / RESULTS_DIR).glob("*.parquet"):
        assert pq.read_schema(path).remove_metadata() == arrow_schema()
    loaded = datasets.load_dataset(
        "parquet", data_files={"latest": str(out / LATEST_DIR / "*.parquet")}, cache_dir=str(tmp_path / "hf-cache")
    )
    assert loaded["latest"].num_rows == 3
    assert loaded["latest"].column_names == [*COLUMN_NAMES, HISTORY_COLUMN]
    card = (out / "README.md").read_text()
    assert 'config_name: "latest"' in card and "data/latest/*.parquet" in card
    for model in ("acme/vlm", "acme/broken", "trncat-demo/tiny-llama"):
        assert (out / "scripts" / model / "run.py").is_file()
        assert (out / "scripts" / model / "requirements.txt").is_file()


def test_every_parquet_file_reads_back_in_its_schema_without_pyarrows_copy_of_it(tmp_path: Path) -> None:
    """The footer holds no ``ARROW:schema`` (a third of it), and each file's columns read back as the Arrow types its
    writer gave them, timezone-aware times and nested lists included: the Parquet types alone carry them."""
    out = tmp_path / "ds"
    build(_records(), out)
    expected = {RESULTS_DIR: arrow_schema(), LATEST_DIR: latest_schema(), FAMILIES_FILE: families_schema()}
    files = sorted(out.rglob("*.parquet"))
    assert {f.relative_to(out).as_posix() for f in files} >= {FAMILIES_FILE, f"{LATEST_DIR}/all.parquet"}
    for path in files:
        assert b"ARROW:schema" not in (pq.read_metadata(path).metadata or {}), path
        relative = path.relative_to(out).as_posix()
        schema = next((s for prefix, s in expected.items() if relative.startswith(prefix)), None)
        if schema is not None:
            assert pq.read_schema(path).remove_metadata() == schema, relative
    latest = pq.read_table(out / LATEST_DIR / "all.parquet")
    assert str(latest.schema.field("finished_at").type) == "timestamp[us, tz=UTC]"
    assert latest.column("finished_at").to_pylist()[0].tzinfo is not None


def test_results_are_append_only_and_duplicates_change_nothing(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    build(_records(), out)
    first = _tree(out)
    again = build(_records(), out)
    assert not again.changed and again.duplicates == 3
    assert _tree(out) == first
    newer = sample_record(
        run={"started_at": "2026-11-29T10:00:00+00:00", "finished_at": "2026-11-29T10:05:00+00:00"},
        metrics={"decode_tokens_per_s": 99.0},
    )
    summary = build([newer], out)
    after = _tree(out)
    old_results = {k: v for k, v in first.items() if k.startswith(RESULTS_DIR)}
    assert all(after[k] == v for k, v in old_results.items()), "an old results file was rewritten"
    assert len([k for k in after if k.startswith(RESULTS_DIR)]) == len(old_results) + 1
    latest = pd.read_parquet(out / LATEST_DIR)
    row = latest[latest.model_id == "trncat-demo/tiny-llama"].iloc[0]
    assert row.decode_tokens_per_s == 99.0
    assert summary.latest_files and all(after[f] != first.get(f) for f in summary.latest_files)
    untouched = [k for k in first if k.startswith(LATEST_DIR) and k not in summary.latest_files]
    assert all(after[k] == first[k] for k in untouched), "a latest shard that did not change was rewritten"


def test_an_older_record_does_not_replace_the_latest(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    build([sample_record(run={"finished_at": "2026-11-29T10:05:00+00:00"}, metrics={"decode_tokens_per_s": 99.0})], out)
    build([sample_record(metrics={"decode_tokens_per_s": 1.0})], out)
    assert len(pd.read_parquet(out / RESULTS_DIR)) == 2
    assert pd.read_parquet(out / LATEST_DIR).decode_tokens_per_s.tolist() == [99.0]


def test_history_keeps_every_earlier_run_and_flags_regressions(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    old_toolchain = sample_record()
    new_toolchain = sample_failure(
        versions={"neuronx_cc": "2.22.0"},
        run={"started_at": "2026-11-29T10:00:00+00:00", "finished_at": "2026-11-29T10:05:00+00:00"},
    )
    build([old_toolchain], out)
    summary = build([new_toolchain], out)
    [change] = summary.changes
    assert change.is_regression and change.before is not None
    [row] = read_latest(out)
    assert row["status"] == "fail"
    [earlier] = earlier_runs(row)
    assert earlier["status"] == "pass" and earlier["neuronx_cc_version"] == "2.21.0"
    # a late result older than the latest joins the history and results, without replacing the latest
    late = sample_record(run={"started_at": "2026-11-28T11:00:00+00:00", "finished_at": "2026-11-28T11:30:00+00:00"})
    assert build([late], out).added == 1
    [row] = read_latest(out)
    assert row["status"] == "fail"
    assert [h["finished_at"].isoformat() for h in earlier_runs(row)] == [
        "2026-11-28T11:30:00+00:00",
        "2026-11-28T10:01:13+00:00",
    ]
    # republishing any of them is a duplicate, the late one included
    again = build([old_toolchain, new_toolchain, late], out)
    assert not again.changed and again.duplicates == 3
    assert len(pd.read_parquet(out / RESULTS_DIR)) == 3


def test_an_invalid_record_is_set_aside_and_the_rest_built(tmp_path: Path) -> None:
    """A bad record (validate first: the CLI does) is set aside with its reason; it never stops the good ones."""
    bad = sample_record(revision="main", model_id="acme/bad")
    summary = build([sample_record(), bad], tmp_path / "ds")
    assert [(name, field) for name, field, _ in summary.set_aside] == [("acme/bad", "revision")]
    assert pd.read_parquet(tmp_path / "ds" / RESULTS_DIR).model_id.tolist() == [sample_record()["model_id"]]
    assert not build([bad], tmp_path / "empty").changed and not (tmp_path / "empty").exists()


def test_a_year_0001_stamp_is_invalid_and_never_crashes_a_publish(tmp_path: Path) -> None:
    """Issue 22.6: `0001-01-01T00:00:00+05:00` passed validation and the PR check (the stamps' text fast path),
    then crashed every publish that included it (OverflowError converting it to UTC). Every stamp is parsed
    and its year bounded now, and build sets such a record aside instead of aborting."""
    from pipeline.records import parse_time, validate_record

    stamps = {"started_at": "0001-01-01T00:00:00+05:00", "finished_at": "0001-01-01T00:10:00+05:00"}
    ancient = sample_record(model_id="acme/ancient", run=stamps)
    assert ("run.started_at", "not a real ISO 8601 time with a timezone between the years 2000 and 9998") in (
        validate_record(ancient)
    )
    assert parse_time("0001-01-01T00:00:00+05:00") is None and parse_time("9999-12-31T23:00:00-05:00") is None
    assert parse_time("2026-11-28T10:00:00+05:00") == parse_time("2026-11-28T05:00:00Z")
    past_end = sample_record(model_id="acme/late", run={"started_at": "9999-12-31T20:00:00-05:00",
                                                        "finished_at": "9999-12-31T21:00:00-05:00"})  # fmt: skip
    assert validate_record(past_end)
    # build gets them anyway (a caller that did not validate): set aside, the good record built
    summary = build([sample_record(), ancient, past_end], tmp_path / "ds")
    assert sorted(name for name, _, _ in summary.set_aside) == ["acme/ancient", "acme/late"]
    assert len(pd.read_parquet(tmp_path / "ds" / RESULTS_DIR)) == 1


_KILL_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from pipeline.dataset import build
    records = json.loads(Path(sys.argv[1]).read_text())
    print("ready", flush=True)
    sys.stdin.readline()
    build(records, Path(sys.argv[2]))
    print("done", flush=True)
    """
)


@pytest.mark.slow
def test_build_killed_at_random_moments_leaves_before_or_after(tmp_path: Path) -> None:
    import json

    base = [sample_record(model_id=f"org/model-{i}") for i in range(30)]
    extra = [
        sample_record(model_id=f"org/model-{i}", run={"finished_at": "2026-11-29T00:00:00+00:00"})
        for i in range(0, 60, 2)
    ]
    batch = tmp_path / "batch.json"
    batch.write_text(json.dumps(extra))
    script = tmp_path / "kill_build.py"
    script.write_text(_KILL_SCRIPT)

    def fresh(name: str) -> Path:
        folder = tmp_path / name
        build(base, folder)
        return folder

    reference = fresh("reference")
    before = _tree(reference)
    build(extra, reference)
    after = _tree(reference)
    assert before != after

    def run_once(out: Path, delay: float | None) -> float:
        proc = subprocess.Popen(
            [sys.executable, str(script), str(batch), str(out)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline().strip() == "ready"
        start = time.perf_counter()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        if delay is None:
            proc.wait(timeout=120)
            assert proc.returncode == 0
            return time.perf_counter() - start
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        return delay

    duration = run_once(fresh("timing"), None)
    rng = random.Random(20261129)
    states = {"before": 0, "after": 0}
    for attempt in range(20):
        out = fresh(f"killed-{attempt}")
        run_once(out, rng.uniform(0, duration * 1.1))
        tree = _tree(out)
        assert tree in (before, after), f"attempt {attempt}: the folder is neither before nor after"
        states["before" if tree == before else "after"] += 1
        pd.read_parquet(out / LATEST_DIR)  # and it stays readable
    assert states["before"] > 0, states  # the kills did land mid-build, not only after it
    build(extra, tmp_path / "killed-0")  # a later build cleans what killed builds left behind
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".trncat-stage-killed-0-")]


def test_the_summary_file_follows_every_build(tmp_path: Path) -> None:
    """data/summary.json, updated from each build's changes, always equals a count of the whole latest view."""
    from pipeline.dataset import read_summary
    from pipeline.dataset.front import summarize
    from tests.support.records import sample_failure

    out = tmp_path / "ds"
    later = {"started_at": "2026-11-29T10:00:00+00:00", "finished_at": "2026-11-29T10:05:00+00:00"}
    batches = [
        _records(),
        [sample_failure(model_id="trncat-demo/tiny-llama", run=later)],  # a pass becomes a fail
        [sample_record(model_id="org/new", run=later), sample_record(device="cpu", dtype="float32", run=later)],
        [sample_record(metrics={"decode_tokens_per_s": 1.0})],  # an older row: the latest does not change
    ]
    for batch in batches:
        build(batch, out)
        summary = read_summary(out)
        assert summary is not None
        whole = summarize(read_latest(out), shards=["all"])
        for key in ("total", "counts", "toolchains", "hardware"):
            assert summary[key] == whole[key], key


def test_a_community_record_never_displaces_the_ci_record_of_its_key(tmp_path: Path) -> None:
    """Attack (issue 11.9): a newer community record (the latest finish time) replaced the project's CI row."""
    out = tmp_path / "ds"
    build([sample_record(metrics={"decode_tokens_per_s": 77.0})], out)
    late = {"started_at": "2026-11-30T10:00:00+00:00", "finished_at": "2026-11-30T10:05:00+00:00"}
    build([sample_community(run=late, metrics={"decode_tokens_per_s": 9999.0})], out)
    [row] = read_latest(out)
    assert (row["source"], row["decode_tokens_per_s"]) == ("ci", 77.0)
    [kept] = earlier_runs(row)  # both stay visible: the community run in the key's history, with its source
    assert (kept["source"], kept["decode_tokens_per_s"]) == ("community", 9999.0)
    assert len(pd.read_parquet(out / RESULTS_DIR)) == 2
    # a community row alone stands for its key until the project measures it; then CI comes first
    other = tmp_path / "other"
    build([sample_community(metrics={"decode_tokens_per_s": 5.0})], other)
    build([sample_record(run={"finished_at": "2026-11-28T10:00:30+00:00"})], other)
    [row] = read_latest(other)
    assert row["source"] == "ci" and [h["source"] for h in earlier_runs(row)] == ["community"]


def test_a_case_variant_of_a_model_id_is_the_same_key_and_the_ci_row_still_wins(tmp_path: Path) -> None:
    """Issue 22.7: `Meta-Llama/Llama-3.1-8B` from a community PR became a second catalog entry beside the CI
    row of `meta-llama/Llama-3.1-8B` (the Hub resolves ids without case), dodging the rule that a CI row wins.
    Rows are keyed by the canonical (case-folded) id now: one key, the CI row its latest, the other its history."""
    ci = sample_record(model_id="meta-llama/Llama-3.1-8B")
    later = {"started_at": "2026-11-29T09:00:00+00:00", "finished_at": "2026-11-29T09:05:00+00:00"}
    variant = sample_community(model_id="Meta-Llama/Llama-3.1-8B", run=later)
    out = tmp_path / "ds"
    build([ci], out)
    build([variant], out)
    latest = read_latest(out)
    assert [(r["model_id"], r["source"]) for r in latest] == [("meta-llama/Llama-3.1-8B", "ci")]
    assert [h["source"] for h in earlier_runs(latest[0])] == ["community"]
    both = tmp_path / "both"
    build([variant, ci], both)  # one build with both: the same answer
    assert [(r["model_id"], r["source"]) for r in read_latest(both)] == [("meta-llama/Llama-3.1-8B", "ci")]


def test_history_keeps_at_most_history_limit_entries(tmp_path: Path) -> None:
    from pipeline.dataset.shards import HISTORY_LIMIT

    out = tmp_path / "ds"
    runs = [
        sample_record(
            run={"started_at": f"2026-11-{day:02d}T10:00:00+00:00", "finished_at": f"2026-11-{day:02d}T10:01:00+00:00"}
        )
        for day in range(1, HISTORY_LIMIT + 6)
    ]
    build(runs[:3], out)
    build(runs[3:], out)
    [row] = read_latest(out)
    history = earlier_runs(row)
    assert len(history) == HISTORY_LIMIT and len(pd.read_parquet(out / RESULTS_DIR)) == len(runs)
    assert history[0]["finished_at"].day == HISTORY_LIMIT + 4  # the newest are kept
    assert not build(runs, out).changed  # the dropped ones are still known (data/results): not added again


def test_an_odd_version_string_sets_that_record_aside_not_the_build(tmp_path: Path) -> None:
    """A version string that is no version (an argument smuggled into requirements.txt) is invalid since issue
    22.8 gave version fields a pattern: that record is set aside, the rest built with its scripts."""
    out = tmp_path / "ds"
    odd = sample_record(model_id="acme/odd", versions={"transformers": "5.0 --index-url http://evil"})
    summary = build([odd, sample_record()], out)
    assert summary.added == 1 and summary.scripts == ["scripts/trncat-demo/tiny-llama"]
    assert [(name, field) for name, field, _ in summary.set_aside] == [("acme/odd", "versions.transformers")]
    assert not (out / "scripts" / "acme" / "odd").exists()


@pytest.mark.parametrize("shard_bytes", [None, 30_500])
def test_a_build_touching_a_few_keys_of_a_shard_equals_building_everything_at_once(
    tmp_path: Path, shard_bytes: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build turns only the touched keys' rows of a shard into Python rows and keeps the rest as Arrow; the
    shard it writes is the one a build of every record at once writes, byte for byte."""
    if shard_bytes is not None:  # a 30-row shard passes it (a 1-row file is 29.5 kB): the latest view is split
        monkeypatch.setattr("pipeline.dataset.shards.LATEST_SHARD_BYTES", shard_bytes)

    def run(i: int, day: int) -> dict:
        stamp = f"2026-11-{day:02d}T09:00:00+00:00"
        return {"started_at": stamp, "finished_at": stamp} | ({} if i % 5 else {"runner": f"r{day}"})

    first = [sample_record(model_id=f"org/m{i:02d}", run=run(i, 20)) for i in range(30)]
    second = [sample_record(model_id=f"org/m{i:02d}", run=run(i, 21)) for i in range(0, 30, 7)]
    second += [sample_failure(model_id="org/m03", run=run(3, 22)), sample_record(model_id="org/zz", run=run(0, 21))]
    second += [sample_record(model_id="org/m04", run=run(4, 19))]  # older than the latest: history only
    in_turn, at_once = tmp_path / "in-turn", tmp_path / "at-once"
    build(first, in_turn)
    build(second, in_turn)
    build(first + second, at_once)
    shards = sorted(p.relative_to(in_turn).as_posix() for p in (in_turn / LATEST_DIR).glob("*.parquet"))
    assert len(shards) == 1 if shard_bytes is None else len(shards) > 1
    for shard in shards:
        assert (in_turn / shard).read_bytes() == (at_once / shard).read_bytes(), shard
    assert read_latest(in_turn) == read_latest(at_once)


@pytest.mark.parametrize("shard_bytes", [None, 30_500])
def test_a_partial_build_renders_the_scripts_a_whole_build_does(
    tmp_path: Path, shard_bytes: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build without the page (what publish runs) picks each touched model's representative from the rows it
    just merged, still in Python, and from the shards' other rows: its scripts are those a build of every
    record at once renders (a time with an offset, a model with rows of two tasks, a late
    result that only joins the history)."""
    if shard_bytes is not None:  # a 30-row shard passes it (a 1-row file is 29.5 kB): the latest view is split
        monkeypatch.setattr("pipeline.dataset.shards.LATEST_SHARD_BYTES", shard_bytes)

    def run(day: int, offset: str = "+00:00") -> dict:
        stamp = f"2026-11-{day:02d}T09:00:00{offset}"
        return {"started_at": stamp, "finished_at": stamp}

    embedding = json.loads((FIXTURES / "valid/sentence_embeddings_cpu_pass.json").read_text())
    first = [sample_record(model_id=f"org/m{i:02d}", run=run(20)) for i in range(12)]
    first.append({**embedding, "model_id": "org/m01", "run": {**embedding["run"], **run(20)}})
    second = [sample_record(model_id="org/m01", run=run(21, "+05:30"), revision="b" * 40)]
    second.append(sample_failure(model_id="org/m02", run=run(22)))
    second.append(sample_record(model_id="org/m03", run=run(19), revision="c" * 40))  # late: history only
    second.append({**embedding, "model_id": "org/m04", "run": {**embedding["run"], **run(23, "-03:00")}})
    in_turn, at_once = tmp_path / "in-turn", tmp_path / "at-once"
    build(first, in_turn)
    for path in (in_turn / "scripts").rglob("*"):
        if path.is_file():
            path.unlink()
    summary = build(second, in_turn, page=False)
    build(first + second, at_once)
    written = sorted(p.relative_to(in_turn).as_posix() for p in (in_turn / "scripts").rglob("*") if p.is_file())
    # (m03's late result changes no latest row: its scripts are not rendered again)
    assert sorted(summary.scripts) == ["scripts/org/m01", "scripts/org/m02", "scripts/org/m04"]
    names = ("run.py", "requirements.txt")
    assert written == sorted(f"{folder}/{name}" for folder in summary.scripts for name in names)
    for path in written:
        assert (in_turn / path).read_bytes() == (at_once / path).read_bytes(), path
    assert "b" * 40 in (in_turn / "scripts/org/m01/run.py").read_text()


def test_held_scripts_are_left_out_of_the_folder(tmp_path: Path) -> None:
    """A partial mirror leaves out a script the repo already holds with the same bytes (``held``)."""
    whole, mirror = tmp_path / "whole", tmp_path / "mirror"
    build(_records(), whole)
    scripts = {p.relative_to(whole).as_posix(): p.read_bytes() for p in (whole / "scripts").rglob("*") if p.is_file()}
    scripts["scripts/acme/vlm/run.py"] = b"an older run.py\n"
    summary = build(_records(), mirror, held=lambda path, data: scripts.get(path) == data)
    written = sorted(p.relative_to(mirror).as_posix() for p in (mirror / "scripts").rglob("*") if p.is_file())
    assert written == ["scripts/acme/vlm/run.py"] and summary.scripts == ["scripts/acme/vlm"]
    assert (mirror / written[0]).read_bytes() == (whole / written[0]).read_bytes()


def test_a_results_file_name_that_is_taken_is_never_overwritten(tmp_path: Path) -> None:
    """Issue 22.12: `data/results/<time>-<hash>.parquet` was written without checking that it was new, so a
    batch whose name was taken (the same newest time and hash prefix) silently replaced that file's history.
    A taken name is refused now and a fresh one picked (`-1`, `-2`, ...); the old file stays byte for byte."""
    from pipeline.dataset import run_name
    from pipeline.records import flatten

    out = tmp_path / "ds"
    build([sample_record(model_id="acme/first")], out)
    (old,) = sorted((out / RESULTS_DIR).glob("*.parquet"))
    before = old.read_bytes()
    batch = [sample_record(model_id="acme/second", run={"started_at": "2026-11-28T10:00:00+00:00",
                                                        "finished_at": "2026-11-28T10:05:00+00:00"})]  # fmt: skip
    taken = out / RESULTS_DIR / f"{run_name([flatten(r) for r in batch])}.parquet"
    old.rename(taken)  # the batch's own name already holds another publish's rows
    summary = build(batch, out)
    assert taken.read_bytes() == before, "the file that held the name is intact"
    assert summary.results_file == f"{RESULTS_DIR}/{taken.stem}-1.parquet"
    rows = pd.read_parquet(out / RESULTS_DIR)
    assert sorted(rows.model_id) == ["acme/first", "acme/second"]
    assert (out / "data" / "changes" / f"{taken.stem}-1.parquet").is_file()
