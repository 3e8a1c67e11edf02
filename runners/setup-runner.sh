#!/usr/bin/env bash
# Turn one trn2 instance into N ephemeral GitHub Actions runners for trncat's benchmark workflow; with
# --class gpu, one GPU instance into runners for benchmark-gpu.yml (the Compare view's cuda rows), under the
# same rules (one user per runner, one job per JIT registration, no metadata service, a restricted group).
#
#   sudo runners/setup-runner.sh install --repo OWNER/NAME --token-file FILE [--runners N] [--dry-run]
#   sudo runners/setup-runner.sh install ... --partition 1x8,4x4,40x1        (mixed runner sizes)
#   sudo runners/setup-runner.sh install ... --partition auto --from-estimate cost.json [--fleet-index K]
#   sudo runners/setup-runner.sh install ... --class gpu --instance p5en.48xlarge --runners 8   (1 GPU each)
#
# What `install` does (idempotent: run it again to change N or to upgrade; --dry-run prints every command):
#   - one system user per runner (no sudo, no login shell, its own uid and HOME): a job never shares a uid,
#     a HOME or a /proc/PID/environ with a neighbour's job;
#   - the pinned actions/runner release, verified against its sha256 before it is unpacked;
#   - the pinned toolchain (runners/toolchain.yaml) in a venv from the Neuron pip repository, unless the jobs
#     run in the container (--container IMAGE, see runners/Dockerfile);
#   - N runners, each owning a NEURON_RT_VISIBLE_CORES range of 64/N cores (trn2.48xlarge) and labelled
#     self-hosted,linux,x64,trn2,<instance>,trn2-<cores>c: the label `trncat queue` puts in `runs-on`
#     (--class trn3 on a trn3.48xlarge: trn3 and trn3-<cores>c);
#     or, with --partition, runners of mixed sizes: COUNTxSIZE entries laid out from core 0 in order, or
#     SIZE@FIRST at a given core. Ranges never overlap, a runner of up to a chip's 4 cores stays in its chip
#     and a larger one starts on a chip boundary (pipeline/queue/fleet.py applies the same rules); `auto` takes
#     instance K's partition from the fleet `trncat queue --estimate FILE` recommends;
#   - a systemd template unit, one instance per runner: before each job it kills what the previous job left,
#     wipes the runner's directory and HOME, unpacks a fresh runner (as the runner's user) and registers it
#     just-in-time (JIT config: one job, then the registration is gone), runs that one job, and systemd
#     restarts it for the next. Jobs cannot reach the instance metadata service (169.254.169.254).
# Registration, two options (runners/README.md, "Threat model"):
#   --registration token (the simple option): a GitHub credential allowed to create runners stays on this host
#     in a root-only file, read only by the root `jit` phase. A job never sees it, but root on the host does.
#   --registration external (recommended): a control plane off the host (a GitHub App token minted there, or
#     ARC) delivers each JIT config into the root-only inbox; this host holds no credential at all.
# Root only ever writes into root-owned directories (checked, never through a symlink), moves files into
# place atomically, and does everything inside a job user's directories as that user.
#
# `jit INDEX` and `run INDEX` are the unit's two phases (see runners/trncat-runner.service); their settings
# come from the unit's EnvironmentFile.
set -euo pipefail

readonly RUNNER_VERSION="2.331.0"
# sha256 of actions-runner-linux-x64-2.331.0.tar.gz, as on the actions/runner release page.
readonly RUNNER_SHA256="5fcc01bd546ba5c3f1291c2803658ebd3cedb3836489eda3be357d41bfcf28a7"
readonly RUNNER_TARBALL="actions-runner-linux-x64-${RUNNER_VERSION}.tar.gz"
readonly RUNNER_URL="https://github.com/actions/runner/releases/download/v${RUNNER_VERSION}/${RUNNER_TARBALL}"
readonly TRNCAT_NEURON_PIP="https://pip.repos.neuron.amazonaws.com"
# torch for TorchNeuron comes from PyTorch's CPU wheel index (PyPI's torch is the CUDA build): docs/neuron-facts.md
readonly TORCH_CPU_INDEX="https://download.pytorch.org/whl/cpu"
readonly TRNCAT_NEURON_APT_REPO="https://apt.repos.neuron.amazonaws.com"
# The GitHub REST API (GitHub Enterprise Server: https://HOST/api/v3, --github-api).
GITHUB_API="https://api.github.com"
readonly CORES_PER_DEVICE=4 # logical NeuronCores per trn2 or trn3 chip (/dev/neuronN) at LNC=2
# The NVIDIA driver's per-GPU folders (one per PCI address, each with an `information` file naming the GPU's
# "Device Minor": its node is /dev/nvidia<minor>). TRNCAT_NVIDIA_PROC points the tests at a fake one.
NVIDIA_PROC="${TRNCAT_NVIDIA_PROC:-/proc/driver/nvidia}"
# The driver's control devices a CUDA process opens beside its GPUs' nodes: nvidiactl (every process) and nvidia-uvm
# (CUDA's unified memory, opened at CUDA's initialisation). nvidia-uvm-tools (profilers) and nvidia-modeset
# (displays) are left out.
readonly NVIDIA_CONTROL_DEVICES="/dev/nvidiactl /dev/nvidia-uvm"

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly SCRIPT_DIR

DRY_RUN=0
PREFIX="/opt/trncat-runner"
CONF="/etc/trncat-runner"
UNIT_DIR="/etc/systemd/system"
RUNNER_USER="trncat-runner"
INSTANCE=""
RUNNERS=1
PARTITION=""
FROM_ESTIMATE=""
FLEET_INDEX=0
SCOPE=""
TOKEN_FILE=""
RUNNER_GROUP_ID=1
CONTAINER_IMAGE=""
CONTAINER_MEMORY="96g"
CONTAINER_PIDS=4096
INSTALL_NEURON_APT=0
# trn2 (NeuronCores, benchmark.yml), trn3 (the same on Trainium3) or gpu (GPUs, benchmark-gpu.yml): --class.
RUNNER_CLASS="trn2"
TRNCAT_NEURON_APT_FINGERPRINT=""
REGISTRATION="token"
FORCE_PUBLIC_REPO=0
CHECK_SETTINGS=""
# The repository whose benchmark workflow an organization runner group serves (--workflow-repo; default ORG/trncat).
WORKFLOW_REPO=""
# The one workflow file an organization runner group may serve, at the default branch (the GPU class's group
# serves benchmark-gpu.yml only, set in cmd_install); the group's check compares the whole OWNER/REPO/<this>
# (allowed_workflow), never a suffix.
WORKFLOW_FILE=".github/workflows/benchmark.yml@refs/heads/main"
# Instance metadata addresses (IPv4, and IPv6 on Nitro): jobs must never reach them.
readonly IMDS_ADDRESSES="169.254.169.254/32 fd00:ec2::254/128"

