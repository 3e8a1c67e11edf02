"""The release watch, on a fixture in the Neuron manifest's own format (tests/fixtures/release/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.errors import ConfigError
from pipeline.release import TOOLCHAIN_FILE, current_release, parse_manifest, plan_bump
from tests import FIXTURES, ROOT

MANIFEST = FIXTURES / "release" / "n2-manifest-2.33.0.json"
SOURCE = "https://example.test/n2-manifest.json"
REAL = (ROOT / TOOLCHAIN_FILE).read_text(encoding="utf-8")
#: The pins Neuron 2.32.0 ships (the manifest's own 2.32.0 entry), in place of runners/toolchain.yaml's 2.33.0 ones.
PINS_233_TO_232 = {
    'neuronx_cc: "2.28.7631.0"': 'neuronx_cc: "2.27.5334.0"',
    'nki: "0.7.0"': 'nki: "0.6.0"',
    'aws-neuronx-runtime-lib: "2.35.30.0*"': 'aws-neuronx-runtime-lib: "2.34.10.0*"',
    'aws-neuronx-collectives: "2.35.43.0*"': 'aws-neuronx-collectives: "2.34.10.0*"',
    'aws-neuronx-tools: "2.33.38.0*"': 'aws-neuronx-tools: "2.32.28.0*"',
    'aws-neuronx-dkms: "2.31.7.0*"': 'aws-neuronx-dkms: "2.30.2.0*"',
    "Neuron SDK 2.33.0": "Neuron SDK 2.32.0",
    "release content of Neuron 2.33.0": "release content of Neuron 2.32.0",
}
VLLM = 'vllm_neuron: "{}"\n'


def _at_232(text: str, *, vllm: bool = True) -> str:
    for new, old in PINS_233_TO_232.items():
        assert new in text, new
        text = text.replace(new, old)
    return text.replace('nki: "0.6.0"\n', 'nki: "0.6.0"\n' + VLLM.format("0.24.0.1.1.0")) if vllm else text


def _files(toolchain: str) -> dict[str, str]:
    return {
        TOOLCHAIN_FILE: toolchain,
        "runners/Dockerfile": (ROOT / "runners/Dockerfile").read_text(encoding="utf-8").replace(":2.33.0", ":2.32.0"),
        "runners/arc-values.yaml": (ROOT / "runners/arc-values.yaml").read_text().replace(":2.33.0", ":2.32.0"),
    }


def test_the_manifest_parses_per_instance_newest_first_and_skips_other_instances() -> None:
    manifest = parse_manifest(MANIFEST.read_text(encoding="utf-8"))
    assert manifest.manifest_version == "2.33.0" and manifest.manifest_date == "10/19/2026"
    release = manifest.latest_release()
    assert release.version == "2.33.0"
    assert release.versions("torch-neuronx") == ("2.14.3.0", "2.13.3.0")  # the Trn1 XLA build is not Trn2's
    assert release.versions("torch-xla") == ("2.13.0", "2.12.0", "2.11.0")  # numeric order, newest first
    assert manifest.releases["2.32.0"].versions("efa-installer") == ("1.47",)
    assert "torch-neuronx" not in manifest.releases["2.32.0"].packages


@pytest.mark.parametrize(
    "edit",
    [
        lambda m: m.pop("neuron_releases"),
        lambda m: m["latest_release"].append({"instance": "trn2", "version": "2.34; rm -rf /"}),
        lambda m: m["neuron_releases"][0]["packages"].append({"name": "nki", "version": "<script>",
                                                              "supported_instances": ["trn2"]}),
        lambda m: m["neuron_releases"][0]["packages"].append({"name": "../x", "version": "1.0",
                                                              "supported_instances": ["trn2"]}),
    ],
)  # fmt: skip
def test_a_manifest_with_a_bad_shape_or_version_is_refused(edit: object) -> None:
    data = json.loads(MANIFEST.read_text(encoding="utf-8"))
    edit(data)  # type: ignore[operator]
    with pytest.raises(ConfigError, match="Neuron manifest"):
        parse_manifest(json.dumps(data))


def test_the_watch_bumps_2_32_to_exactly_the_pins_of_runners_toolchain_yaml() -> None:
    """From 2.32.0's pins and the 2.33.0 manifest, the new toolchain.yaml is the repository's (which was written
    by hand from the 2.33.0 docs), plus the vllm-neuron pin; the image tag moves in both files."""
    bump = plan_bump(_files(_at_232(REAL)), parse_manifest(MANIFEST.read_text(encoding="utf-8")), source=SOURCE)
    assert bump is not None and (bump.old, bump.new) == ("2.32.0", "2.33.0")
    expected = REAL.replace('nki: "0.7.0"\n', 'nki: "0.7.0"\n' + VLLM.format("0.29.0.1.2.0"))
    assert bump.files[TOOLCHAIN_FILE] == expected
    assert "trncat-runner:2.33.0" in bump.files["runners/Dockerfile"]
    assert "REGISTRY/trncat-runner:2.33.0" in bump.files["runners/arc-values.yaml"]
    changed = {p.key: (p.old, p.new) for p in bump.pins if p.changed}
    assert changed == {
        "neuronx_cc": ("2.27.5334.0", "2.28.7631.0"),
        "nki": ("0.6.0", "0.7.0"),
        "vllm_neuron": ("0.24.0.1.1.0", "0.29.0.1.2.0"),
        "apt.aws-neuronx-runtime-lib": ("2.34.10.0*", "2.35.30.0*"),
        "apt.aws-neuronx-collectives": ("2.34.10.0*", "2.35.43.0*"),
        "apt.aws-neuronx-tools": ("2.32.28.0*", "2.33.38.0*"),
        "apt.aws-neuronx-dkms": ("2.30.2.0*", "2.31.7.0*"),
        "runner image tag": ("2.32.0", "2.33.0"),
    }
    body = bump.body
    assert bump.title == "Neuron 2.33.0: bump the runners' toolchain from 2.32.0"
    assert "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/release-notes/2.33.0.html" in body
    assert "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/release-notes/releasecontent.html" in body
    row = f"| `{TOOLCHAIN_FILE}` | `neuronx_cc` | 2.27.5334.0 | 2.28.7631.0 | {SOURCE}: neuron_releases 2.33.0, "
    assert row + "neuronx-cc (supported on trn2) |" in body
    # torch-neuronx for the pinned torch (2.14), not 2.13's nor Trn1's XLA build; it was already the pin.
    assert f"- `torch_neuronx` 2.14.3.0: {SOURCE}: neuron_releases 2.33.0, torch-neuronx" in body
    assert "- `torch` 2.14.0: kept: torch-neuronx's family is PyTorch 2.14 (the manifest names no torch)" in body
    assert "- `transformers` 5.24.0: kept: not a Neuron package" in body
    assert "passed first, then what failed at compile, then the rest" in body


def test_without_a_vllm_neuron_pin_the_body_says_so_and_adds_none() -> None:
    bump = plan_bump(_files(_at_232(REAL, vllm=False)), parse_manifest(MANIFEST.read_text()), source=SOURCE)
    assert bump is not None and bump.files[TOOLCHAIN_FILE] == REAL
    assert "vllm-neuron 0.29.0.1.2.0 is in the manifest's 2.33.0; runners/toolchain.yaml has no vllm_neuron pin" in (
        bump.body
    )


def test_nothing_new_opens_no_pull_request() -> None:
    manifest = parse_manifest(MANIFEST.read_text(encoding="utf-8"))
    assert current_release(REAL) == "2.33.0"
    assert plan_bump({TOOLCHAIN_FILE: REAL}, manifest, source=SOURCE) is None
    newer = REAL.replace("Neuron SDK 2.33.0", "Neuron SDK 2.34.0")  # a manifest older than the pins: nothing either
    assert plan_bump({TOOLCHAIN_FILE: newer}, manifest, source=SOURCE) is None


def test_a_per_torch_package_is_taken_for_the_pinned_torch() -> None:
    """libtorch_neuronx_lite (what vLLM Neuron compiles through) ships one build per PyTorch version, like
    torch-neuronx: with torch pinned at 2.12, the 2.32.0 manifest's 2.12.0.1.0.1284, not 2.11's."""
    data = json.loads(MANIFEST.read_text(encoding="utf-8"))
    data["latest_release"] = [{"instance": "trn2", "version": "2.32.0"}]
    data["neuron_releases"][1]["packages"] += [
        {"name": "libtorch_neuronx_lite", "version": v, "supported_instances": ["trn2", "trn3"]}
        for v in ("2.11.0.1.0.1284", "2.12.0.1.0.1284")
    ]  # the manifest's own 2.32.0 entries
    toolchain = '# Neuron SDK 2.31.0\ntorch: "2.12.0"\nlibtorch_neuronx_lite: "2.11.0.1.0.1284"\n'
    bump = plan_bump({TOOLCHAIN_FILE: toolchain}, parse_manifest(json.dumps(data)), source=SOURCE)
    assert bump is not None and 'libtorch_neuronx_lite: "2.12.0.1.0.1284"' in bump.files[TOOLCHAIN_FILE]


def test_a_package_the_new_release_lacks_keeps_its_pin_and_says_so() -> None:
    data = json.loads(MANIFEST.read_text(encoding="utf-8"))
    data["neuron_releases"][0]["packages"] = [
        p for p in data["neuron_releases"][0]["packages"] if p["name"] != "aws-neuronx-dkms"
    ]
    bump = plan_bump(_files(_at_232(REAL)), parse_manifest(json.dumps(data)), source=SOURCE)
    assert bump is not None and 'aws-neuronx-dkms: "2.30.2.0*"' in bump.files[TOOLCHAIN_FILE]
    assert "kept: the manifest's 2.33.0 lists no aws-neuronx-dkms on trn2" in bump.body


def test_the_command_rewrites_the_files_writes_the_body_and_then_finds_nothing_new(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipeline.cli import main

    for relative, text in _files(_at_232(REAL)).items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text, encoding="utf-8")
    args = ["release-watch", "--manifest", str(MANIFEST), "--source", SOURCE, "--root", str(tmp_path), "--json"]
    assert main([*args, "--body", str(tmp_path / "pr.md")]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info == {"new": "2.33.0", "old": "2.32.0", "title": "Neuron 2.33.0: bump the runners' toolchain from 2.32.0",
                    "branch": "release-watch/neuron-2.33.0",
                    "files": ["runners/Dockerfile", "runners/arc-values.yaml", TOOLCHAIN_FILE]}  # fmt: skip
    assert (tmp_path / TOOLCHAIN_FILE).read_text(encoding="utf-8") == REAL.replace(
        'nki: "0.7.0"\n', 'nki: "0.7.0"\n' + VLLM.format("0.29.0.1.2.0")
    )
    assert "| `runners/Dockerfile` | `runner image tag` | 2.32.0 | 2.33.0 |" in (tmp_path / "pr.md").read_text()
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert main(args) == 0 and json.loads(capsys.readouterr().out) == {"new": None}
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before  # nothing new: nothing written


def test_a_version_ending_in_a_newline_is_refused_and_the_watch_loads_what_it_wrote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 47.6: ``$`` matches before a final newline, so ``"2.99.0\\n"`` passed as a version and the bump wrote a
    toolchain.yaml that no longer loads. The manifest refuses it; and a bump whose output does not load back (here a
    manifest parsed by hand, past the check) is refused and the toolchain file is left as it was."""
    from pipeline.cli import main
    from pipeline.release.manifest import Manifest, Release

    data = json.loads(MANIFEST.read_text(encoding="utf-8"))
    data["latest_release"] = [{"instance": "trn2", "version": "2.99.0\n"}]
    with pytest.raises(ConfigError, match="not a version"):
        parse_manifest(json.dumps(data))
    good = parse_manifest(MANIFEST.read_text(encoding="utf-8"))
    release = good.latest_release()
    bad_release = Release("2.99.0\nnki: [", release.packages)
    bad = Manifest(good.manifest_version, None, {"trn2": bad_release.version}, {bad_release.version: bad_release})
    bump = plan_bump(_files(_at_232(REAL)), bad, source=SOURCE)
    assert bump is not None  # the plan alone does not see it: the command must load what it wrote
    for relative, text in _files(_at_232(REAL)).items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text, encoding="utf-8")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    manifest_file = tmp_path / "m.json"
    manifest_file.write_text(json.dumps(data), encoding="utf-8")
    assert main(["release-watch", "--manifest", str(manifest_file), "--source", SOURCE, "--root", str(tmp_path)]) != 0
    assert "not a version" in capsys.readouterr().err
    monkeypatch.setattr("pipeline.release.parse_manifest", lambda text, **_: bad)
    code = main(["release-watch", "--manifest", str(MANIFEST), "--source", SOURCE, "--root", str(tmp_path)])
    assert code != 0 and "does not load back" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == {
        **before,
        manifest_file: manifest_file.read_bytes(),
    }
