"""The result-record contract: `trncat validate` on fixture files, and the record's flat Arrow form.

Each file in ``fixtures/invalid/`` breaks exactly one rule; ``fixtures/invalid/EXPECTED.json`` names the field
that the problem line must name. ``fixtures/valid/`` holds a neuron pass, a cpu pass and a neuron fail of
text-generation, and a cpu pass of sentence-embeddings and of text-to-image (schema 1.2).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from pipeline.cli import main
from pipeline.records import (
    COLUMN_NAMES,
    arrow_schema,
    dump_record,
    flatten,
    parse_record,
    unflatten,
    validate_paths,
    validate_record,
)
from tests import FIXTURES
from tests.support.records import sample_failure, sample_record

VALID_DIR = FIXTURES / "valid"
INVALID_DIR = FIXTURES / "invalid"
EXPECTED: dict[str, str] = json.loads((INVALID_DIR / "EXPECTED.json").read_text(encoding="utf-8"))
VALID_FILES = sorted(VALID_DIR.glob("*.json"))
INVALID_FILES = sorted(p for p in INVALID_DIR.glob("*.json") if p.name != "EXPECTED.json")


def _validate(capsys: pytest.CaptureFixture[str], *paths: Path | str, as_json: bool = False) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(["validate", *(str(p) for p in paths), *(["--json"] if as_json else [])])
    out, err = capsys.readouterr()
    return rc, out, err


def _names(field: str, message: str, expected: str) -> bool:
    """True when a problem names ``expected``: as its field, or as a quoted key in the message of its parent.

    A missing or unknown key is reported on the object that holds it (``(record)`` at the top), and an
    ``anyOf`` mismatch on the object as a whole; both quote the key in the message.
    """
    if field == expected:
        return True
    parent, _, leaf = expected.rpartition(".")
    return field == (parent or "(record)") and (f"'{leaf}'" in message or f'"{leaf}"' in message)


def _text_problems(out: str) -> list[tuple[str, str, str]]:
    problems = []
    for line in out.splitlines():
        file, field, message = line.split(": ", 2)
        problems.append((file, field, message))
    return problems


def test_fixture_inventory() -> None:
    assert len(INVALID_FILES) >= 24
    assert set(EXPECTED) == {p.name for p in INVALID_FILES}, "EXPECTED.json and the invalid fixtures disagree"
    assert [p.stem for p in VALID_FILES] == [
        "cpu_pass",
        "neuron_fail",
        "neuron_pass",
        "sentence_embeddings_cpu_pass",
        "text_to_image_cpu_pass",
    ]


@pytest.mark.parametrize("path", INVALID_FILES, ids=lambda p: p.stem)
def test_invalid_fixture_is_rejected_naming_its_field(capsys: pytest.CaptureFixture[str], path: Path) -> None:
    expected = EXPECTED[path.name]

    rc, out, err = _validate(capsys, path)
    assert rc == 1
    problems = _text_problems(out)
    assert problems, f"no problem line for {path.name}"
    assert {file for file, _, _ in problems} == {str(path)}
    # One rule broken: every line is about that rule, so none of them may name another field.
    assert all(_names(field, message, expected) for _, field, message in problems), out
    assert "1 file(s): 0 valid, 1 invalid" in err

    rc, out, _ = _validate(capsys, path, as_json=True)
    assert rc == 1
    report = json.loads(out)
    assert (report["files"], report["valid"], report["invalid"]) == (1, 0, 1)
    assert report["problems"]
    assert all(p["file"] == str(path) and _names(p["field"], p["message"], expected) for p in report["problems"])


def _changes(a: Any, b: Any) -> int:
    """How many edits turn ``a`` into ``b``: a key added, removed or given another value (or type) is one."""
    if isinstance(a, dict) and isinstance(b, dict):
        return sum(1 if (key in a) != (key in b) else _changes(a[key], b[key]) for key in a.keys() | b.keys())
    return 0 if type(a) is type(b) and a == b else 1


def _object_fixtures() -> list[Path]:
    """The invalid fixtures that parse to an object (in the others the text or the shape is the broken rule)."""
    out = []
    for path in INVALID_FILES:
        try:
            if isinstance(parse_record(path.read_bytes()), dict):
                out.append(path)
        except (ValueError, UnicodeDecodeError):
            pass
    return out


@pytest.mark.parametrize("path", _object_fixtures(), ids=lambda p: p.stem)
def test_invalid_fixture_is_one_change_from_a_valid_one(path: Path) -> None:
    record = parse_record(path.read_bytes())
    distances = [_changes(json.loads(valid.read_text(encoding="utf-8")), record) for valid in VALID_FILES]
    assert min(distances) == 1, f"{path.name} is {min(distances)} edits away from the nearest valid fixture"


def test_valid_fixtures_pass(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _validate(capsys, *VALID_FILES)
    assert (rc, out) == (0, "")
    assert "5 file(s): 5 valid, 0 invalid" in err

    rc, out, _ = _validate(capsys, VALID_DIR, as_json=True)
    assert rc == 0
    assert json.loads(out) == {"files": 5, "valid": 5, "invalid": 0, "problems": []}


@pytest.mark.parametrize("path", VALID_FILES, ids=lambda p: p.stem)
def test_valid_fixture_is_valid_both_ways(path: Path) -> None:
    record = parse_record(path.read_bytes())
    assert validate_record(record) == []
    assert validate_record(record, from_strict_json=True) == []


def _mixed_folder(root: Path) -> tuple[set[str], set[str]]:
    """Valid and invalid fixtures copied into nested folders; returns (valid paths, invalid paths)."""
    good, bad = set(), set()
    for index, source in enumerate(VALID_FILES + INVALID_FILES):
        folder = root / ("a" if index % 2 else "b") / ("deeper" if index % 3 == 0 else "")
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / source.name
        shutil.copyfile(source, target)
        (good if source.parent == VALID_DIR else bad).add(str(target))
    (root / "notes.txt").write_text("not a record, not a .json file: ignored\n")
    return good, bad


def test_mixed_folder_reports_only_the_bad_files(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    good, bad = _mixed_folder(tmp_path)

    rc, out, err = _validate(capsys, tmp_path)
    assert rc == 1
    reported = {file for file, _, _ in _text_problems(out)}
    assert reported == bad
    assert f"{len(good) + len(bad)} file(s): {len(good)} valid, {len(bad)} invalid" in err

    rc, out, _ = _validate(capsys, tmp_path, as_json=True)
    assert rc == 1
    report = json.loads(out)
    assert (report["files"], report["valid"], report["invalid"]) == (len(good) + len(bad), len(good), len(bad))
    assert {p["file"] for p in report["problems"]} == bad
    for problem in report["problems"]:
        assert _names(problem["field"], problem["message"], EXPECTED[Path(problem["file"]).name]), problem


def test_validate_paths_keeps_the_good_records(tmp_path: Path) -> None:
    good, bad = _mixed_folder(tmp_path)
    report = validate_paths([tmp_path])
    assert {file for file, _ in report.records} == good
    assert set(report.bad_files) == bad
    assert report.files == len(good) + len(bad)
    assert not report.ok


def test_a_path_named_twice_is_checked_once(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _validate(capsys, VALID_DIR, VALID_FILES[0], as_json=True)
    assert rc == 0
    assert json.loads(out)["files"] == 5


def test_missing_path_is_one_clear_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "result.json"
    rc, out, err = _validate(capsys, missing)
    assert rc == 1
    assert out == ""
    assert err.splitlines() == [f"error: {missing}: no such file or folder"]


def test_empty_folder_is_not_a_success(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rc, _, err = _validate(capsys, tmp_path)
    assert rc == 1
    assert "no record files found" in err


# -- records built in Python: jsonschema-rs reads NaN and Infinity as null, so the validator must look itself --

_NON_FINITE_PATHS = [
    ("neuron_pass", "metrics.load_s"),
    ("neuron_pass", "metrics.compile_s"),
    ("neuron_pass", "metrics.wall_s"),
    ("neuron_pass", "metrics.roofline_fraction"),
    ("neuron_pass", "metrics.latency_s.p50"),
    ("neuron_pass", "metrics.latency_s.p90"),
    ("neuron_pass", "metrics.peak_device_memory_bytes"),
    ("neuron_fail", "metrics.ttft_s"),
    ("neuron_fail", "metrics.latency_s"),
    ("neuron_fail", "metrics.decode_tokens_per_s"),
    ("neuron_pass", "hardware.memory_per_core_bytes"),
    ("neuron_pass", "hardware.cores_available"),
    ("neuron_pass", "hardware.core_config"),
    ("neuron_pass", "cores"),
    ("neuron_pass", "workload.image_size"),
    ("neuron_pass", "failure"),
    ("neuron_fail", "failure.message"),
    ("neuron_fail", "failure.code"),
    ("neuron_pass", "plan"),
    ("neuron_pass", "plan.total_bytes"),
    ("neuron_pass", "plan.tp_degree"),
    ("neuron_pass", "run.runner"),
    ("neuron_pass", "run.github_run_id"),
    ("neuron_pass", "versions.cuda"),
    ("neuron_pass", "attempts"),
]


def _base(name: str) -> dict[str, Any]:
    return json.loads((VALID_DIR / f"{name}.json").read_text(encoding="utf-8"))


def _set(record: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    target = record
    for key in parents:
        target = target[key]
    target[leaf] = value


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize(("base", "dotted"), _NON_FINITE_PATHS, ids=[d for _, d in _NON_FINITE_PATHS])
def test_non_finite_numbers_built_in_python_are_rejected(base: str, dotted: str, value: float) -> None:
    record = _base(base)
    _set(record, dotted, value)
    problems = validate_record(record)
    assert problems
    assert dotted in {field for field, _ in problems}, problems


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_non_finite_numbers_deep_inside_lists_are_rejected(value: float) -> None:
    record = _base("neuron_pass")
    record["attempts"] = [{"cores": 1, "status": "fail", "stage": "oom", "code": None}, [[{"x": value}]]]
    assert "attempts.1.0.0.x" in {field for field, _ in validate_record(record)}


@pytest.mark.parametrize("value", [None, [], "record", 3, 2.5, math.nan, {1: "x"}, {"model_id": object()}, ()])
def test_validate_record_rejects_what_is_not_a_record_without_raising(value: Any) -> None:
    problems = validate_record(value)
    assert problems
    assert all(isinstance(field, str) and isinstance(message, str) for field, message in problems)


# -- nesting deeper than Python's recursion limit ------------------------------------------------------------
# A 1 MiB file may hold 100,000 nested arrays. Today json.loads raises RecursionError, which check_file does not
# catch, so `trncat validate` dies with a traceback and the files after it are never checked; validate_record
# raises it for such a record built in Python. Both should report the record as invalid instead.

_DEPTH = 20_000


def test_deeply_nested_file_is_reported_and_the_others_still_checked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = dump_record(_base("neuron_pass"))
    (tmp_path / "a_deep.json").write_text(text[:-2] + ', "x": ' + "[" * _DEPTH + "]" * _DEPTH + "}\n")
    shutil.copyfile(VALID_DIR / "neuron_pass.json", tmp_path / "b_good.json")
    rc, out, _ = _validate(capsys, tmp_path, as_json=True)
    report = json.loads(out)
    assert rc == 1
    assert (report["files"], report["valid"], report["invalid"]) == (2, 1, 1)


def test_deeply_nested_record_built_in_python_is_rejected_without_raising() -> None:
    record = _base("neuron_pass")
    nested: list[Any] = []
    for _ in range(_DEPTH):
        nested = [nested]
    record["metrics"]["extra"] = nested
    assert validate_record(record)


# -- the flat Arrow form --------------------------------------------------------------------------------------


def _samples() -> list[dict[str, Any]]:
    return [
        *(_base(p.stem) for p in VALID_FILES),
        sample_record(),
        sample_failure(),
        sample_failure(status="error", stage="timeout", code="timeout", message="no answer in 900 s"),
        sample_record(task="image-text-to-text", workload={"image_size": 336}, plan=None, attempts=[]),
        sample_record(attempts=[{"cores": 1, "status": "fail", "stage": "oom", "code": "ncc_eoom001"}], cores=2),
        sample_record(architecture="LlamaForCausalLM", model_type="llama",
                      base_model=["meta-llama/Llama-3.2-1B"]),
        sample_record(architecture="StableDiffusionPipeline"),
    ]  # fmt: skip


@pytest.mark.parametrize("index", range(len(_samples())))
def test_flatten_unflatten_round_trip(index: int) -> None:
    record = _samples()[index]
    assert validate_record(record) == []
    row = flatten(record)
    assert tuple(row) == COLUMN_NAMES
    assert unflatten(row) == record


def test_arrow_schema_accepts_flattened_rows_and_gives_them_back() -> None:
    import pyarrow as pa

    records = _samples()
    table = pa.Table.from_pylist([flatten(r) for r in records], schema=arrow_schema())
    assert table.num_rows == len(records)
    assert table.schema.names == list(COLUMN_NAMES)
    assert [unflatten(row) for row in table.to_pylist()] == records
    assert table.column("status").to_pylist() == [r["status"] for r in records]
    assert table.column("latency_p50_s").to_pylist()[0] is not None


def test_an_integer_in_a_float_field_reaches_arrow() -> None:
    # JSON has one number type: a valid 2**63 - 1 in a float field must still fill the float64 column.
    import pyarrow as pa

    record = sample_record()
    record["metrics"]["decode_tokens_per_s"] = 2**63 - 1
    assert validate_record(record) == []
    table = pa.Table.from_pylist([flatten(record)], schema=arrow_schema())
    assert table.column("decode_tokens_per_s")[0].as_py() == float(2**63 - 1)


def test_a_record_finished_in_the_future_is_rejected() -> None:
    """Attack (issue 11.9): ``finished_at`` 2099 made a record "latest" for its key forever."""
    soon = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=20)).isoformat(timespec="seconds")
    later = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=30)).isoformat(timespec="seconds")
    for finished in ("2099-01-01T00:00:00Z", later):
        problems = validate_record(sample_record(run={"finished_at": finished}))
        assert ("run.finished_at", f"{finished} is more than a day in the future") in problems
    assert validate_record(sample_record(run={"finished_at": soon})) == []  # clock skew is tolerated


@pytest.mark.parametrize("source", ["community", "local"])
def test_a_non_ci_record_cannot_carry_ci_provenance(source: str) -> None:
    """Attack (issue 11.11): a community record claiming a project runner and run id passed as CI-made."""
    forged = sample_record(run={"source": source})
    fields = {f for f, _ in validate_record(forged)}
    assert fields == {"run.runner", "run.github_run_id", "run.github_sha"}
    honest = sample_record(run={"source": source, "runner": None, "github_run_id": None, "github_sha": None})
    assert validate_record(honest) == []
    assert validate_record(sample_record()) == []  # a CI record names its run


# -- schema 1.3: the model's family ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("architecture", "LlamaForCausalLM"),
        ("architecture", None),
        ("model_type", "xlm-roberta"),
        ("model_type", "qwen2_vl"),
        ("base_model", ["meta-llama/Llama-3.1-8B", "Qwen/Qwen2.5-7B"]),
        ("base_model", None),
    ],
)
def test_family_fields_are_optional_and_typed(field: str, value: Any) -> None:
    assert validate_record(sample_record(**{field: value})) == []


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("architecture", "Llama For CausalLM"),
        ("architecture", "1Llama"),
        ("architecture", "x" * 129),
        ("architecture", "LlamaForCausalLM\n"),
        ("model_type", "../llama"),
        ("model_type", ""),
        ("model_type", 3),
        ("base_model", []),
        ("base_model", "meta-llama/Llama-3.1-8B"),
        ("base_model", ["meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-8B"]),
        ("base_model", ["./local/path"]),
        ("base_model", ["org/a--b"]),
        ("base_model", [f"org/m{i}" for i in range(33)]),
    ],
)
def test_bad_family_fields_are_rejected_naming_the_field(field: str, value: Any) -> None:
    problems = validate_record(sample_record(**{field: value}))
    assert problems and all(name.startswith(field) for name, _ in problems), problems


def test_family_columns_round_trip() -> None:
    record = sample_record(architecture="BertModel", model_type="bert", base_model=["o/b"])
    row = flatten(record)
    assert (row["architecture"], row["model_type"], row["base_model"]) == ("BertModel", "bert", ["o/b"])
    assert unflatten(row) == record
    # Absent (unknown) fields stay absent: a null column gives nothing back.
    bare = unflatten(flatten(sample_record()))
    assert not {"architecture", "model_type", "base_model"} & set(bare)


def test_control_characters_and_odd_versions_are_refused_and_newlines_in_messages_stay() -> None:
    """Issue 22.8: a control character in a version string made feed.xml unparseable for every reader (XML 1.0
    has no way to write it). Version fields have a pattern now and free text may hold no C0 control but tab,
    newline and carriage return."""
    bad = {
        "versions.transformers": sample_record(versions={"transformers": "5.0.0\x0b"}),
        "versions.torch": sample_record(versions={"torch": "2.13 beta"}),
        "notes.0": sample_record(notes=["compiled\x07"]),
        "run.runner": sample_record(run={"runner": "trn2-1\x1b[2J"}),
        "hardware.accelerator": sample_record(hardware={"accelerator": "Trainium2\x00"}),
    }
    for field, record in bad.items():
        assert field in {f for f, _ in validate_record(record)}, field
    failure = sample_failure(message="Traceback (most recent call last):\n\tFile x\r\nRuntimeError: boom")
    assert validate_record(failure) == []
    fine = sample_record(versions={"torch": "2.13.0+cpu", "container_image": "public.ecr.aws/neuron/x@sha256:ab12",
                                   "driver": "2.31.7.0", "runtime": "1:2.35.30.0~ubuntu"})  # fmt: skip
    assert validate_record(fine) == []


def test_an_emulated_record_is_refused_unless_the_harness_asks_and_never_stands_for_a_model() -> None:
    """Issue 21: a record made on the Neuron emulator is valid for the harness that writes it, refused by trncat
    validate (and so by the submission check, build and publish), and never the row that stands for a model."""
    from pipeline.records import representative

    record = sample_record()
    record["hardware"]["emulated"] = True
    assert validate_record(record, allow_emulated=True) == []
    problems = validate_record(record)
    assert [f for f, _ in problems] == ["hardware.emulated"] and "Neuron emulator" in problems[0][1]
    cpu = sample_record(device="cpu")
    older = flatten(record)
    older["finished_at"] = flatten(cpu)["finished_at"].replace(year=2025)
    real = {**older, "emulated": None}
    assert representative([real, flatten(cpu)])["device"] == "neuron"  # a Trainium row wins, however old
    assert representative([older, flatten(cpu)])["device"] == "cpu"  # an emulated one is no Trainium row
    record["device"] = "cpu"
    assert ("hardware.emulated", "only the neuron device is emulated") in validate_record(record, allow_emulated=True)


def test_compiled_cache_skipped_holds_no_control_character() -> None:
    """Issue 29.10: the one free-text field without the no-control-character rule (a bundle's refusal, quoted into
    the record, reached the feed and the page)."""
    record = sample_record()
    record["compiled_cache_skipped"] = "the cache held \x1b[2Jx.py"
    assert "compiled_cache_skipped" in {f for f, _ in validate_record(record)}
    record["compiled_cache_skipped"] = "the cache held 'ab/x.py'\n\tnot a NEFF"
    assert validate_record(record) == []


def test_an_ungraded_record_reads_with_its_grade_unknown_and_a_graded_one_keeps_its_figures() -> None:
    """Issue 31: a record whose check has no grade (the cosine check only) is valid and its row has no grade; a
    graded record's grade and figures round-trip; a pass never diverges, a failure at stage accuracy is graded
    diverges."""
    ungraded = sample_record()
    assert validate_record(ungraded) == []
    row = flatten(ungraded)
    assert row["agreement_grade"] is None and row["agreement_topk"] is None
    assert "grade" not in unflatten(row)["agreement"]
    graded = sample_record(agreement={
        "grade": "bfloat16 noise", "steps": 64, "teacher_forced": True, "greedy_match_rate": 0.97,
        "first_divergence_step": 12, "sigma_ratio": 0.98, "bc": 0.97, "noise_reference": "cpu-bfloat16",
        "topk": [{"k": "5", "atol": 1e-5, "rtol": 0.011, "max_abs_error": 0.2, "max_rel_error": 0.02, "step": 12}],
    })  # fmt: skip
    assert validate_record(graded) == []
    assert unflatten(flatten(graded)) == graded
    wrong = sample_record(agreement={"grade": "diverges", "failed_step": 3})
    assert "agreement.grade" in {f for f, _ in validate_record(wrong)}
    failed = sample_record(
        status="fail", agreement={"grade": "within tolerance"},
        failure={"stage": "accuracy", "code": "wrong_answer", "message": "m"},
    )  # fmt: skip
    assert "agreement.grade" in {f for f, _ in validate_record(failed)}
    # A low cosine no longer fails a graded pass by itself: the grade decides (an embedding within bfloat16 noise).
    noise = sample_record(agreement={"logits_cosine": 0.5, "grade": "bfloat16 noise"})
    assert validate_record(noise) == []