usage() {
  cat <<'EOF'
usage: setup-runner.sh install (--org ORG --runner-group-id ID | --repo OWNER/NAME) [--token-file FILE] [options]
       setup-runner.sh jit INDEX [--dry-run]    (systemd ExecStartPre, as root)
       setup-runner.sh run INDEX [--dry-run]    (systemd ExecStart)

install options:
  --org ORG              register organization runners, in a runner group restricted to
                         OWNER/REPO/.github/workflows/benchmark.yml@refs/heads/main and to that repository
                         alone (both checked through the API)
  --workflow-repo OWNER/NAME  the repository whose benchmark.yml the group serves (default ORG/trncat)
  --repo OWNER/NAME      register repository runners (refused for a public repository: a pull request's
                         own workflow could reach them; --force-public-repo overrides)
  --registration MODE    token (default, the simple option: the credential lives on this host) or
                         external (a control plane or ARC delivers each JIT config; no credential here)
  --token-file FILE      GitHub token allowed to create runner registrations (copied root-only); with
                         --registration external it is used only to check the settings, never copied
  --github-api URL       the REST API (default https://api.github.com; GitHub Enterprise: https://HOST/api/v3)
  --check-settings       check the GitHub settings through the API under --dry-run too (always done otherwise)
  --force-public-repo    allow repository runners for a public repository (not recommended)
  --class CLASS          trn2 (default: NeuronCores, for benchmark.yml), trn3 (the same on a trn3.48xlarge,
                         labels trn3-<N>c: Trainium3 rows, never Trainium2 ones) or gpu (the instance's GPUs, for
                         .github/workflows/benchmark-gpu.yml: CUDA_VISIBLE_DEVICES per runner, labels
                         gpu-<N>g, the CUDA toolchain of runners/toolchain-gpu.yaml; no partition or container)
  --runners N            runners sharing this instance, each on 1/N of its NeuronCores or GPUs (default 1)
  --partition SPEC       mixed runner sizes instead: COUNTxSIZE or SIZE@FIRST entries, e.g. 1x8,4x4,40x1
  --partition auto       take the partition from --from-estimate FILE (trncat queue --estimate FILE)
  --from-estimate FILE   the estimate; --fleet-index K picks its instance K's partition (default 0)
  --instance TYPE        trn2.3xlarge, trn2.48xlarge, trn2u.48xlarge; with --class gpu g6e.xlarge, g6e.4xlarge,
                         g6e.8xlarge, g6e.48xlarge, p5.4xlarge, p5.48xlarge, p5en.48xlarge (default: from metadata)
  --runner-group-id ID   runner group of the registrations (default 1: Default)
  --container IMAGE      run each job in IMAGE (built from runners/Dockerfile) with its /dev/neuronN devices,
                         the capabilities AWS's Trainium containers get (SYS_ADMIN, IPC_LOCK, unlimited
                         memlock) and no other, at most --container-pids processes and --container-memory memory
  --container-memory M   memory limit of a job's container (default 96g)
  --container-pids N     process limit of a job's container (default 4096)
  --neuron-apt           install the Neuron driver, runtime and tools from the Neuron apt repository
                         (not needed on the Neuron DLAMI, which carries them); needs
  --neuron-apt-key-fingerprint FPR   the apt key's fingerprint, checked before the key is trusted
  --user NAME            prefix of the per-runner users jobs run as (default trncat-runner: trncat-runner-0, ...)
  --prefix DIR           install root (default /opt/trncat-runner)
  --conf DIR             settings and credential (default /etc/trncat-runner)
  --dry-run              print what would be done; change nothing
EOF
}

die() {
  echo "setup-runner.sh: error: $*" >&2
  exit 2
}

note() {
  echo "# $*"
}

# Run a command, or print it (shell-quoted, one line, prefixed "+") under --dry-run.
run() {
  if [ "${DRY_RUN}" -eq 1 ]; then
    printf '+'
    printf ' %q' "$@"
    printf '\n'
  else
    "$@"
  fi
}

