"""runners/setup-runner.sh --dry-run: the commands it would run to turn a trn2 instance into ephemeral runners."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests import ROOT

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
    args = ["install", "--org", "trncat", "--runner-group-id", "7", "--token-file", str(token)]
    return dry_run(*args, "--instance", "trn2.48xlarge", "--runners", "4")


def test_install_creates_one_unprivileged_user_per_runner(install) -> None:
    """Issue 11.2: runners shared one uid and one persistent HOME (neighbours' /proc/PID/environ, planted
    pip.conf / .gitconfig). Each runner now has its own uid, HOME and JIT folder."""
    assert install.returncode == 0, install.stderr
    useradds = [c for c in commands(install.stdout) if c[0] == "useradd"]
    assert [c[-1] for c in useradds] == [f"trncat-runner-{i}" for i in range(4)]
    for i, useradd in enumerate(useradds):
        assert "--system" in useradd and useradd[useradd.index("--shell") + 1] == "/usr/sbin/nologin"
        assert useradd[useradd.index("--home-dir") + 1] == f"/opt/trncat-runner/homes/{i}"
    assert not [c for c in commands(install.stdout) if c[0] in {"usermod", "gpasswd"} or "sudoers" in " ".join(c)]
    files = written(install.stdout)
    users = [
        re.search(r"^TRNCAT_RUNNER_USER=(\S+)$", files[f"/etc/trncat-runner/runner-{i}.env"], re.M)[1] for i in range(4)
    ]  # type: ignore[index]
    assert users == [f"trncat-runner-{i}" for i in range(4)]
    assert "User=trncat-runner-%i" in files["/etc/systemd/system/trncat-runner@.service"]


def test_install_downloads_the_pinned_runner_and_verifies_it_before_use(install) -> None:
    cmds = commands(install.stdout)
    lines = [line for line in install.stdout.splitlines() if line.startswith("+ ")]
    curl = next(i for i, c in enumerate(cmds) if c[0] == "curl" and "actions/runner/releases" in c[-1])
    url = cmds[curl][-1]
    assert re.fullmatch(r"https://github\.com/actions/runner/releases/download/v(\d+\.\d+\.\d+)/"
                        r"actions-runner-linux-x64-\1\.tar\.gz", url)  # fmt: skip
    check = next(i for i, line in enumerate(lines) if "sha256sum -c" in line)
    move = next(i for i, line in enumerate(lines) if line.startswith("+ mv "))
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
    assert "User=trncat-runner-%i" in unit and "Restart=always" in unit and "NoNewPrivileges=yes" in unit
    # issue 11.6: no job (or anything it starts) reaches the instance metadata service
    assert "IPAddressDeny=169.254.169.254/32 fd00:ec2::254/128" in unit
    enabled = [c[-1] for c in commands(install.stdout) if c[:3] == ["systemctl", "enable", "--now"]]
    assert enabled == [f"trncat-runner@{i}.service" for i in range(4)]


def test_each_runner_sees_only_its_own_chips_and_a_private_dev_shm(install) -> None:
    """Issue 22.5: the unit had no device policy and the driver's documented udev rule is mode 0666
    (`KERNEL=="neuron*", MODE="0666"`, aws-neuron-driver's README), so any job could open every chip and slow its
    neighbours, whose figures are then published; and a file a job left in /dev/shm survived into the next job.
    Each runner now gets only its own /dev/neuronN (DevicePolicy=closed + DeviceAllow=, per runner) and private
    /dev/shm, /run/lock and System V IPC, fresh at every start (one start per job)."""
    files = written(install.stdout)
    unit = files["/etc/systemd/system/trncat-runner@.service"]
    assert "DevicePolicy=closed" in unit and "DeviceAllow=" not in unit, "devices are per runner, in drop-ins"
    assert "TemporaryFileSystem=/dev/shm:mode=1777,nosuid,nodev /run/lock:mode=1777,nosuid,nodev" in unit
    assert "PrivateIPC=yes" in unit and "PrivateDevices=" not in unit  # (that would hide the chips too)
    for index in range(4):  # 16 cores each at LNC=2: four chips, /dev/neuron<4i> .. /dev/neuron<4i+3>
        drop_in = files[f"/etc/systemd/system/trncat-runner@{index}.service.d/devices.conf"]
        allowed = re.findall(r"^DeviceAllow=(\S+) (\S+)$", drop_in, re.M)
        assert allowed == [(f"/dev/neuron{4 * index + d}", "rw") for d in range(4)], drop_in
        assert drop_in.startswith("# ") and "[Service]" in drop_in


def test_a_partition_allows_each_runner_its_chips_only(tmp_path: Path) -> None:
    (tmp_path / "t").write_text("x")
    args = ["install", "--repo", "a/b", "--token-file", str(tmp_path / "t"), "--instance", "trn2.48xlarge"]
    files = written(dry_run(*args, "--partition", "1x8,2x2,4x1").stdout)
    devices = {i: re.findall(r"^DeviceAllow=(\S+) rw$", files[f"/etc/systemd/system/trncat-runner@{i}.service.d/"
                                                                 "devices.conf"], re.M) for i in range(7)}  # fmt: skip
    assert devices[0] == ["/dev/neuron0", "/dev/neuron1"]  # cores 0-7
    assert devices[1] == devices[2] == ["/dev/neuron2"]  # cores 8-9 and 10-11 share chip 2
    assert all(devices[i] == ["/dev/neuron3"] for i in range(3, 7))  # cores 12..15


def test_install_pins_the_toolchain_from_toolchain_yaml(install) -> None:
    constraints = written(install.stdout)["/opt/trncat-runner/toolchain-constraints.txt"].split()
    toolchain = yaml.safe_load((ROOT / "runners" / "toolchain.yaml").read_text())
    apt = toolchain.pop("apt")
    # Prefix matches: a torch-neuronx wheel of the 2.14.3.0.* family has more components than the pin.
    assert sorted(constraints) == sorted(f"{k.replace('_', '-')}=={v}.*" for k, v in toolchain.items())
    assert "nki==0.7.0.*" in constraints
    pip = next(c for c in commands(install.stdout) if c[0].endswith("pip") and "torch-neuronx" in c)
    assert "https://pip.repos.neuron.amazonaws.com" in pip and "https://download.pytorch.org/whl/cpu" in pip
    assert "nki" in pip  # part of the documented TorchNeuron install
    assert set(apt) == {"aws-neuronx-runtime-lib", "aws-neuronx-collectives", "aws-neuronx-tools", "aws-neuronx-dkms"}


def test_neuron_apt_packages_are_pinned_from_the_toolchain(tmp_path: Path) -> None:
    """Unpinned, the next release's tools arrive (Neuron 2.34 drops neuron-ls --json-output)."""
    (tmp_path / "t").write_text("x")
    args = ["install", "--repo", "a/b", "--token-file", str(tmp_path / "t"), "--instance", "trn2.48xlarge"]
    result = dry_run(*args, "--neuron-apt", "--neuron-apt-key-fingerprint", "A" * 40)
    assert result.returncode == 0, result.stderr
    apt = yaml.safe_load((ROOT / "runners" / "toolchain.yaml").read_text())["apt"]
    steps = commands(result.stdout)
    (install,) = [c for c in steps if c[:2] == ["apt-get", "install"] and "aws-neuronx-tools" in str(c)]
    assert sorted(a for a in install if a.startswith("aws-neuronx-")) == sorted(f"{k}={v}" for k, v in apt.items())
    dockerfile = (ROOT / "runners" / "Dockerfile").read_text()
    assert "apt-get install -y --no-install-recommends aws-neuronx" not in dockerfile  # only pinned, from the file
    assert "xargs -a /opt/trncat/neuron-apt.txt apt-get install" in dockerfile and "nki" in dockerfile


def test_install_runs_trncat_doctor_before_registering_any_runner(install) -> None:
    steps = commands(install.stdout)
    doctor = next(i for i, c in enumerate(steps) if c[0].endswith("/trncat") and c[1] == "doctor")
    token = next(i for i, c in enumerate(steps) if c[-1] == "/etc/trncat-runner/github-token")
    started = [i for i, c in enumerate(steps) if c[:3] == ["systemctl", "enable", "--now"]]
    assert doctor < token < min(started)  # the credential is installed, and runners start, only after it passed


def test_jit_phase_registers_an_ephemeral_runner_with_its_labels() -> None:
    env = {
        "RUNNER_LABELS": "self-hosted,linux,x64,trn2,trn2.48xlarge,trn2-4c",
        "TRNCAT_RUNNER_USER": "trncat-runner-1",
        "TRNCAT_PREFIX": "/opt/trncat-runner",
        "TRNCAT_CONF": "/etc/trncat-runner",
        "GITHUB_API_PATH": "repos/trncat/trncat",
        "NEURON_RT_VISIBLE_CORES": "4-7",
    }
    result = dry_run("jit", "1", env=env)
    assert result.returncode == 0, result.stderr
    cmds = commands(result.stdout)
    # issue 11.2: whatever the previous job left running dies, its folder and HOME are wiped
    assert cmds[0] == ["pkill", "-KILL", "-u", "trncat-runner-1"]
    assert cmds[1][:3] == ["rm", "-rf", "--one-file-system"]
    assert {"/opt/trncat-runner/runners/1", "/opt/trncat-runner/homes/1"} <= set(cmds[1])
    # issue 11.1: what goes into the job user's folder is unpacked by that user, never by root
    tar = next(c for c in cmds if "tar" in c)
    assert tar[:4] == ["runuser", "-u", "trncat-runner-1", "--"]
    curl = next(c for c in cmds if c[0] == "curl")
    assert curl[-1] == "https://api.github.com/repos/trncat/trncat/actions/runners/generate-jitconfig"
    body = curl[curl.index("--data") + 1]
    assert '"labels":["self-hosted","linux","x64","trn2","trn2.48xlarge","trn2-4c"]' in body
    assert not any("Bearer" in part for part in curl), "the token never reaches argv"
    files = written(result.stdout)
    assert list(files) == ["/opt/trncat-runner/state/runner-1/jitconfig"], "root writes only its own folder"
    assert "(mode 0640, owner root:trncat-runner-1)" in result.stdout
    run = dry_run("run", "1", env={"TRNCAT_PREFIX": "/opt/trncat-runner", "NEURON_RT_VISIBLE_CORES": "4-7"})
    # issue 11.3: the JIT config never reaches argv (`ps` shows every process's argv to every user)
    assert commands(run.stdout) == [["/opt/trncat-runner/runners/1/run.sh"]]
    assert "as ACTIONS_RUNNER_INPUT_JITCONFIG, read from /opt/trncat-runner/state/runner-1/jitconfig" in run.stdout
    env_file = written(run.stdout)["/opt/trncat-runner/runners/1/.env"]
    assert "NEURON_RT_VISIBLE_CORES=4-7" in env_file and "HOME=/opt/trncat-runner/homes/1" in env_file


def test_container_runner_gets_only_its_devices() -> None:
    env = {"TRNCAT_PREFIX": "/p", "TRNCAT_CONTAINER_IMAGE": "trncat-runner:1", "TRNCAT_NEURON_DEVICES":
           "/dev/neuron2,/dev/neuron3", "NEURON_RT_VISIBLE_CORES": "0-7"}  # fmt: skip
    (docker,) = commands(dry_run("run", "0", env=env).stdout)
    devices = [docker[i + 1] for i, arg in enumerate(docker) if arg == "--device"]
    assert docker[:2] == ["docker", "run"] and devices == ["/dev/neuron2", "/dev/neuron3"]
    assert "--privileged" not in docker and docker[-1] == "trncat-runner:1"
    # issue 21: the capabilities AWS's Trainium containers get (SYS_ADMIN, IPC_LOCK, memlock) and no other;
    # issue 11.6: bounded processes and memory; 11.3: the JIT config by name, never its value
    assert docker[docker.index("--cap-drop") + 1] == "ALL" and docker[docker.index("--pids-limit") + 1] == "4096"
    added = [docker[i + 1] for i, arg in enumerate(docker) if arg == "--cap-add"]
    assert added == ["SYS_ADMIN", "IPC_LOCK"] and docker[docker.index("--ulimit") + 1] == "memlock=-1:-1"
    assert docker[docker.index("--memory") + 1] == "96g" and "no-new-privileges" in docker
    assert "ACTIONS_RUNNER_INPUT_JITCONFIG" in docker and not any("jitconfig" in a.lower() and "=" in a for a in docker)


def test_container_install_rebases_cores_onto_the_passed_devices(tmp_path: Path) -> None:
    (tmp_path / "t").write_text("x")
    args = ["install", "--org", "trncat", "--token-file", str(tmp_path / "t"), "--instance", "trn2.48xlarge"]
    result = dry_run(*args, "--runner-group-id", "7", "--runners", "32", "--container", "trncat-runner:1")
    assert result.returncode == 0, result.stderr
    env5 = written(result.stdout)["/etc/trncat-runner/runner-5.env"]
    assert "NEURON_RT_VISIBLE_CORES=2-3" in env5 and "TRNCAT_NEURON_DEVICES=/dev/neuron2" in env5
    # A runner of whole chips names no cores: trncat takes them from neuron-ls's neuroncore_ids in the container.
    whole = dry_run(*args, "--runner-group-id", "7", "--runners", "16", "--container", "trncat-runner:1")
    env3 = written(whole.stdout)["/etc/trncat-runner/runner-3.env"]
    assert re.search(r"^NEURON_RT_VISIBLE_CORES=$", env3, re.M) and "TRNCAT_NEURON_DEVICES=/dev/neuron3" in env3
    assert "GITHUB_API_PATH=orgs/trncat" in env5 and "toolchain/bin/pip" not in result.stdout
    # issue 11.6: containers' traffic bypasses the unit's IPAddressDeny=; DOCKER-USER rejects the metadata address
    block = written(result.stdout)["/etc/systemd/system/trncat-imds-block.service"]
    assert "iptables -I DOCKER-USER -d 169.254.169.254/32 -j REJECT" in block
    assert ["systemctl", "enable", "--now", "trncat-imds-block.service"] in commands(result.stdout)


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
    assert labels == {o for o in options["inputs"]["runner"]["options"] if o.startswith("trn2-")}  # trn3: its own test


def test_dockerfile_installs_the_toolchain_as_the_neuron_docs_do() -> None:
    dockerfile = (ROOT / "runners" / "Dockerfile").read_text()
    # The 2.33 TorchNeuron wheels are built for Ubuntu 26.04 (docs/neuron-facts.md).
    assert re.search(r"^ARG BASE_IMAGE=ubuntu:26\.04$", dockerfile, re.M)
    assert "https://pip.repos.neuron.amazonaws.com" in dockerfile
    assert "https://download.pytorch.org/whl/cpu" in dockerfile  # torch from the CPU index, never PyPI's CUDA build
    assert "--constraint /opt/trncat/toolchain-constraints.txt" in dockerfile and "python3 -m venv" in dockerfile
    assert "COPY runners/toolchain.yaml" in dockerfile and "sha256sum -c" in dockerfile
    assert "NEURON_COMPILE_CACHE_URL" not in dockerfile and "TORCH_NEURONX_NEFF_CACHE_DIR" in dockerfile


def _install_partition(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
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
    result = _install_partition(tmp_path, "--partition", "1x8,4x4,40x1")
    assert result.returncode == 0, result.stderr
    layout = _layout(result.stdout)
    assert layout[:6] == [("0-7", "trn2-8c"), ("8-11", "trn2-4c"), ("12-15", "trn2-4c"), ("16-19", "trn2-4c"),
                          ("20-23", "trn2-4c"), ("24", "trn2-1c")]  # fmt: skip
    assert len(layout) == 45 and layout[-1] == ("63", "trn2-1c")
    enabled = [c[-1] for c in commands(result.stdout) if c[:3] == ["systemctl", "enable", "--now"]]
    assert len(enabled) == 45
    # The issue's own example order (1-core runners first) is chip-aligned too.
    assert _install_partition(tmp_path, "--partition", "40x1,4x4,1x8").returncode == 0


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
    from tests.support.partitions import parse_partition

    result = _install_partition(tmp_path, "--partition", spec)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    with pytest.raises(ConfigError, match=re.escape(message)):  # the Python side keeps the same rules
        parse_partition(spec)


def test_partition_auto_takes_the_estimates_recommendation(tmp_path: Path) -> None:
    import json

    estimate = tmp_path / "cost.json"
    estimate.write_text(json.dumps({"fleet": [{"partition": "4x16"}, {"partition": "1x8,2x4,48x1"}]}))
    result = _install_partition(tmp_path, "--partition", "auto", "--from-estimate", str(estimate), "--fleet-index", "1")
    assert result.returncode == 0, result.stderr
    layout = _layout(result.stdout)
    assert layout[0] == ("0-7", "trn2-8c") and layout[1:3] == [("8-11", "trn2-4c"), ("12-15", "trn2-4c")]
    assert len(layout) == 51
    missing = _install_partition(
        tmp_path, "--partition", "auto", "--from-estimate", str(estimate), "--fleet-index", "2"
    )
    assert missing.returncode == 2 and "recommends no instance 2" in missing.stderr
    alone = _install_partition(tmp_path, "--partition", "auto")
    assert alone.returncode == 2 and "needs --from-estimate" in alone.stderr
    both = _install_partition(tmp_path, "--partition", "4x16", "--runners", "4")
    assert both.returncode == 2 and "exclude each other" in both.stderr


# -- issue 11.1: root writes only into root-owned folders, atomically, never through a job's link ----------


def _write(path: Path, content: str = "root wrote this") -> subprocess.CompletedProcess[str]:
    """Source the script (it defines its functions only) and run write_file as the unit's root phase does."""
    owner = f"{os.getuid()}:{os.getgid()}"
    script = f'source {shlex.quote(str(SCRIPT))} && write_file {shlex.quote(str(path))} 0600 {owner} <<< "$1"'
    return subprocess.run(["bash", "-c", script, "write", content], capture_output=True, text=True, timeout=60)


def test_write_file_never_follows_a_link_the_job_user_controls(tmp_path: Path) -> None:
    """The attack: the root phase wrote `.env` / `.jitconfig` into the job user's own folder following links,
    so a job swapped in a symlink and had root overwrite (or expose) any file, e.g. the script every unit runs
    as root. Each swap below now leaves the victim untouched."""
    tmp_path.chmod(0o755)
    victim = tmp_path / "setup-runner.sh"
    victim.write_text("#!/bin/sh\necho the real script\n")
    before = victim.read_text()

    # 1. the folder itself swapped for a link to the victim's folder
    job_dir = tmp_path / "runner-1"
    job_dir.symlink_to(tmp_path, target_is_directory=True)
    result = _write(job_dir / "setup-runner.sh")
    assert result.returncode == 2 and "not a real folder" in result.stderr
    # 2. a folder others may write into (they could swap names in it)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    assert "writable by others" in _write(shared / ".env").stderr
    # 3. a trusted folder whose target name is a link to the victim: the rename replaces the link itself
    trusted = tmp_path / "state"
    trusted.mkdir(mode=0o755)
    (trusted / "jitconfig").symlink_to(victim)
    result = _write(trusted / "jitconfig", "encoded-jit")
    assert result.returncode == 0, result.stderr
    assert not (trusted / "jitconfig").is_symlink() and (trusted / "jitconfig").read_text() == "encoded-jit\n"
    assert (trusted / "jitconfig").stat().st_mode & 0o777 == 0o600
    assert [p.name for p in trusted.iterdir()] == ["jitconfig"], "no temp file is left behind"
    assert victim.read_text() == before
    # 4. a folder the job user owns (as root only: only root can give a folder away)
    if os.getuid() == 0:
        owned = tmp_path / "job-owned"
        owned.mkdir(mode=0o700)
        os.chown(owned, 65534, 65534)
        assert "owned by uid 65534" in _write(owned / ".env").stderr
    assert victim.read_text() == before


# -- issue 11.4 and 11.5: registration from outside the host; who may reach the runners ----------------------


class _FakeGitHub:
    """A read-only REST API double: path -> JSON, served on loopback."""

    def __init__(self, answers: dict[str, dict]) -> None:
        import http.server
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - stdlib name
                path = self.path.split("?", 1)[0].lstrip("/")
                body = json.dumps(answers.get(path, {})).encode()
                self.send_response(200 if path in answers else 404)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def github(tmp_path: Path):
    api = _FakeGitHub({
        "repos/acme/public": {"private": False, "visibility": "public"},
        "repos/acme/private": {"private": True, "visibility": "private"},
        "orgs/acme/actions/runner-groups/7": {"id": 7, "restricted_to_workflows": True, "visibility": "selected",
            "selected_workflows": ["acme/trncat/.github/workflows/benchmark.yml@refs/heads/main"]},
        "orgs/acme/actions/runner-groups/7/repositories": {"total_count": 1, "repositories": [
            {"full_name": "acme/trncat"}]},
        "orgs/acme/actions/runner-groups/8": {"id": 8, "restricted_to_workflows": False, "selected_workflows": []},
        "orgs/acme/actions/runner-groups/20": {"id": 20, "restricted_to_workflows": True, "visibility": "selected",
            "selected_workflows": ["acme/trncat/.github/workflows/benchmark-gpu.yml@refs/heads/main"]},
        "orgs/acme/actions/runner-groups/20/repositories": {"total_count": 1, "repositories": [
            {"full_name": "acme/trncat"}]},
        "orgs/acme/actions/runner-groups/9": {"id": 9, "restricted_to_workflows": True, "selected_workflows": [
            "acme/trncat/.github/workflows/benchmark.yml@refs/heads/main",
            "acme/trncat/.github/workflows/pr.yml@refs/pull/1/merge"]},
        # issue 22.1: a suffix matched; these name benchmark.yml@main of another repository
        "orgs/acme/actions/runner-groups/10": {"id": 10, "restricted_to_workflows": True, "visibility": "selected",
            "selected_workflows": ["mallory/trncat/.github/workflows/benchmark.yml@refs/heads/main"]},
        "orgs/acme/actions/runner-groups/11": {"id": 11, "restricted_to_workflows": True, "visibility": "selected",
            "selected_workflows": ["acme/sandbox/.github/workflows/benchmark.yml@refs/heads/main"]},
        "orgs/acme/actions/runner-groups/11/repositories": {"total_count": 1, "repositories": [
            {"full_name": "acme/trncat"}]},
        # the right workflow, but every repository of the org (or another one too) may send it jobs
        "orgs/acme/actions/runner-groups/12": {"id": 12, "restricted_to_workflows": True, "visibility": "all",
            "selected_workflows": ["acme/trncat/.github/workflows/benchmark.yml@refs/heads/main"]},
        "orgs/acme/actions/runner-groups/13": {"id": 13, "restricted_to_workflows": True, "visibility": "selected",
            "selected_workflows": ["acme/trncat/.github/workflows/benchmark.yml@refs/heads/main"]},
        "orgs/acme/actions/runner-groups/13/repositories": {"total_count": 2, "repositories": [
            {"full_name": "acme/trncat"}, {"full_name": "acme/sandbox"}]},
    })  # fmt: skip
    (tmp_path / "token").write_text("ghp_settings_check\n")
    yield api
    api.close()


def _install(tmp_path: Path, api: _FakeGitHub, *args: str) -> subprocess.CompletedProcess[str]:
    base = ["install", "--token-file", str(tmp_path / "token"), "--instance", "trn2.48xlarge"]
    return dry_run(*base, "--github-api", api.url, "--check-settings", *args)


def test_repository_runners_are_refused_for_a_public_repository(tmp_path: Path, github: _FakeGitHub) -> None:
    """A pull_request run uses the PR's own workflow files: repository runners of a public repository are
    reachable by anyone's PR."""
    refused = _install(tmp_path, github, "--repo", "acme/public")
    assert refused.returncode == 2 and "acme/public is public" in refused.stderr
    assert "useradd" not in refused.stdout, "nothing is installed"
    forced = _install(tmp_path, github, "--repo", "acme/public", "--force-public-repo")
    assert forced.returncode == 0 and "WARNING: repository runners for the public repository" in forced.stdout
    assert _install(tmp_path, github, "--repo", "acme/private").returncode == 0
    assert "ghp_settings_check" not in refused.stdout + refused.stderr + forced.stdout


def test_org_runners_need_a_group_restricted_to_the_benchmark_workflow(tmp_path: Path, github: _FakeGitHub) -> None:
    """Issue 22.1: the check compared a suffix (`endswith("/.github/workflows/benchmark.yml@refs/heads/main")`),
    so a group serving another repository's benchmark.yml passed. It now compares the whole
    `OWNER/REPO/.github/workflows/benchmark.yml@refs/heads/main` and wants this repository alone in the group."""
    ok = _install(tmp_path, github, "--org", "acme", "--runner-group-id", "7")
    assert ok.returncode == 0, ok.stderr
    assert "restricted to acme/trncat/.github/workflows/benchmark.yml@refs/heads/main" in ok.stdout
    for group in ("8", "9", "10", "11", "12", "13", "404"):
        result = _install(tmp_path, github, "--org", "acme", "--runner-group-id", group)
        assert result.returncode == 2, (group, result.stdout)
    other = _install(tmp_path, github, "--org", "acme", "--runner-group-id", "11", "--workflow-repo", "acme/sandbox")
    assert other.returncode == 2 and "acme/sandbox alone" in other.stderr  # its repository access lists none
    bad = _install(tmp_path, github, "--org", "acme", "--runner-group-id", "7", "--workflow-repo", "acme/x y")
    assert bad.returncode == 2 and "--workflow-repo wants OWNER/NAME" in bad.stderr
    default = dry_run("install", "--org", "acme", "--token-file", "/dev/null", "--instance", "trn2.48xlarge")
    assert default.returncode == 2 and "not the Default group" in default.stderr


def test_external_registration_leaves_no_credential_on_the_host(tmp_path: Path) -> None:
    args = ["install", "--org", "acme", "--runner-group-id", "7", "--registration", "external"]
    result = dry_run(*args, "--instance", "trn2.48xlarge")
    assert result.returncode == 0, result.stderr
    assert not [c for c in commands(result.stdout) if c[-1].endswith("github-token") and c[0] == "install"]
    assert ["rm", "-f", "/etc/trncat-runner/github-token"] in commands(result.stdout)
    assert "TRNCAT_REGISTRATION=external" in written(result.stdout)["/etc/trncat-runner/runner-0.env"]
    env = {"RUNNER_LABELS": "self-hosted,linux,x64,trn2,trn2.48xlarge,trn2-64c",
           "TRNCAT_RUNNER_USER": "trncat-runner-0", "TRNCAT_PREFIX": "/opt/trncat-runner",
           "TRNCAT_CONF": "/etc/trncat-runner", "GITHUB_API_PATH": "orgs/acme",
           "NEURON_RT_VISIBLE_CORES": "0-63", "TRNCAT_REGISTRATION": "external"}  # fmt: skip
    jit = dry_run("jit", "0", env=env)
    assert jit.returncode == 0 and "+ take /etc/trncat-runner/jit-inbox/runner-0.jitconfig" in jit.stdout
    assert not [c for c in commands(jit.stdout) if c[0] == "curl"], "no call with a credential"


def test_the_readme_has_a_threat_model_and_arc_keeps_no_shared_cache() -> None:
    readme = (ROOT / "runners" / "README.md").read_text()
    section = readme.split("## Threat model", 1)[1].split("\n## ", 1)[0]
    for needle in ("What a job can reach", "What a job cannot reach", "maintainer's duty", "IPAddressDeny"):
        assert needle in section, needle
    arc = yaml.safe_load((ROOT / "runners" / "arc-values.yaml").read_text())
    spec = arc["template"]["spec"]
    assert spec["automountServiceAccountToken"] is False
    assert all("hostPath" not in volume for volume in spec["volumes"]), "no cache shared across jobs"
    assert spec["containers"][0]["securityContext"]["capabilities"]["drop"] == ["ALL"]


def test_the_neuron_apt_key_is_pinned_by_fingerprint(tmp_path: Path) -> None:
    """Issue 11.15: the apt key was trusted as downloaded. It is now refused without the maintainer's pin."""
    (tmp_path / "t").write_text("x")
    base = ["install", "--org", "a", "--runner-group-id", "7", "--token-file", str(tmp_path / "t"),
            "--instance", "trn2.48xlarge", "--neuron-apt"]  # fmt: skip
    unpinned = dry_run(*base)
    assert unpinned.returncode == 2 and "--neuron-apt-key-fingerprint" in unpinned.stderr
    fpr = "0123456789ABCDEF0123456789ABCDEF01234567"
    pinned = dry_run(*base, "--neuron-apt-key-fingerprint", fpr)
    lines = pinned.stdout.splitlines()
    check = next(
        i for i, line in enumerate(lines) if f"fingerprint of /etc/apt/keyrings/neuron.asc.part is {fpr}" in line
    )
    trust = next(i for i, line in enumerate(lines) if line.endswith("/etc/apt/keyrings/neuron.asc"))
    assert pinned.returncode == 0 and check < trust


# -- the GPU runner class (benchmark-gpu.yml, the Compare view's cuda rows) --------------------------------


def _gpu_install(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return dry_run("install", "--org", "trncat", "--runner-group-id", "7", "--token-file", "/dev/null",
                   "--class", "gpu", *args, env=env)  # fmt: skip


def test_the_gpu_class_gives_each_runner_its_gpus_under_the_same_rules() -> None:
    result = _gpu_install("--instance", "p5en.48xlarge", "--runners", "4")
    assert result.returncode == 0, result.stderr
    files = written(result.stdout)
    envs = [files[f"/etc/trncat-runner/runner-{i}.env"] for i in range(4)]
    gpus = [re.search(r"^CUDA_VISIBLE_DEVICES=(\S+)$", env, re.M)[1] for env in envs]  # type: ignore[index]
    assert gpus == ["0,1", "2,3", "4,5", "6,7"]
    for env in envs:
        labels = re.search(r"^RUNNER_LABELS=(\S+)$", env, re.M)[1].split(",")  # type: ignore[index]
        assert labels == ["self-hosted", "linux", "x64", "gpu", "p5en.48xlarge", "gpu-2g"]
        assert "TRNCAT_INSTANCE_TYPE=p5en.48xlarge" in env  # what prices its rows
        assert "NEURON_RT_VISIBLE_CORES" not in env and "TRNCAT_RUNNER_CLASS=gpu" in env
    steps = commands(result.stdout)
    # The same trust rules as the trn2 runners: one user each, JIT registration, the unit without the metadata
    # service, a group restricted to its own workflow file.
    assert [c for c in steps if c[0] == "useradd"] and "trncat-runner@.service" in " ".join(files)
    unit = files["/etc/systemd/system/trncat-runner@.service"]
    assert "IPAddressDeny=169.254.169.254/32 fd00:ec2::254/128" in unit and "User=trncat-runner-%i" in unit
    # The CUDA toolchain from toolchain-gpu.yaml, from PyPI (no Neuron or CPU index), checked before any runner.
    pip = next(c for c in steps if c[0].endswith("pip") and "torch" in c and "--constraint" in c)
    assert "--extra-index-url" not in pip and "torch-neuronx" not in pip
    constraints = files["/opt/trncat-runner/toolchain-constraints.txt"].split()
    toolchain = yaml.safe_load((ROOT / "runners" / "toolchain-gpu.yaml").read_text())
    assert sorted(constraints) == sorted(f"{k.replace('_', '-')}=={v}.*" for k, v in toolchain.items())
    check = next(i for i, c in enumerate(steps) if c[0].endswith("/python") and "torch.cuda.device_count" in c[2])
    started = [i for i, c in enumerate(steps) if c[:3] == ["systemctl", "enable", "--now"]]
    assert check < min(started) and not [c for c in steps if c[0].endswith("/trncat") and "doctor" in c]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--instance", "trn2.48xlarge"], "unsupported GPU instance"),
        (["--instance", "p5.48xlarge", "--runners", "3"], "does not divide"),
        (["--instance", "p5.48xlarge", "--partition", "1x8"], "a GPU runner owns whole GPUs"),
        (["--instance", "p5.48xlarge", "--container", "img"], "--container"),
        (["--instance", "p5.48xlarge", "--neuron-apt"], "--neuron-apt"),
    ],
)
def test_the_gpu_class_refuses_what_does_not_apply(args: list[str], message: str) -> None:
    result = _gpu_install(*args)
    assert result.returncode == 2 and message in result.stderr, result.stderr


def test_every_gpu_label_and_instance_agree_with_the_workflow_and_the_price_table() -> None:
    from pipeline.prices import load_prices

    labels = set()
    for runners in (1, 2, 4, 8):
        out = _gpu_install("--instance", "p5.48xlarge", "--runners", str(runners)).stdout
        labels |= set(re.findall(r"RUNNER_LABELS=\S*,(gpu-\d+g)$", out, re.M))
    options = yaml.safe_load((ROOT / ".github/workflows/benchmark-gpu.yml").read_text())[True]["workflow_dispatch"]
    assert labels == set(options["inputs"]["runner"]["options"])
    table = load_prices()
    gpu_instances = {name: i.accelerators.count for name, i in table.items() if i.accelerators is not None}
    for name, count in gpu_instances.items():
        out = _gpu_install("--instance", name).stdout
        assert re.search(rf"RUNNER_LABELS=\S*,{re.escape(name)},gpu-{count}g$", out, re.M), name


def _gpu_drop_ins(result: subprocess.CompletedProcess[str], runners: int) -> list[list[str]]:
    files = written(result.stdout)
    pattern = r"^DeviceAllow=(\S+) rw$"
    return [re.findall(pattern, files[f"/etc/systemd/system/trncat-runner@{i}.service.d/devices.conf"], re.M)
            for i in range(runners)]  # fmt: skip


def test_a_gpu_runner_may_open_its_own_gpus_and_the_drivers_control_devices_only(tmp_path: Path) -> None:
    """Issue 29.12: the GPU runner's unit set DevicePolicy=closed with no device allowance, so a GPU job could open no
    /dev/nvidia* at all. Each GPU runner now has a drop-in allowing exactly its own GPUs' nodes (each GPU's minor as
    the driver names it, in the PCI order CUDA numbers them under CUDA_DEVICE_ORDER=PCI_BUS_ID) and the driver's
    control devices, and nothing else: not a neighbour's GPU, not nvidia-uvm-tools or nvidia-modeset."""
    result = _gpu_install("--instance", "p5en.48xlarge", "--runners", "4")
    assert result.returncode == 0, result.stderr
    files = written(result.stdout)
    unit = files["/etc/systemd/system/trncat-runner@.service"]
    assert "DevicePolicy=closed" in unit and "DeviceAllow=" not in unit
    control = ["/dev/nvidiactl", "/dev/nvidia-uvm"]
    for index, allowed in enumerate(_gpu_drop_ins(result, 4)):
        assert allowed == [f"/dev/nvidia{2 * index}", f"/dev/nvidia{2 * index + 1}", *control], allowed
        env = files[f"/etc/trncat-runner/runner-{index}.env"]
        assert "CUDA_DEVICE_ORDER=PCI_BUS_ID\n" in env
    # A driver whose minors are not its PCI order: the nodes follow the minors the driver names.
    proc = tmp_path / "nvidia"
    for bus, minor in (("0000:b9:00.0", 0), ("0000:53:00.0", 5), ("0000:97:00.0", 1), ("0000:0a:00.0", 7)):
        (proc / "gpus" / bus).mkdir(parents=True)
        (proc / "gpus" / bus / "information").write_text(f"Model: \t\t NVIDIA H200\nDevice Minor: \t {minor}\n")
    result = _gpu_install("--instance", "p5en.48xlarge", "--runners", "8", env={"TRNCAT_NVIDIA_PROC": str(proc)})
    assert result.returncode == 2 and "the driver lists 4 GPU(s)" in result.stderr  # an 8-GPU layout on 4
    for bus, minor in (("0000:ca:00.0", 2), ("0000:da:00.0", 3), ("0000:aa:00.0", 4), ("0000:1a:00.0", 6)):
        (proc / "gpus" / bus).mkdir(parents=True)
        (proc / "gpus" / bus / "information").write_text(f"Device Minor: {minor}\n")
    result = _gpu_install("--instance", "p5en.48xlarge", "--runners", "8", env={"TRNCAT_NVIDIA_PROC": str(proc)})
    assert result.returncode == 0, result.stderr
    by_pci = [7, 6, 5, 1, 4, 0, 2, 3]  # 0a, 1a, 53, 97, aa, b9, ca, da
    assert [allowed[0] for allowed in _gpu_drop_ins(result, 8)] == [f"/dev/nvidia{m}" for m in by_pci]
    # The job's own environment numbers them the same way.
    env = {"RUNNER_LABELS": "self-hosted,linux,x64,gpu,p5en.48xlarge,gpu-1g", "TRNCAT_RUNNER_USER": "trncat-runner-3",
           "TRNCAT_PREFIX": "/opt/trncat-runner", "TRNCAT_CONF": "/etc/trncat-runner", "GITHUB_API_PATH": "orgs/acme",
           "CUDA_VISIBLE_DEVICES": "3", "TRNCAT_RUNNER_CLASS": "gpu"}  # fmt: skip
    job_env = written(dry_run("run", "3", env=env).stdout)["/opt/trncat-runner/runners/3/.env"]
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID\n" in job_env


def test_a_gpu_runners_job_sees_its_gpus_and_no_neuron_setting() -> None:
    env = {"RUNNER_LABELS": "self-hosted,linux,x64,gpu,p5en.48xlarge,gpu-1g", "TRNCAT_RUNNER_USER": "trncat-runner-3",
           "TRNCAT_PREFIX": "/opt/trncat-runner", "TRNCAT_CONF": "/etc/trncat-runner", "GITHUB_API_PATH": "orgs/acme",
           "CUDA_VISIBLE_DEVICES": "3", "TRNCAT_RUNNER_CLASS": "gpu", "TRNCAT_INSTANCE_TYPE": "p5en.48xlarge",
           "TRNCAT_PYTHON": "/opt/trncat-runner/toolchain/bin/python"}  # fmt: skip
    jit = dry_run("jit", "3", env=env)
    assert jit.returncode == 0, jit.stderr
    run = dry_run("run", "3", env=env)
    job_env = written(run.stdout)["/opt/trncat-runner/runners/3/.env"]
    assert "CUDA_VISIBLE_DEVICES=3\n" in job_env and "TRNCAT_INSTANCE_TYPE=p5en.48xlarge\n" in job_env
    assert "NEURON" not in job_env
    no_slice = {k: v for k, v in env.items() if k != "CUDA_VISIBLE_DEVICES"}
    assert dry_run("jit", "3", env=no_slice).returncode == 2


def test_gpu_runners_need_a_group_restricted_to_benchmark_gpu(tmp_path: Path, github: _FakeGitHub) -> None:
    """The GPU class's group serves benchmark-gpu.yml alone: not the trn2 group, nor the trn2 workflow's."""
    gpu = ["--class", "gpu", "--instance", "g6e.xlarge"]
    base = ["install", "--token-file", str(tmp_path / "token"), "--github-api", github.url, "--check-settings"]
    assert dry_run(*base, *gpu, "--org", "acme", "--runner-group-id", "20").returncode == 0
    refused = dry_run(*base, *gpu, "--org", "acme", "--runner-group-id", "7")
    assert refused.returncode == 2 and "benchmark-gpu.yml@refs/heads/main only" in refused.stderr
    # ... and the trn2 class is refused the GPU group.
    trn2 = dry_run(*base, "--instance", "trn2.48xlarge", "--org", "acme", "--runner-group-id", "20")
    assert trn2.returncode == 2 and "benchmark.yml@refs/heads/main only" in trn2.stderr
