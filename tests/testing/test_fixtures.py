"""pipeline.testing: the sample records are valid records of what they claim, and the tiny models are real
models of their libraries, with no code file among their files (the hostile ones hold exactly their bait)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.models import check_remote_code
from pipeline.records import validate_record
from tests.support.hostile import build_remote_code_model, build_unknown_architecture
from tests.support.records import as_community, fake_revision, sample_community, sample_failure, sample_record

EXPECTED = {
    "text-generation": ("config.json", "LlamaForCausalLM"),
    "image-text-to-text": ("config.json", "LlavaForConditionalGeneration"),
    "sentence-embeddings": ("modules.json", None),
    "text-to-image": ("model_index.json", None),
}


def test_each_sample_record_is_valid_and_is_what_its_name_says() -> None:
    passed, failed, errored, community = (
        sample_record(),
        sample_failure(),
        sample_failure(status="error", stage="crash", code="infrastructure"),
        sample_community(),
    )
    for record in (passed, failed, errored, community):
        assert validate_record(record) == []
    assert (passed["status"], passed["failure"], passed["device"]) == ("pass", None, "neuron")
    assert (failed["status"], failed["failure"]["stage"]) == ("fail", "compile")
    assert errored["status"] == "error"
    assert community["run"]["source"] == "community" and community["run"]["github_run_id"] is None
    assert as_community(sample_record())["run"] == community["run"]
    assert fake_revision("a") == fake_revision("a") != fake_revision("b") and len(fake_revision("a")) == 40


@pytest.mark.parametrize("task", sorted(EXPECTED))
def test_each_tiny_model_is_a_model_of_its_library_with_no_code_file(task: str, tiny_models: dict[str, Path]) -> None:
    folder = tiny_models[task]
    marker, architecture = EXPECTED[task]
    assert (folder / marker).is_file()
    if architecture:
        assert json.loads((folder / "config.json").read_text())["architectures"] == [architecture]
    assert list(folder.rglob("*.py")) == []
    assert any(folder.rglob("*.safetensors"))
    check_remote_code(folder)  # the tiny models pass the gate the hostile one fails


def test_the_hostile_models_hold_their_bait(tmp_path: Path) -> None:
    from pipeline.errors import RemoteCodeRefused

    remote = build_remote_code_model(tmp_path / "remote", sentinel=tmp_path / "sentinel")
    assert sorted(p.name for p in remote.glob("*.py")) == ["configuration_remote.py", "modeling_remote.py"]
    with pytest.raises(RemoteCodeRefused):
        check_remote_code(remote)
    assert not (tmp_path / "sentinel").exists()
    unknown = build_unknown_architecture(tmp_path / "unknown")
    assert json.loads((unknown / "config.json").read_text())["model_type"] == "trncat-nonexistent"