# trusted_dir DIR: DIR is a real folder (no symlink) owned by the caller (root) and writable by it only, and so
# is every folder above it, except that an ancestor may be a root-owned sticky folder such as /tmp (nobody else
# can rename or remove what we own in it). Root writes nowhere else: a folder a job user owns, or a link it
# planted, is never followed.
trusted_dir() {
  local dir="$1" owner mode me first=1
  me="$(id -u)"
  [[ "${dir}" == /* ]] || die "not an absolute path: ${dir}"
  while :; do
    [ -d "${dir}" ] && [ ! -L "${dir}" ] || die "refusing to write into ${dir}: not a real folder (a symlink?)"
    owner="$(stat -c %u -- "${dir}")"
    mode="$(stat -c %a -- "${dir}")"
    if [ "${first}" -eq 1 ]; then
      [ "${owner}" -eq "${me}" ] || die "refusing to write into ${dir}: owned by uid ${owner}, not by uid ${me}"
      ((8#${mode} & 8#022)) && die "refusing to write into ${dir}: writable by others (mode ${mode})"
    else
      [ "${owner}" -eq "${me}" ] || [ "${owner}" -eq 0 ] ||
        die "refusing to write under ${dir}: owned by uid ${owner}"
      if ((8#${mode} & 8#022)) && ! { ((8#${mode} & 8#1000)) && [ "${owner}" -eq 0 ]; }; then
        die "refusing to write under ${dir}: writable by others (mode ${mode})"
      fi
    fi
    [ "${dir}" = / ] && return 0
    first=0
    dir="$(dirname -- "${dir}")"
  done
}

# write_file PATH MODE OWNER: write stdin to PATH atomically (or print it under --dry-run). PATH's folder must be
# trusted (trusted_dir); the content goes to a new temp file there (O_EXCL), gets its mode and owner, and is
# renamed over PATH (rename replaces a link at PATH, it never follows it).
write_file() {
  local path="$1" mode="$2" owner="$3" content
  content="$(cat)"
  if [ "${DRY_RUN}" -eq 1 ]; then
    printf '+ write %s (mode %s, owner %s)\n' "${path}" "${mode}" "${owner}"
    printf '%s\n' "${content}" | sed 's/^/| /'
    return
  fi
  local dir tmp
  dir="$(dirname -- "${path}")"
  trusted_dir "${dir}"
  tmp="$(mktemp -- "${dir}/.write.XXXXXXXX")"
  printf '%s\n' "${content}" >"${tmp}"
  chmod -- "${mode}" "${tmp}"
  chown -- "${owner}" "${tmp}"
  mv -fT -- "${tmp}" "${path}"
}

total_cores() {
  if [ "${RUNNER_CLASS}" = gpu ]; then
    total_gpus "$1"
    return
  fi
  # A Trainium3 host is its own class (its rows are never Trainium2 rows): each class takes its own instances.
  case "${RUNNER_CLASS}:$1" in
    trn2:trn2.3xlarge) echo 4 ;;
    trn2:trn2.48xlarge | trn2:trn2u.48xlarge) echo 64 ;;
    trn3:trn3.48xlarge) echo 64 ;; # 16 Trainium3 chips, 4 logical cores each at LNC=2 (docs/neuron-facts.md)
    trn3:*) die "unsupported instance type '$1' for --class trn3 (trn3.48xlarge)" ;;
    *) die "unsupported instance type '$1' (trn2.3xlarge, trn2.48xlarge, trn2u.48xlarge; --class trn3: trn3.48xlarge)" ;;
  esac
}

# total_gpus INSTANCE: the GPUs of a GPU instance (the `accelerators` of runners/instances.yaml; a test checks
# that they agree).
total_gpus() {
  case "$1" in
    g6e.xlarge | g6e.4xlarge | g6e.8xlarge | p5.4xlarge) echo 1 ;;
    g6e.48xlarge | p5.48xlarge | p5en.48xlarge) echo 8 ;;
    *) die "unsupported GPU instance type '$1' (g6e.xlarge, g6e.4xlarge, g6e.8xlarge, g6e.48xlarge, p5.4xlarge, p5.48xlarge, p5en.48xlarge)" ;;
  esac
}

# "a" or "a,b,...": the GPUs a runner owns, as CUDA_VISIBLE_DEVICES lists them.
gpu_list() {
  local first="$1" count="$2" out="" g
  for ((g = first; g < first + count; g++)); do out="${out:+${out},}${g}"; done
  echo "${out}"
}

# gpu_nodes FIRST COUNT: the device nodes of GPUs FIRST..FIRST+COUNT-1 as CUDA numbers them under
# CUDA_DEVICE_ORDER=PCI_BUS_ID (the env file sets it): the Nth PCI address of the driver's folders, whose
# "Device Minor" names its node. Under --dry-run on a machine without the driver, the minor is taken as the index.
gpu_nodes() {
  local first="$1" count="$2" out="" g minor
  local -a folders=()
  if [ -d "${NVIDIA_PROC}/gpus" ]; then
    mapfile -t folders < <(find "${NVIDIA_PROC}/gpus" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | LC_ALL=C sort)
  fi
  for ((g = first; g < first + count; g++)); do
    if [ "${#folders[@]}" -gt 0 ]; then
      [ "${g}" -lt "${#folders[@]}" ] || die "GPU ${g}: the driver lists ${#folders[@]} GPU(s) in ${NVIDIA_PROC}/gpus"
      minor="$(sed -n 's/^Device Minor:[[:space:]]*\([0-9][0-9]*\)[[:space:]]*$/\1/p' "${NVIDIA_PROC}/gpus/${folders[g]}/information")"
      [ -n "${minor}" ] || die "GPU ${g} (${folders[g]}): no Device Minor in ${NVIDIA_PROC}/gpus/${folders[g]}/information"
    elif [ "${DRY_RUN}" -eq 1 ]; then
      minor="${g}"
    else
      die "no NVIDIA driver folders in ${NVIDIA_PROC}/gpus: is the driver loaded?"
    fi
    out="${out:+${out},}/dev/nvidia${minor}"
  done
  echo "${out}"
}

# parse_partition SPEC TOTAL: fill FIRSTS and SIZES, or die naming the broken rule.
parse_partition() {
  local spec="$1" total="$2" entry count size first k cursor=0 core
  FIRSTS=()
  SIZES=()
  IFS=',' read -ra entries <<<"${spec}"
  [ "${#entries[@]}" -gt 0 ] || die "--partition is empty"
  for entry in "${entries[@]}"; do
    if [[ "${entry}" =~ ^([0-9]+)x([0-9]+)$ ]]; then
      count=$((10#${BASH_REMATCH[1]}))
      size=$((10#${BASH_REMATCH[2]}))
      ((count >= 1)) || die "partition entry '${entry}': the count must be at least 1"
      ((size >= 1 && (size & (size - 1)) == 0)) || die "partition entry '${entry}': runner sizes are powers of two"
      for ((k = 0; k < count; k++)); do
        FIRSTS+=("${cursor}")
        SIZES+=("${size}")
        cursor=$((cursor + size))
        ((${#SIZES[@]} <= total)) || die "--partition '${spec}' asks for over ${total} cores; a ${INSTANCE} has ${total}"
      done
    elif [[ "${entry}" =~ ^([0-9]+)@([0-9]+)$ ]]; then
      size=$((10#${BASH_REMATCH[1]}))
      first=$((10#${BASH_REMATCH[2]}))
      ((size >= 1 && (size & (size - 1)) == 0)) || die "partition entry '${entry}': runner sizes are powers of two"
      FIRSTS+=("${first}")
      SIZES+=("${size}")
      cursor=$((first + size))
    else
      die "partition entry '${entry}': want COUNTxSIZE (e.g. 4x4) or SIZE@FIRST (e.g. 8@56)"
    fi
  done
  local sum=0 align
  for size in "${SIZES[@]}"; do sum=$((sum + size)); done
  ((sum <= total)) || die "--partition '${spec}' asks for ${sum} cores; a ${INSTANCE} has ${total}"
  local -A owner=()
  for ((k = 0; k < ${#SIZES[@]}; k++)); do
    first="${FIRSTS[k]}"
    size="${SIZES[k]}"
    ((first + size <= total)) || die "runner ${k} (${size}@${first}) ends past core $((total - 1)) of a ${INSTANCE}"
    align=$((size < CORES_PER_DEVICE ? size : CORES_PER_DEVICE))
    ((first % align == 0)) || die "runner ${k} (${size}@${first}) straddles a chip boundary: a ${size}-core runner starts at a multiple of ${align}"
    for ((core = first; core < first + size; core++)); do
      [ -z "${owner[${core}]:-}" ] || die "runners ${owner[${core}]} and ${k} overlap on core ${core}"
      owner[${core}]="${k}"
    done
  done
}

# The partition of instance FLEET_INDEX in an estimate written by `trncat queue --estimate FILE`.
partition_from_estimate() {
  [ -n "${FROM_ESTIMATE}" ] || die "--partition auto needs --from-estimate FILE (trncat queue --estimate FILE)"
  [ -r "${FROM_ESTIMATE}" ] || die "cannot read ${FROM_ESTIMATE}"
  local spec
  spec="$(jq -er --argjson k "${FLEET_INDEX}" '.fleet[$k].partition | strings' "${FROM_ESTIMATE}" 2>/dev/null)" ||
    die "${FROM_ESTIMATE} recommends no instance ${FLEET_INDEX} (see its .fleet)"
  echo "${spec}"
}

detect_instance() {
  local token
  token="$(curl -fsS -X PUT -H "X-aws-ec2-metadata-token-ttl-seconds: 60" http://169.254.169.254/latest/api/token)"
  curl -fsS -H "X-aws-ec2-metadata-token: ${token}" http://169.254.169.254/latest/meta-data/instance-type
}

# "a" or "a-b": the runtime wants a contiguous range.
core_range() {
  local first="$1" count="$2"
  if [ "${count}" -eq 1 ]; then echo "${first}"; else echo "${first}-$((first + count - 1))"; fi
}

# pip constraints (name==version.*) from runners/toolchain.yaml: keys are record version fields, `_` -> `-`. A
# prefix match: the 2.33 TorchNeuron wheels are the 2.14.3.0.* family (a 5th component would miss `==2.14.3.0`).
toolchain_constraints() {
  local file="toolchain.yaml"
  [ "${RUNNER_CLASS}" = gpu ] && file="toolchain-gpu.yaml"
  sed -nE 's/^([a-z_]+): *"?([^"#[:space:]]+)"?.*/\1==\2.*/p' "${SCRIPT_DIR}/${file}" | tr '_' '-'
}

# The Neuron Debian packages pinned in runners/toolchain.yaml's `apt:` section, one NAME=VERSION a line.
apt_pins() {
  sed -nE '/^apt:/,/^[^ #]/ s/^  ([a-z0-9-]+): *"?([^"#[:space:]]+)"?.*/\1=\2/p' "${SCRIPT_DIR}/toolchain.yaml"
}

install_prerequisites() {
  note "prerequisites"
  run apt-get update -q
  run apt-get install -y -q curl jq python3-venv
  if [ "${INSTALL_NEURON_APT}" -eq 1 ]; then
    note "Neuron driver, runtime and tools from ${TRNCAT_NEURON_APT_REPO}"
    local codename
    codename="$(sed -n 's/^VERSION_CODENAME=//p' /etc/os-release)"
    # The key is pinned by its fingerprint, which the maintainer passes after checking it out of band: the
    # Neuron docs publish the key's URL but not its fingerprint ("Neuron Setup Troubleshooting" names only the
    # expired key 5749CAD8646D9185), so the script carries no fingerprint of its own.
    [[ "${TRNCAT_NEURON_APT_FINGERPRINT}" =~ ^[0-9A-F]{40}$ ]] ||
      die "--neuron-apt needs --neuron-apt-key-fingerprint FPR (40 hex digits, upper case) of the Neuron apt key"
    run install -d -m 0755 /etc/apt/keyrings
    run curl -fsSL -o /etc/apt/keyrings/neuron.asc.part "${TRNCAT_NEURON_APT_REPO}/GPG-PUB-KEY-AMAZON-AWS-NEURON.PUB"
    if [ "${DRY_RUN}" -eq 1 ]; then
      printf '+ check the fingerprint of /etc/apt/keyrings/neuron.asc.part is %s\n' "${TRNCAT_NEURON_APT_FINGERPRINT}"
    else
      local found
      found="$(gpg --show-keys --with-colons /etc/apt/keyrings/neuron.asc.part | awk -F: '$1 == "fpr" {print $10}')"
      if [ "${found}" != "${TRNCAT_NEURON_APT_FINGERPRINT}" ]; then
        rm -f /etc/apt/keyrings/neuron.asc.part
        die "the Neuron apt key has fingerprint(s) '${found//$'\n'/ }', not ${TRNCAT_NEURON_APT_FINGERPRINT}: refusing it"
      fi
    fi
    run mv -f /etc/apt/keyrings/neuron.asc.part /etc/apt/keyrings/neuron.asc
    echo "deb [signed-by=/etc/apt/keyrings/neuron.asc] ${TRNCAT_NEURON_APT_REPO} ${codename} main" |
      write_file /etc/apt/sources.list.d/neuron.list 0644 root:root
    run apt-get update -q
    # Pinned to the release the Python toolchain belongs to (runners/toolchain.yaml): Neuron 2.34's tools drop
    # `neuron-ls --json-output`, and a newer runtime would drift from the pinned torch-neuronx.
    local pins
    mapfile -t pins < <(apt_pins)
    [ "${#pins[@]}" -eq 4 ] || die "runners/toolchain.yaml's apt section must pin the four Neuron packages"
    run apt-get install -y -q "${pins[@]}"
  fi
}

# runner_user INDEX: the user runner INDEX runs its jobs as (its own uid: no job can signal, trace or read
# the environment of a neighbour's processes, or touch its files).
runner_user() {
  echo "${RUNNER_USER}-$1"
}

create_users() {
  local index user
  note "one user per runner (${RUNNER_USER}-0 ...): no password, no login shell, no sudo, own uid and HOME"
  run install -d -m 0755 -o root -g root "${PREFIX}" "${PREFIX}/runners" "${PREFIX}/homes" "${PREFIX}/state"
  for ((index = 0; index < RUNNERS; index++)); do
    user="$(runner_user "${index}")"
    if id -u "${user}" >/dev/null 2>&1; then
      note "user ${user} exists"
    else
      run useradd --system --user-group --no-create-home --home-dir "${PREFIX}/homes/${index}" \
        --shell /usr/sbin/nologin "${user}"
    fi
    # The JIT config's folder: root-owned, readable by this runner's user only.
    run install -d -m 0750 -o root -g "${user}" "${PREFIX}/state/runner-${index}"
  done
  # No cron or at for job users: nothing a job schedules outlives it.
  [ -f /etc/cron.allow ] || write_file /etc/cron.allow 0644 root:root <<<"root"
  [ -f /etc/at.allow ] || write_file /etc/at.allow 0644 root:root <<<"root"
}

fetch_runner() {
  local cached="${PREFIX}/cache/${RUNNER_TARBALL}"
  note "actions/runner ${RUNNER_VERSION}, verified by sha256 before use"
  run install -d -m 0755 "${PREFIX}" "${PREFIX}/cache" "${PREFIX}/bin"
  if [ "${DRY_RUN}" -eq 0 ] && [ -f "${cached}" ] && echo "${RUNNER_SHA256}  ${cached}" | sha256sum -c --quiet -; then
    note "${cached} already verified"
    return
  fi
  run curl -fsSL --retry 3 -o "${cached}.part" "${RUNNER_URL}"
  if [ "${DRY_RUN}" -eq 1 ]; then
    printf '+ sha256sum -c <<< %q\n' "${RUNNER_SHA256}  ${cached}.part"
  elif ! echo "${RUNNER_SHA256}  ${cached}.part" | sha256sum -c --quiet -; then
    rm -f "${cached}.part"
    die "checksum mismatch for ${RUNNER_URL}: refusing to install it"
  fi
  run mv -f "${cached}.part" "${cached}"
}

install_toolchain() {
  if [ -n "${CONTAINER_IMAGE}" ]; then
    note "toolchain: in the container image ${CONTAINER_IMAGE}"
    return
  fi
  if [ "${RUNNER_CLASS}" = gpu ]; then
    # PyPI's torch is the CUDA build: the GPU class takes it from there, never the CPU or Neuron indexes.
    note "toolchain from runners/toolchain-gpu.yaml: the CUDA build of torch from PyPI"
    toolchain_constraints | write_file "${PREFIX}/toolchain-constraints.txt" 0644 root:root
    run python3 -m venv "${PREFIX}/toolchain"
    run "${PREFIX}/toolchain/bin/pip" install --quiet --upgrade pip
    run "${PREFIX}/toolchain/bin/pip" install --quiet --constraint "${PREFIX}/toolchain-constraints.txt" torch \
      transformers sentence-transformers diffusers accelerate
    return
  fi
  note "toolchain from runners/toolchain.yaml, Neuron packages from ${TRNCAT_NEURON_PIP}"
  toolchain_constraints | write_file "${PREFIX}/toolchain-constraints.txt" 0644 root:root
  run python3 -m venv "${PREFIX}/toolchain"
  run "${PREFIX}/toolchain/bin/pip" install --quiet --upgrade pip
  run "${PREFIX}/toolchain/bin/pip" install --quiet --extra-index-url "${TRNCAT_NEURON_PIP}" \
    --extra-index-url "${TORCH_CPU_INDEX}" --constraint "${PREFIX}/toolchain-constraints.txt" torch torch-neuronx neuronx-cc nki \
    transformers sentence-transformers diffusers accelerate
}

check_machine() {
  # trncat doctor: driver, devices, neuron-ls, cores, the pinned toolchain, the NEFF cache, disk and memory.
  # A runner is never registered on a machine that fails it.
  if [ -n "${CONTAINER_IMAGE}" ]; then
    note "container mode: the benchmark workflow's smoke job runs trncat doctor in the image"
    return
  fi
  if [ "${RUNNER_CLASS}" = gpu ]; then
    # trncat doctor checks a Neuron machine; a GPU runner is registered only where torch sees the GPUs.
    note "the CUDA build of torch sees this instance's GPUs"
    run "${PREFIX}/toolchain/bin/pip" install --quiet --no-deps "${SCRIPT_DIR}/.."
    run "${PREFIX}/toolchain/bin/python" -c 'import sys, torch; sys.exit(0 if torch.cuda.device_count() >= int(sys.argv[1]) else 1)' \
      "$(total_gpus "${INSTANCE}")" || die "torch does not see the ${INSTANCE}'s GPUs (driver, CUDA build of torch): no runner is registered"
    return
  fi
  note "trncat doctor: is this machine ready to benchmark on Neuron?"
  run "${PREFIX}/toolchain/bin/pip" install --quiet --no-deps "${SCRIPT_DIR}/.."
  run "${PREFIX}/toolchain/bin/trncat" doctor --toolchain "${SCRIPT_DIR}/toolchain.yaml" \
    || die "trncat doctor found a problem (the fail lines above say how to fix it): no runner is registered"
}

write_runner_env() {
  local index="$1" cores="$2" first="$3" labels="$4" api_path="$5"
  local first_device=$((first / CORES_PER_DEVICE)) last_device=$(((first + cores - 1) / CORES_PER_DEVICE))
  local devices="" d
  for ((d = first_device; d <= last_device; d++)); do devices="${devices:+${devices},}/dev/neuron${d}"; done
  {
    if [ "${RUNNER_CLASS}" = gpu ]; then
      echo "# runner ${index}: ${cores} GPU(s) from GPU ${first} (written by setup-runner.sh --class gpu)"
    else
      echo "# runner ${index}: ${cores} NeuronCore(s) from core ${first} (written by setup-runner.sh)"
    fi
    echo "RUNNER_INDEX=${index}"
    echo "RUNNER_LABELS=${labels}"
    echo "RUNNER_GROUP_ID=${RUNNER_GROUP_ID}"
    echo "TRNCAT_RUNNER_USER=$(runner_user "${index}")"
    echo "TRNCAT_REGISTRATION=${REGISTRATION}"
    echo "TRNCAT_PREFIX=${PREFIX}"
    echo "TRNCAT_CONF=${CONF}"
    echo "GITHUB_API_PATH=${api_path}"
    # What prices the runner's rows (pipeline/prices.py); the cuda backend records it as the instance type.
    echo "TRNCAT_INSTANCE_TYPE=${INSTANCE}"
    if [ "${RUNNER_CLASS}" = gpu ]; then
      echo "TRNCAT_RUNNER_CLASS=gpu"
      echo "CUDA_VISIBLE_DEVICES=$(gpu_list "${first}" "${cores}")"
      # CUDA numbers GPUs fastest first unless told otherwise: in PCI order its numbers are the drop-in's nodes.
      echo "CUDA_DEVICE_ORDER=PCI_BUS_ID"
      echo "TRNCAT_PYTHON=${PREFIX}/toolchain/bin/python"
    elif [ -n "${CONTAINER_IMAGE}" ]; then
      # How the runtime numbers cores inside a container is not settled by the docs: a runner of whole chips
      # names no cores (trncat takes them from neuron-ls's neuroncore_ids in the container); a runner on part of
      # a chip re-bases its range onto the passed devices, numbered from 0 (trncat doctor prints the ids).
      if ((cores % CORES_PER_DEVICE == 0)); then
        echo "NEURON_RT_VISIBLE_CORES="
      else
        echo "NEURON_RT_VISIBLE_CORES=$(core_range $((first % CORES_PER_DEVICE)) "${cores}")"
      fi
      echo "TRNCAT_CONTAINER_IMAGE=${CONTAINER_IMAGE}"
      echo "TRNCAT_NEURON_DEVICES=${devices}"
      echo "TRNCAT_CONTAINER_MEMORY=${CONTAINER_MEMORY}"
      echo "TRNCAT_CONTAINER_PIDS=${CONTAINER_PIDS}"
    else
      echo "NEURON_RT_VISIBLE_CORES=$(core_range "${first}" "${cores}")"
      echo "TRNCAT_PYTHON=${PREFIX}/toolchain/bin/python"
    fi
  } | write_file "${CONF}/runner-${index}.env" 0644 root:root
  if [ "${RUNNER_CLASS}" = gpu ]; then
    local nodes
    nodes="$(gpu_nodes "${first}" "${cores}")" || exit 2
    write_device_drop_in "${index}" "${nodes},${NVIDIA_CONTROL_DEVICES// /,}" "its own GPUs and the driver's control devices only"
  else
    write_device_drop_in "${index}" "${devices}" "its own NeuronCores' chips only"
  fi
}

# write_device_drop_in INDEX DEVICES WHAT: the unit's DevicePolicy=closed lets a job open the pseudo devices only;
# this drop-in adds the runner's own devices (DEVICES, comma-separated): its chips (/dev/neuronN), or (the GPU
# class) its GPUs' /dev/nvidiaN and the driver's control devices (issue 29.12: with none, a GPU job could open
# no /dev/nvidia* at all). The Neuron driver's udev rule makes every /dev/neuron* mode 0666 (aws-neuron-driver's
# README), and NVIDIA's nodes are 0666 by default too, so without it any job could open every chip or GPU.
write_device_drop_in() {
  local index="$1" devices="$2" what="$3" device
  run install -d -m 0755 -o root -g root "${UNIT_DIR}/trncat-runner@${index}.service.d"
  {
    echo "# runner ${index}: ${what} (written by setup-runner.sh)"
    echo "[Service]"
    IFS=',' read -ra list <<<"${devices}"
    for device in "${list[@]}"; do echo "DeviceAllow=${device} rw"; done
  } | write_file "${UNIT_DIR}/trncat-runner@${index}.service.d/devices.conf" 0644 root:root
}

install_unit() {
  local template="${SCRIPT_DIR}/trncat-runner.service" run_as="${RUNNER_USER}-%i"
  [ -f "${template}" ] || die "missing ${template}"
  # docker needs root; the container itself runs as its unprivileged `runner` user, with only the capabilities
  # the Neuron runtime is documented with (see the run phase).
  [ -n "${CONTAINER_IMAGE}" ] && run_as="root"
  sed -e "s|@PREFIX@|${PREFIX}|g" -e "s|@CONF@|${CONF}|g" -e "s|@RUN_AS@|${run_as}|g" \
    -e "s|@IMDS@|${IMDS_ADDRESSES}|g" "${template}" |
    write_file "${UNIT_DIR}/trncat-runner@.service" 0644 root:root
}

# Containers' traffic leaves through the FORWARD chain, outside the unit's IPAddressDeny=: Docker's
# DOCKER-USER chain rejects the metadata addresses for every container (docs.docker.com, "Packet filtering and
# firewalls"). A oneshot unit puts the rules back after each boot, once Docker has created the chain.
install_imds_block() {
  [ -n "${CONTAINER_IMAGE}" ] || return 0
  note "containers: no route to the instance metadata service"
  write_file "${UNIT_DIR}/trncat-imds-block.service" 0644 root:root <<EOF
[Unit]
Description=trncat: containers never reach the EC2 instance metadata service
After=docker.service
Requires=docker.service
Before=trncat-runner@.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'iptables -C DOCKER-USER -d 169.254.169.254/32 -j REJECT 2>/dev/null || iptables -I DOCKER-USER -d 169.254.169.254/32 -j REJECT'
ExecStart=/bin/sh -c 'ip6tables -C DOCKER-USER -d fd00:ec2::254/128 -j REJECT 2>/dev/null || ip6tables -I DOCKER-USER -d fd00:ec2::254/128 -j REJECT || true'

[Install]
WantedBy=multi-user.target
EOF
  run systemctl daemon-reload
  run systemctl enable --now trncat-imds-block.service
}

# The whole workflow path the runner group must be restricted to: OWNER/REPO/.github/workflows/...@refs/heads/main.
allowed_workflow() {
  echo "${WORKFLOW_REPO}/${WORKFLOW_FILE}"
}

# github_get PATH: one read-only REST call with the token from TOKEN_FILE (never in argv).
github_get() {
  curl -fsS --max-time 20 -H @<(printf 'Authorization: Bearer %s\n' "$(cat "${TOKEN_FILE}")") \
    -H "Accept: application/vnd.github+json" -H "X-GitHub-Api-Version: 2022-11-28" "${GITHUB_API}/$1"
}

# Who may reach these runners. A pull_request run uses the PR's own workflow files, so repository runners of a
# public repository can be reached by anyone's PR; an organization runner group can be restricted to one
# workflow file at one ref (docs.github.com, "Managing access to self-hosted runners using groups": "you must use
# the full path to the workflow, including the repository name and owner"). The whole path is compared: a
# suffix would pass another repository's benchmark.yml. The group's repository access must name this
# repository alone: a called workflow's jobs run in the caller's repository, so that list is who may call it.
check_github_settings() {
  if [ "${CHECK_SETTINGS}" = skip ]; then
    note "GitHub settings not checked (--dry-run without --check-settings)"
    return
  fi
  [ -n "${TOKEN_FILE}" ] && [ -s "${TOKEN_FILE}" ] ||
    die "checking the GitHub settings needs --token-file (with --registration external too: it is not copied)"
  local answer
  case "${SCOPE}" in
    org:*)
      answer="$(github_get "orgs/${SCOPE#org:}/actions/runner-groups/${RUNNER_GROUP_ID}")" ||
        die "cannot read runner group ${RUNNER_GROUP_ID} of ${SCOPE#org:} through ${GITHUB_API}"
      jq -e --arg wf "$(allowed_workflow)" '.restricted_to_workflows == true
          and (.selected_workflows | length) > 0
          and all(.selected_workflows[]; . == $wf)' <<<"${answer}" >/dev/null ||
        die "runner group ${RUNNER_GROUP_ID} must be restricted to $(allowed_workflow) only (Settings > Actions > Runner groups > Workflow access)"
      jq -e '.visibility == "selected"' <<<"${answer}" >/dev/null ||
        die "runner group ${RUNNER_GROUP_ID} must give repository access to ${WORKFLOW_REPO} alone (Settings > Actions > Runner groups > Repository access: selected repositories)"
      answer="$(github_get "orgs/${SCOPE#org:}/actions/runner-groups/${RUNNER_GROUP_ID}/repositories?per_page=100")" ||
        die "cannot read the repository access of runner group ${RUNNER_GROUP_ID} through ${GITHUB_API}"
      jq -e --arg repo "${WORKFLOW_REPO}" '[.repositories[].full_name] == [$repo]' <<<"${answer}" >/dev/null ||
        die "runner group ${RUNNER_GROUP_ID} must give repository access to ${WORKFLOW_REPO} alone, not $(jq -r '[.repositories[]?.full_name] | join(", ")' <<<"${answer}")"
      note "runner group ${RUNNER_GROUP_ID}: restricted to $(allowed_workflow) and to ${WORKFLOW_REPO}"
      ;;
    *)
      answer="$(github_get "repos/${SCOPE}")" || die "cannot read ${SCOPE} through ${GITHUB_API}"
      if jq -e '.private == false' <<<"${answer}" >/dev/null; then
        [ "${FORCE_PUBLIC_REPO}" -eq 1 ] ||
          die "${SCOPE} is public: its pull requests run their own workflow files, which could reach repository runners. Register organization runners in a group restricted to OWNER/REPO/${WORKFLOW_FILE} (--org ORG --runner-group-id ID), or pass --force-public-repo"
        note "WARNING: repository runners for the public repository ${SCOPE} (--force-public-repo)"
      fi
      ;;
  esac
}

cmd_install() {
  if [ "${RUNNER_CLASS}" = gpu ]; then
    WORKFLOW_FILE=".github/workflows/benchmark-gpu.yml@refs/heads/main"
    [ -z "${PARTITION}" ] || die "--partition lays out NeuronCores; a GPU runner owns whole GPUs: use --runners N"
    [ -z "${CONTAINER_IMAGE}" ] || die "--container runs the Neuron image; the GPU class runs its toolchain on the host"
    [ "${INSTALL_NEURON_APT}" -eq 0 ] || die "--neuron-apt installs the Neuron driver; a GPU instance has none"
  fi
  [ -n "${SCOPE}" ] || die "pass --org ORG --runner-group-id ID (or --repo OWNER/NAME)"
  case "${REGISTRATION}" in
    token) [ -n "${TOKEN_FILE}" ] || die "pass --token-file FILE (or --registration external)" ;;
    external) ;;
    *) die "--registration is token or external" ;;
  esac
  if [[ "${SCOPE}" == org:* ]]; then
    [ -n "${WORKFLOW_REPO}" ] || WORKFLOW_REPO="${SCOPE#org:}/trncat"
    if [ "${RUNNER_GROUP_ID}" -eq 1 ] && [ "${FORCE_PUBLIC_REPO}" -eq 0 ]; then
      die "--org needs --runner-group-id: a group restricted to $(allowed_workflow), not the Default group (1)"
    fi
  fi
  [ "${DRY_RUN}" -eq 1 ] || [ "$(id -u)" -eq 0 ] || die "install needs root (or --dry-run)"
  [ "${DRY_RUN}" -eq 1 ] || [ -z "${TOKEN_FILE}" ] || [ -r "${TOKEN_FILE}" ] || die "cannot read ${TOKEN_FILE}"
  [ -n "${CHECK_SETTINGS}" ] || { [ "${DRY_RUN}" -eq 1 ] && CHECK_SETTINGS=skip; } || CHECK_SETTINGS=yes
  [[ "${RUNNERS}" =~ ^[0-9]+$ ]] && [ "${RUNNERS}" -ge 1 ] || die "--runners must be a positive integer"
  if [ -z "${INSTANCE}" ] && [ "${DRY_RUN}" -eq 1 ]; then
    INSTANCE="trn2.48xlarge"
    [ "${RUNNER_CLASS}" = gpu ] && INSTANCE="p5en.48xlarge"
    [ "${RUNNER_CLASS}" = trn3 ] && INSTANCE="trn3.48xlarge"
    note "would read the instance type from IMDSv2; assuming ${INSTANCE} (pass --instance to choose)"
  fi
  [ -n "${INSTANCE}" ] || INSTANCE="$(detect_instance)"
  local total cores
  total="$(total_cores "${INSTANCE}")"
  if [ -n "${PARTITION}" ]; then
    [ "${RUNNERS_SET:-0}" -eq 0 ] || die "--runners and --partition exclude each other"
    [ "${PARTITION}" != "auto" ] || PARTITION="$(partition_from_estimate)"
    parse_partition "${PARTITION}" "${total}"
    RUNNERS="${#SIZES[@]}"
  else
    ((total % RUNNERS == 0)) || die "--runners ${RUNNERS} does not divide the ${total} NeuronCores of a ${INSTANCE}"
    cores=$((total / RUNNERS))
    ((cores & (cores - 1))) && die "${RUNNERS} runners get ${cores} cores each: choose N so that 64/N is a power of two"
    FIRSTS=()
    SIZES=()
    for ((index = 0; index < RUNNERS; index++)); do
      FIRSTS+=($((index * cores)))
      SIZES+=("${cores}")
    done
  fi

  local api_path
  case "${SCOPE}" in
    org:*) api_path="orgs/${SCOPE#org:}" ;;
    *) api_path="repos/${SCOPE}" ;;
  esac
  check_github_settings
  install_prerequisites
  create_users
  fetch_runner
  install_toolchain
  check_machine

  run install -d -m 0700 -o root -g root "${CONF}"
  if [ "${REGISTRATION}" = token ]; then
    note "GitHub credential (the simple option): root-only, read by the jit phase only"
    run install -m 0600 -o root -g root "${TOKEN_FILE}" "${CONF}/github-token"
  else
    note "no GitHub credential on this host: the control plane puts each JIT config into ${CONF}/jit-inbox/"
    run install -d -m 0700 -o root -g root "${CONF}/jit-inbox"
    run rm -f "${CONF}/github-token"
  fi
  run install -m 0755 -o root -g root "${SCRIPT_DIR}/setup-runner.sh" "${PREFIX}/bin/setup-runner.sh"

  local index first labels
  for ((index = 0; index < RUNNERS; index++)); do
    first="${FIRSTS[index]}"
    cores="${SIZES[index]}"
    if [ "${RUNNER_CLASS}" = gpu ]; then
      labels="self-hosted,linux,x64,gpu,${INSTANCE},gpu-${cores}g"
      note "runner ${index}: GPUs $(gpu_list "${first}" "${cores}"), labels ${labels}"
    else
      labels="self-hosted,linux,x64,${RUNNER_CLASS},${INSTANCE},${RUNNER_CLASS}-${cores}c"
      note "runner ${index}: cores $(core_range "${first}" "${cores}"), labels ${labels}"
    fi
    write_runner_env "${index}" "${cores}" "${first}" "${labels}" "${api_path}"
  done
  install_unit
  install_imds_block
  run systemctl daemon-reload
  # Re-partitioning: stop the instances beyond N before starting the new layout.
  local unit
  while read -r unit; do
    [ -n "${unit}" ] || continue
    index="${unit#trncat-runner@}"
    index="${index%.service}"
    if [[ "${index}" =~ ^[0-9]+$ ]] && [ "${index}" -ge "${RUNNERS}" ]; then
      run systemctl disable --now "${unit}"
      run rm -f "${CONF}/runner-${index}.env"
      run rm -rf -- "${UNIT_DIR}/trncat-runner@${index}.service.d"
    fi
  done < <(systemctl list-units --all --plain --no-legend 'trncat-runner@*' 2>/dev/null | awk '{print $1}')
  for ((index = 0; index < RUNNERS; index++)); do
    run systemctl enable --now "trncat-runner@${index}.service"
  done
  note "done: ${RUNNERS} runner(s) ($(printf '%s ' "${SIZES[@]}")core(s)); logs: journalctl -u 'trncat-runner@*'"
}

