"""runners/setup-runner.sh --dry-run: the commands it would run to turn a trn2 instance into ephemeral runners."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "runners" / "setup-runner.sh"
SHA = re.compile(r"[0-9a-f]{64}")

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def dry_run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {"PATH": os.environ["PATH"], **(env or {})}
    return subprocess.run(
        ["bash", str(SCRIPT), *args, "--dry-run"], capture_output=True, text=True, timeout=60, env=full_env
    )


def commands(output: str) -> list[list[str]]:
    """The argv of each `+ ...` line (the script prints them shell-quoted)."""
    return [shlex.split(line[2:]) for line in output.splitlines() if line.startswith("+ ") and "write " != line[2:8]]


def written(output: str) -> dict[str, str]:
    """path -> content of each `+ write PATH` block."""
    files: dict[str, str] = {}
    current = None
    for line in output.splitlines():
        if line.startswith("+ write "):
            current = line.split()[2]
            files[current] = ""
        elif line.startswith("| ") or line == "|":
            assert current is not None
            files[current] += line[2:] + "\n"
        else:
            current = None
    return files


@pytest.fixture(scope="module")
def install(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    token = tmp_path_factory.mktemp("tok") / "token"
    token.write_text("ghp_never_printed_secret\n")
    args = ["install", "--repo", "trncat/trncat", "--token-file", str(token), "--instance", "trn2.48xlarge"]
    return dry_run(*args, "--runners", "4")


def test_install_creates_a_dedicated_unprivileged_user(install) -> None:
    assert install.returncode == 0, install.stderr
    useradd = next(c for c in commands(install.stdout) if c[0] == "useradd")
    assert useradd[-1] == "trncat-runner" and "--system" in useradd
    assert useradd[useradd.index("--shell") + 1] == "/usr/sbin/nologin"
    assert not [c for c in commands(install.stdout) if c[0] in {"usermod", "gpasswd"} or "sudoers" in " ".join(c)]


def test_install_downloads_the_pinned_runner_and_verifies_it_before_use(install) -> None:
    cmds = commands(install.stdout)
    lines = [line for line in install.stdout.splitlines() if line.startswith("+ ")]
    curl = next(i for i, c in enumerate(cmds) if c[0] == "curl" and "actions/runner/releases" in c[-1])
    url = cmds[curl][-1]
    assert re.fullmatch(r"https://github\.com/actions/runner/releases/download/v(\d+\.\d+\.\d+)/"
                        r"actions-runner-linux-x64-\1\.tar\.gz", url)  # fmt: skip
    check = next(i for i, line in enumerate(lines) if "sha256sum -c" in line)
    move = next(i for i, c in enumerate(cmds) if c[0] == "mv")
    assert curl < check < move, "the download is verified before it is put in place"
    pinned = SHA.findall(lines[check])
    script = SCRIPT.read_text()
    assert pinned and f'RUNNER_SHA256="{pinned[0]}"' in script
    dockerfile = (ROOT / "runners" / "Dockerfile").read_text()
    version = re.search(r"/download/v([\d.]+)/", url)[1]  # type: ignore[index]
    assert f"ARG RUNNER_VERSION={version}" in dockerfile and f"ARG RUNNER_SHA256={pinned[0]}" in dockerfile


def test_install_partitions_the_cores_and_labels_each_runner(install) -> None:
    files = written(install.stdout)
    envs = [files[f"/etc/trncat-runner/runner-{i}.env"] for i in range(4)]
    ranges = [re.search(r"^NEURON_RT_VISIBLE_CORES=(\S+)$", env, re.M)[1] for env in envs]  # type: ignore[index]
    assert ranges == ["0-15", "16-31", "32-47", "48-63"]
    for env in envs:
        labels = re.search(r"^RUNNER_LABELS=(\S+)$", env, re.M)[1].split(",")  # type: ignore[index]
        assert labels[:2] == ["self-hosted", "linux"] and {"trn2", "trn2.48xlarge", "trn2-16c"} <= set(labels)
    assert "/etc/trncat-runner/runner-4.env" not in files


def test_install_keeps_the_token_root_only_and_never_prints_it(install) -> None:
    assert "ghp_never_printed_secret" not in install.stdout + install.stderr
    copy = next(c for c in commands(install.stdout) if c[0] == "install" and c[-1].endswith("github-token"))
    assert copy[copy.index("-m") + 1] == "0600" and copy[copy.index("-o") + 1] == "root"


def test_install_renders_a_systemd_unit_that_registers_a_fresh_runner_per_job(install) -> None:
    unit = written(install.stdout)["/etc/systemd/system/trncat-runner@.service"]
    assert "@" not in unit.replace("trncat-runner@", "").replace("%i", "")  # every placeholder filled
    assert "ExecStartPre=+/opt/trncat-runner/bin/setup-runner.sh jit %i" in unit
    assert "ExecStart=/opt/trncat-runner/bin/setup-runner.sh run %i" in unit
    assert "User=trncat-runner" in unit and "Restart=always" in unit and "NoNewPrivileges=yes" in unit
    enabled = [c[-1] for c in commands(install.stdout) if c[:3] == ["systemctl", "enable", "--now"]]
    assert enabled == [f"trncat-runner@{i}.service" for i in range(4)]


def test_install_pins_the_toolchain_from_toolchain_yaml(install) -> None:
    constraints = written(install.stdout)["/opt/trncat-runner/toolchain-constraints.txt"].split()
    toolchain = yaml.safe_load((ROOT / "runners" / "toolchain.yaml").read_text())
    assert sorted(constraints) == sorted(f"{k.replace('_', '-')}=={v}" for k, v in toolchain.items())
    pip = next(c for c in commands(install.stdout) if c[0].endswith("pip") and "torch-neuronx" in c)
    assert "https://pip.repos.neuron.amazonaws.com" in pip and "https://download.pytorch.org/whl/cpu" in pip


def test_install_runs_trncat_doctor_before_registering_any_runner(install) -> None:
    steps = commands(install.stdout)
    doctor = next(i for i, c in enumerate(steps) if c[0].endswith("/trncat") and c[1] == "doctor")
    token = next(i for i, c in enumerate(steps) if c[-1] == "/etc/trncat-runner/github-token")
    started = [i for i, c in enumerate(steps) if c[:3] == ["systemctl", "enable", "--now"]]
    assert doctor < token < min(started)  # the credential is installed, and runners start, only after it passed


def test_jit_phase_registers_an_ephemeral_runner_with_its_labels() -> None:
    env = {
        "RUNNER_LABELS": "self-hosted,linux,x64,trn2,trn2.48xlarge,trn2-4c",
        "RUNNER_USER": "trncat-runner",
        "TRNCAT_PREFIX": "/opt/trncat-runner",
        "TRNCAT_CONF": "/etc/trncat-runner",
        "GITHUB_API_PATH": "repos/trncat/trncat",
        "NEURON_RT_VISIBLE_CORES": "4-7",
    }
    result = dry_run("jit", "1", env=env)
    assert result.returncode == 0, result.stderr
    cmds = commands(result.stdout)
    assert cmds[0] == ["rm", "-rf", "/opt/trncat-runner/runner-1"], "each job starts from a fresh runner"
    curl = next(c for c in cmds if c[0] == "curl")
    assert curl[-1] == "https://api.github.com/repos/trncat/trncat/actions/runners/generate-jitconfig"
    body = curl[curl.index("--data") + 1]
    assert '"labels":["self-hosted","linux","x64","trn2","trn2.48xlarge","trn2-4c"]' in body
    assert not any("Bearer" in part for part in curl), "the token never reaches argv"
    assert "NEURON_RT_VISIBLE_CORES=4-7" in written(result.stdout)["/opt/trncat-runner/runner-1/.env"]
    run = dry_run("run", "1", env={"TRNCAT_PREFIX": "/opt/trncat-runner"})
    assert commands(run.stdout) == [["/opt/trncat-runner/runner-1/run.sh", "--jitconfig", "<encoded_jit_config>"]]


def test_container_runner_gets_only_its_devices() -> None:
    env = {"TRNCAT_PREFIX": "/p", "TRNCAT_CONTAINER_IMAGE": "trncat-runner:1", "TRNCAT_NEURON_DEVICES":
           "/dev/neuron2,/dev/neuron3", "NEURON_RT_VISIBLE_CORES": "0-7"}  # fmt: skip
    (docker,) = commands(dry_run("run", "0", env=env).stdout)
    devices = [docker[i + 1] for i, arg in enumerate(docker) if arg == "--device"]
    assert docker[:2] == ["docker", "run"] and devices == ["/dev/neuron2", "/dev/neuron3"]
    assert "--privileged" not in docker and docker[-3:] == ["trncat-runner:1", "--jitconfig", "<encoded_jit_config>"]


def test_container_install_rebases_cores_onto_the_passed_devices(tmp_path: Path) -> None:
    (tmp_path / "t").write_text("x")
    args = ["install", "--org", "trncat", "--token-file", str(tmp_path / "t"), "--instance", "trn2.48xlarge"]
    result = dry_run(*args, "--runners", "32", "--container", "trncat-runner:1")
    assert result.returncode == 0, result.stderr
    env5 = written(result.stdout)["/etc/trncat-runner/runner-5.env"]
    assert "NEURON_RT_VISIBLE_CORES=2-3" in env5 and "TRNCAT_NEURON_DEVICES=/dev/neuron2" in env5
    assert "GITHUB_API_PATH=orgs/trncat" in env5 and "toolchain/bin/pip" not in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--runners", "3"], "does not divide"),
        (["--runners", "0"], "positive integer"),
        (["--instance", "p5.48xlarge"], "unsupported instance"),
        (["--repo", "bad repo"], "OWNER/NAME"),
    ],
)
def test_install_refuses_bad_layouts(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "t").write_text("x")
    base = {"--repo": "a/b", "--token-file": str(tmp_path / "t"), "--instance": "trn2.48xlarge"}
    for key, value in zip(args[::2], args[1::2], strict=True):
        base[key] = value
    result = dry_run("install", *[part for kv in base.items() for part in kv])
    assert result.returncode == 2 and message in result.stderr


def test_every_label_the_queue_can_emit_has_a_runner_layout() -> None:
    """Runners of 64/N cores for N in 1..64 give trn2-1c .. trn2-64c: the labels benchmark.yml can request."""
    labels = set()
    for runners in (1, 2, 4, 8, 16, 32, 64):
        out = dry_run("install", "--repo", "a/b", "--token-file", "/dev/null", "--instance", "trn2.48xlarge",
                      "--runners", str(runners)).stdout  # fmt: skip
        labels |= set(re.findall(r"RUNNER_LABELS=\S*,(trn2-\d+c)$", out, re.M))
    options = yaml.safe_load((ROOT / ".github/workflows/benchmark.yml").read_text())[True]["workflow_dispatch"]
    assert labels == set(options["inputs"]["runner"]["options"])


def test_dockerfile_installs_the_toolchain_as_the_neuron_docs_do() -> None:
    dockerfile = (ROOT / "runners" / "Dockerfile").read_text()
    # The 2.33 TorchNeuron wheels are built for Ubuntu 26.04 (docs/neuron-facts.md).
    assert re.search(r"^ARG BASE_IMAGE=ubuntu:26\.04$", dockerfile, re.M)
    assert "https://pip.repos.neuron.amazonaws.com" in dockerfile
    assert "https://download.pytorch.org/whl/cpu" in dockerfile  # torch from the CPU index, never PyPI's CUDA build
    assert "--constraint /opt/trncat/toolchain-constraints.txt" in dockerfile and "python3 -m venv" in dockerfile
    assert "COPY runners/toolchain.yaml" in dockerfile and "sha256sum -c" in dockerfile
    assert "NEURON_COMPILE_CACHE_URL" not in dockerfile and "TORCH_NEURONX_NEFF_CACHE_DIR" in dockerfile


def _install(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "t").write_text("x")
    base = ["install", "--repo", "a/b", "--token-file", str(tmp_path / "t"), "--instance", "trn2.48xlarge"]
    return dry_run(*base, *args)


def _layout(output: str) -> list[tuple[str, str]]:
    files = written(output)
    names = [k for k in files if re.search(r"/runner-\d+\.env$", k)]
    envs = [files[k] for k in sorted(names, key=lambda k: int(k.rsplit("-", 1)[1][:-4]))]
    return [
        (re.search(r"^NEURON_RT_VISIBLE_CORES=(\S+)$", e, re.M)[1], re.search(r",(trn2-\d+c)$", e, re.M)[1])  # type: ignore[index]
        for e in envs
    ]


def test_partition_lays_out_mixed_sizes_chip_aligned_with_one_label_per_size(tmp_path: Path) -> None:
    result = _install(tmp_path, "--partition", "1x8,4x4,40x1")
    assert result.returncode == 0, result.stderr
    layout = _layout(result.stdout)
    assert layout[:6] == [("0-7", "trn2-8c"), ("8-11", "trn2-4c"), ("12-15", "trn2-4c"), ("16-19", "trn2-4c"),
                          ("20-23", "trn2-4c"), ("24", "trn2-1c")]  # fmt: skip
    assert len(layout) == 45 and layout[-1] == ("63", "trn2-1c")
    enabled = [c[-1] for c in commands(result.stdout) if c[:3] == ["systemctl", "enable", "--now"]]
    assert len(enabled) == 45
    # The issue's own example order (1-core runners first) is chip-aligned too.
    assert _install(tmp_path, "--partition", "40x1,4x4,1x8").returncode == 0


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("8@0,4@4", "overlap on core 4"),
        ("2x16,16@16", "overlap on core 16"),
        ("1x1,1x4", "straddles a chip boundary"),
        ("3x1,1x2", "straddles a chip boundary"),
        ("1x2,1x8", "straddles a chip boundary"),
        ("65x1", "cores; a trn2.48xlarge has 64"),
        ("2x32,1x1", "cores; a trn2.48xlarge has 64"),
        ("1x3", "powers of two"),
        ("0x4", "at least 1"),
        ("4-4", "want COUNTxSIZE"),
        ("8@60", "ends past core 63"),
    ],
)
def test_partition_validator_refuses_overlaps_straddles_and_totals_over_64(
    tmp_path: Path, spec: str, message: str
) -> None:
    from pipeline.errors import ConfigError
    from pipeline.fleet import parse_partition

    result = _install(tmp_path, "--partition", spec)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    with pytest.raises(ConfigError, match=re.escape(message)):  # the Python side keeps the same rules
        parse_partition(spec)


def test_partition_auto_takes_the_estimates_recommendation(tmp_path: Path) -> None:
    import json

    estimate = tmp_path / "cost.json"
    estimate.write_text(json.dumps({"fleet": [{"partition": "4x16"}, {"partition": "1x8,2x4,48x1"}]}))
    result = _install(tmp_path, "--partition", "auto", "--from-estimate", str(estimate), "--fleet-index", "1")
    assert result.returncode == 0, result.stderr
    layout = _layout(result.stdout)
    assert layout[0] == ("0-7", "trn2-8c") and layout[1:3] == [("8-11", "trn2-4c"), ("12-15", "trn2-4c")]
    assert len(layout) == 51
    missing = _install(tmp_path, "--partition", "auto", "--from-estimate", str(estimate), "--fleet-index", "2")
    assert missing.returncode == 2 and "recommends no instance 2" in missing.stderr
    alone = _install(tmp_path, "--partition", "auto")
    assert alone.returncode == 2 and "needs --from-estimate" in alone.stderr
    both = _install(tmp_path, "--partition", "4x16", "--runners", "4")
    assert both.returncode == 2 and "exclude each other" in both.stderr
