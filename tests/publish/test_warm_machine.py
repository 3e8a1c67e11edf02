"""Issue 47.4: "verified on a second machine" compares machines, never runner names. A JIT runner is named per job
(``runners/setup-runner.sh``: ``<host>-<label>-<index>-<epoch>``), so two jobs on one host, on the same chips, carry
two names; the record and the check name the machine (the EC2 instance id, else the host name), and that is
compared at warm-check, at publish and on the page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pipeline import constants
from pipeline.backends import machine_identity
from pipeline.cli import main
from pipeline.publish import collect_warm_checks
from pipeline.queue import warm_queue
from pipeline.records import WarmCheck, flatten
from tests.support.records import sample_record, sample_warm_check
from tests.warm_rows import with_bundle

HOST = "i-0a1b2c3d4e5f60718"
#: Two JIT registrations of one host's runner slot 0, a few minutes apart (setup-runner.sh's naming).
MADE_BY, CHECKED_BY = "trn2-a-trn2-4c-0-1764900000", "trn2-a-trn2-4c-0-1764900420"


def _record(machine: str | None = HOST) -> dict[str, Any]:
    record = with_bundle(sample_record(model_id="acme/m"), "ab" * 32)
    record["run"].update(runner=MADE_BY, machine=machine)
    return record


def test_the_machine_is_the_instance_id_else_the_host_name(tmp_path: Path) -> None:
    (tmp_path / "board_asset_tag").write_text(HOST + "\n")
    assert machine_identity(dmi=tmp_path) == HOST
    (tmp_path / "board_asset_tag").write_text("Not Specified\n")  # not EC2 (no sys_vendor): no metadata call either
    assert machine_identity(dmi=tmp_path).startswith("host:")


def test_two_runner_names_on_one_host_are_not_a_second_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import pipeline.publish as publish_face
    from pipeline.backends import machine as machine_module

    record = _record()
    path = tmp_path / "record.json"
    path.write_text(json.dumps(record))
    ran: list[str] = []

    def fake_check(record: dict[str, Any], **kwargs: Any) -> WarmCheck:
        ran.append(str(kwargs.get("runner")))
        check = sample_warm_check(sha256=record["compiled_cache"]["sha256"], runner=kwargs.get("runner"),
                                  machine=kwargs.get("machine"))  # fmt: skip
        return WarmCheck(**check)

    monkeypatch.setattr(publish_face, "warm_check", fake_check)
    monkeypatch.setattr(constants, "RUNNER_NAME", CHECKED_BY)
    monkeypatch.setattr(machine_module, "this_machine", lambda: HOST)
    monkeypatch.setattr("pipeline.backends.this_machine", lambda: HOST)
    code = main(["warm-check", str(path), "--model", "acme/m", "--out", str(tmp_path / "w.json")])
    assert code != 0 and ran == [] and "made this bundle" in capsys.readouterr().err
    # a record that names no machine cannot be told apart from another: refused too, and never queued
    path.write_text(json.dumps(_record(machine=None)))
    assert main(["warm-check", str(path), "--model", "acme/m"]) != 0 and ran == []
    assert warm_queue([flatten(_record(machine=None))], []).entries == []
    # publish: a check from another runner name on the bundle's own machine is set aside
    queue = warm_queue([flatten(record)], [])
    (entry,) = queue.entries
    assert entry["made_on"] == HOST
    queue_file = tmp_path / "warm-queue.json"
    queue_file.write_text(json.dumps(queue.to_dict()))
    folder = tmp_path / "downloaded" / f"warm-{entry['artifact']}"
    folder.mkdir(parents=True)
    check = sample_warm_check(model_id=entry["model_id"], revision=entry["revision"], sha256=entry["sha256"],
                              runner=CHECKED_BY, machine=HOST)  # fmt: skip
    (folder / f"{entry['artifact']}.json").write_text(json.dumps(check))
    collected = collect_warm_checks(tmp_path / "downloaded", queue_file=queue_file)
    assert collected.accepted == [] and [p.field for p in collected.problems] == ["machine"]
    # on another machine it is accepted
    (folder / f"{entry['artifact']}.json").write_text(json.dumps({**check, "machine": "i-0ffffffffffffffff"}))
    assert len(collect_warm_checks(tmp_path / "downloaded", queue_file=queue_file).accepted) == 1


def test_the_page_claims_no_second_machine_for_a_check_that_compared_none() -> None:
    from pipeline.page.warm import warm_index, warm_state

    row = flatten(with_bundle(sample_record(model_id="acme/m"), "ab" * 32))
    check = sample_warm_check(model_id="acme/m", revision=row["revision"], sha256="ab" * 32)
    assert warm_state(row, warm_index([check])) == "verified"
    assert warm_state(row, warm_index([{**check, "machine": None}])) is None