require_env() {
  local name
  for name in "$@"; do
    [ -n "${!name:-}" ] || die "${name} is not set (the unit's EnvironmentFile sets it)"
  done
}

# take_external_jit INBOX: the JIT config a control plane delivered (waits for it), removed from the inbox.
take_external_jit() {
  local inbox="$1" waited=0
  while [ ! -f "${inbox}" ]; do
    ((waited % 60 == 0)) && note "waiting for a JIT config in ${inbox}"
    sleep 5
    waited=$((waited + 5))
  done
  trusted_dir "$(dirname -- "${inbox}")"
  [ ! -L "${inbox}" ] || die "${inbox} is a symlink"
  cat -- "${inbox}"
  rm -f -- "${inbox}"
}

# Root phase before each job: nothing of the previous job survives, a fresh runner and HOME owned by this
# runner's user, and a JIT registration for exactly one job. Root writes only into root-owned folders; what
# goes into the job user's folders is written by that user (runuser), so no link a job planted is followed.
cmd_jit() {
  local index="$1"
  require_env RUNNER_LABELS TRNCAT_RUNNER_USER TRNCAT_PREFIX TRNCAT_CONF GITHUB_API_PATH
  # The runner's slice of the instance: its NeuronCores, or (the GPU class) its GPUs.
  [ -n "${NEURON_RT_VISIBLE_CORES:-}${CUDA_VISIBLE_DEVICES:-}" ] ||
    die "NEURON_RT_VISIBLE_CORES (or CUDA_VISIBLE_DEVICES) is not set (the unit's EnvironmentFile sets it)"
  # TRNCAT_RUNNER_USER (the unit's settings), not RUNNER_USER: that one is --user's prefix in this script.
  local user="${TRNCAT_RUNNER_USER}" dir="${TRNCAT_PREFIX}/runners/${index}" home="${TRNCAT_PREFIX}/homes/${index}"
  local state="${TRNCAT_PREFIX}/state/runner-${index}" cached="${TRNCAT_PREFIX}/cache/${RUNNER_TARBALL}"
  local name
  name="$(hostname -s)-${RUNNER_LABELS##*,}-${index}-$(date +%s)"
  note "fresh runner ${name}: nothing survives from the previous job"
  if [ "${DRY_RUN}" -eq 0 ]; then
    trusted_dir "${TRNCAT_PREFIX}/runners"
    trusted_dir "${TRNCAT_PREFIX}/homes"
    trusted_dir "${state}"
  fi
  # Whatever the previous job left running (a daemon, a process that escaped the unit) as this user.
  run pkill -KILL -u "${user}" || true
  run rm -rf --one-file-system -- "${dir}" "${home}" "${state}/jitconfig"
  run install -d -m 0700 -o "${user}" -g "${user}" "${dir}" "${home}"
  if [ "${DRY_RUN}" -eq 1 ]; then
    printf '+ sha256sum -c <<< %q\n' "${RUNNER_SHA256}  ${cached}"
  elif ! echo "${RUNNER_SHA256}  ${cached}" | sha256sum -c --quiet -; then
    die "${cached} does not match the pinned checksum: run setup-runner.sh install again"
  fi
  run runuser -u "${user}" -- tar -xzf "${cached}" -C "${dir}" --no-same-owner

  local body
  body="$(jq -nc --arg name "${name}" --arg labels "${RUNNER_LABELS}" --argjson group "${RUNNER_GROUP_ID:-1}" \
    '{name: $name, runner_group_id: $group, labels: ($labels | split(",")), work_folder: "_work"}')"
  if [ "${TRNCAT_REGISTRATION:-token}" = external ]; then
    note "JIT config from the control plane (this host holds no registration credential)"
    if [ "${DRY_RUN}" -eq 1 ]; then
      printf '+ take %q\n' "${TRNCAT_CONF}/jit-inbox/runner-${index}.jitconfig"
      write_file "${state}/jitconfig" 0640 "root:${user}" <<<"<encoded_jit_config>"
    else
      take_external_jit "${TRNCAT_CONF}/jit-inbox/runner-${index}.jitconfig" |
        write_file "${state}/jitconfig" 0640 "root:${user}"
    fi
    return
  fi
  note "JIT registration (ephemeral by construction: one job, then GitHub removes it)"
  # The token goes in a header read from a file descriptor, never in argv (visible to `ps`).
  if [ "${DRY_RUN}" -eq 1 ]; then
    run curl -fsS -X POST -H "@<authorization header from ${TRNCAT_CONF}/github-token>" \
      -H "Accept: application/vnd.github+json" -H "X-GitHub-Api-Version: 2022-11-28" \
      --data "${body}" "${GITHUB_API}/${GITHUB_API_PATH}/actions/runners/generate-jitconfig"
    write_file "${state}/jitconfig" 0640 "root:${user}" <<<"<encoded_jit_config>"
    return
  fi
  local answer
  answer="$(curl -fsS -X POST \
    -H @<(printf 'Authorization: Bearer %s\n' "$(cat "${TRNCAT_CONF}/github-token")") \
    -H "Accept: application/vnd.github+json" -H "X-GitHub-Api-Version: 2022-11-28" \
    --data "${body}" "${GITHUB_API}/${GITHUB_API_PATH}/actions/runners/generate-jitconfig")"
  jq -er '.encoded_jit_config' <<<"${answer}" | write_file "${state}/jitconfig" 0640 "root:${user}"
}

# One job: the runner exits when it is done and systemd starts the next jit phase. The JIT config reaches the
# runner through ACTIONS_RUNNER_INPUT_JITCONFIG, never argv (every process on the host can read argv with `ps`):
# actions/runner reads any argument from ACTIONS_RUNNER_INPUT_<NAME> and removes the variable from its own
# environment (src/Runner.Listener/CommandSettings.cs; the runner's docs are silent on it).
cmd_run() {
  local index="$1"
  require_env TRNCAT_PREFIX
  local dir="${TRNCAT_PREFIX}/runners/${index}" home="${TRNCAT_PREFIX}/homes/${index}"
  local jit_file="${TRNCAT_PREFIX}/state/runner-${index}/jitconfig"
  if [ "${DRY_RUN}" -eq 1 ]; then
    note "the JIT config goes to the runner as ACTIONS_RUNNER_INPUT_JITCONFIG, read from ${jit_file}"
  else
    ACTIONS_RUNNER_INPUT_JITCONFIG="$(cat -- "${jit_file}")"
    export ACTIONS_RUNNER_INPUT_JITCONFIG
  fi
  if [ -n "${TRNCAT_CONTAINER_IMAGE:-}" ]; then
    # --env NAME (no value) passes the variable from this environment: the value never reaches argv.
    # The capabilities every AWS Trainium container example adds (SYS_ADMIN, IPC_LOCK, unlimited memlock: the
    # runtime pins DMA memory), and nothing more.
    local args=(docker run --rm --name "trncat-runner-${index}" --security-opt no-new-privileges
      --cap-drop ALL --cap-add SYS_ADMIN --cap-add IPC_LOCK --ulimit memlock=-1:-1
      --pids-limit "${TRNCAT_CONTAINER_PIDS:-4096}" --memory "${TRNCAT_CONTAINER_MEMORY:-96g}"
      --env ACTIONS_RUNNER_INPUT_JITCONFIG
      --env "NEURON_RT_VISIBLE_CORES=${NEURON_RT_VISIBLE_CORES:-}" --env "TRNCAT_INSTANCE_TYPE=${TRNCAT_INSTANCE_TYPE:-}")
    local device
    IFS=',' read -ra devices <<<"${TRNCAT_NEURON_DEVICES:?}"
    for device in "${devices[@]}"; do args+=(--device "${device}"); done
    args+=("${TRNCAT_CONTAINER_IMAGE}")
    if [ "${DRY_RUN}" -eq 1 ]; then run "${args[@]}"; else exec "${args[@]}"; fi
  else
    # This phase runs as the runner's own user: the .env the runner reads into every job is written by it,
    # into its own fresh folder. HOME is that runner's, wiped before each job.
    local env_lines
    env_lines="NEURON_RT_VISIBLE_CORES=${NEURON_RT_VISIBLE_CORES:-}
TRNCAT_INSTANCE_TYPE=${TRNCAT_INSTANCE_TYPE:-}${TRNCAT_PYTHON:+
TRNCAT_PYTHON=${TRNCAT_PYTHON}}
HOME=${home}
TORCH_NEURONX_NEFF_CACHE_DIR=${home}/neff-cache"
    if [ "${TRNCAT_RUNNER_CLASS:-trn2}" = gpu ]; then
      env_lines="CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-}
CUDA_DEVICE_ORDER=PCI_BUS_ID
TRNCAT_INSTANCE_TYPE=${TRNCAT_INSTANCE_TYPE:-}${TRNCAT_PYTHON:+
TRNCAT_PYTHON=${TRNCAT_PYTHON}}
HOME=${home}"
    fi
    if [ "${DRY_RUN}" -eq 1 ]; then
      printf '+ write %s (mode 0600, owner the runner user, written as that user)\n' "${dir}/.env"
      printf '%s\n' "${env_lines}" | sed 's/^/| /'
    else
      (umask 077 && printf '%s\n' "${env_lines}" >"${dir}/.env")
    fi
    if [ "${DRY_RUN}" -eq 1 ]; then
      run "${dir}/run.sh"
    else
      cd "${dir}"
      export HOME="${home}"
      exec ./run.sh
    fi
  fi
}

main() {
  local command="${1:-}" index=""
  [ $# -gt 0 ] && shift
  case "${command}" in
    install) ;;
    jit | run)
      index="${1:-}"
      [[ "${index}" =~ ^[0-9]+$ ]] || die "${command} needs a runner INDEX"
      shift
      ;;
    -h | --help | help)
      usage
      return 0
      ;;
    *)
      usage >&2
      exit 2
      ;;
  esac
  while [ $# -gt 0 ]; do
    case "$1" in
      --dry-run) DRY_RUN=1 ;;
      --repo)
        [[ "${2:-}" =~ ^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$ ]] || die "--repo wants OWNER/NAME"
        SCOPE="$2"
        shift
        ;;
      --org)
        [[ "${2:-}" =~ ^[A-Za-z0-9_.-]+$ ]] || die "--org wants an organization name"
        SCOPE="org:$2"
        shift
        ;;
      --workflow-repo)
        [[ "${2:-}" =~ ^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$ ]] || die "--workflow-repo wants OWNER/NAME"
        WORKFLOW_REPO="$2"
        shift
        ;;
      --token-file) TOKEN_FILE="${2:?--token-file FILE}" && shift ;;
      --runners) RUNNERS="${2:?--runners N}" && RUNNERS_SET=1 && shift ;;
      --partition) PARTITION="${2:?--partition SPEC}" && shift ;;
      --from-estimate) FROM_ESTIMATE="${2:?--from-estimate FILE}" && shift ;;
      --fleet-index)
        [[ "${2:-}" =~ ^[0-9]+$ ]] || die "--fleet-index wants a number"
        FLEET_INDEX="$2"
        shift
        ;;
      --instance) INSTANCE="${2:?--instance TYPE}" && shift ;;
      --class)
        [[ "${2:-}" =~ ^(trn2|trn3|gpu)$ ]] || die "--class is trn2, trn3 or gpu"
        RUNNER_CLASS="$2"
        shift
        ;;
      --runner-group-id)
        [[ "${2:-}" =~ ^[0-9]+$ ]] || die "--runner-group-id wants a number"
        RUNNER_GROUP_ID="$2"
        shift
        ;;
      --container) CONTAINER_IMAGE="${2:?--container IMAGE}" && shift ;;
      --container-memory)
        [[ "${2:-}" =~ ^[0-9]+[kmg]?$ ]] || die "--container-memory wants a size such as 96g"
        CONTAINER_MEMORY="$2"
        shift
        ;;
      --container-pids)
        [[ "${2:-}" =~ ^[0-9]+$ ]] || die "--container-pids wants a number"
        CONTAINER_PIDS="$2"
        shift
        ;;
      --registration) REGISTRATION="${2:?--registration token|external}" && shift ;;
      --github-api)
        [[ "${2:-}" =~ ^https?://[A-Za-z0-9.:/_-]+$ ]] || die "--github-api wants a URL"
        GITHUB_API="${2%/}"
        shift
        ;;
      --check-settings) CHECK_SETTINGS=yes ;;
      --force-public-repo) FORCE_PUBLIC_REPO=1 ;;
      --neuron-apt) INSTALL_NEURON_APT=1 ;;
      --neuron-apt-key-fingerprint) TRNCAT_NEURON_APT_FINGERPRINT="${2:?--neuron-apt-key-fingerprint FPR}" && shift ;;
      --user) RUNNER_USER="${2:?--user NAME}" && shift ;;
      --prefix) PREFIX="${2:?--prefix DIR}" && shift ;;
      --conf) CONF="${2:?--conf DIR}" && shift ;;
      -h | --help)
        usage
        return 0
        ;;
      *) die "unknown option $1 (see --help)" ;;
    esac
    shift
  done
  case "${command}" in
    install) cmd_install ;;
    jit) cmd_jit "${index}" ;;
    run) cmd_run "${index}" ;;
  esac
}

# Sourced (tests run write_file and trusted_dir on their own), it only defines the functions.
if [ "${BASH_SOURCE[0]}" = "${0}" ]; then
  main "$@"
fi
