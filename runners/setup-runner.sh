#!/usr/bin/env bash
# Turn one trn2 instance into N ephemeral GitHub Actions runners for trncat's benchmark workflow.
#
#   sudo runners/setup-runner.sh install --repo OWNER/NAME --token-file FILE [--runners N] [--dry-run]
#   sudo runners/setup-runner.sh install ... --partition 1x8,4x4,40x1        (mixed runner sizes)
#   sudo runners/setup-runner.sh install ... --partition auto --from-estimate cost.json [--fleet-index K]
#
# What `install` does (idempotent: run it again to change N or to upgrade; --dry-run prints every command):
#   - a dedicated system user (no sudo, no login shell) that runs the jobs;
#   - the pinned actions/runner release, verified against its sha256 before it is unpacked;
#   - the pinned toolchain (runners/toolchain.yaml) in a venv from the Neuron pip repository, unless the jobs
#     run in the container (--container IMAGE, see runners/Dockerfile);
#   - N runners, each owning a NEURON_RT_VISIBLE_CORES range of 64/N cores (trn2.48xlarge) and labelled
#     self-hosted,linux,x64,trn2,<instance>,trn2-<cores>c: the label `trncat queue` puts in `runs-on`;
#     or, with --partition, runners of mixed sizes: COUNTxSIZE entries laid out from core 0 in order, or
#     SIZE@FIRST at a given core. Ranges never overlap, a runner of up to a chip's 4 cores stays in its chip
#     and a larger one starts on a chip boundary (pipeline/fleet.py applies the same rules); `auto` takes
#     instance K's partition from the fleet `trncat queue --estimate FILE` recommends;
#   - a systemd template unit, one instance per runner: before each job it unpacks a fresh runner and
#     registers it just-in-time (JIT config: one job, then the registration is gone), runs that one job, and
#     systemd restarts it for the next.
# The GitHub credential (a fine-grained token or GitHub App token allowed to manage self-hosted runners) stays
# in a root-only file, read only by the root `jit` phase: a job never sees it.
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
readonly GITHUB_API="https://api.github.com"
readonly CORES_PER_DEVICE=4 # logical NeuronCores per trn2 chip (/dev/neuronN) at LNC=2

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
INSTALL_NEURON_APT=0

usage() {
  cat <<'EOF'
usage: setup-runner.sh install (--repo OWNER/NAME | --org ORG) --token-file FILE [options]
       setup-runner.sh jit INDEX [--dry-run]    (systemd ExecStartPre, as root)
       setup-runner.sh run INDEX [--dry-run]    (systemd ExecStart)

install options:
  --repo OWNER/NAME      register repository runners
  --org ORG              register organization runners (use a runner group restricted to benchmark.yml)
  --token-file FILE      GitHub token allowed to create runner registrations (copied root-only)
  --runners N            runners sharing this instance, each on 1/N of its NeuronCores (default 1)
  --partition SPEC       mixed runner sizes instead: COUNTxSIZE or SIZE@FIRST entries, e.g. 1x8,4x4,40x1
  --partition auto       take the partition from --from-estimate FILE (trncat queue --estimate FILE)
  --from-estimate FILE   the estimate; --fleet-index K picks its instance K's partition (default 0)
  --instance TYPE        trn2.3xlarge, trn2.48xlarge, trn2u.48xlarge (default: from instance metadata)
  --runner-group-id ID   runner group of the registrations (default 1: Default)
  --container IMAGE      run each job in IMAGE (built from runners/Dockerfile) with its /dev/neuronN devices
  --neuron-apt           install the Neuron driver, runtime and tools from the Neuron apt repository
                         (not needed on the Neuron DLAMI, which carries them)
  --user NAME            the user jobs run as (default trncat-runner)
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

# write_file PATH MODE OWNER: write stdin to PATH atomically (or print it under --dry-run).
write_file() {
  local path="$1" mode="$2" owner="$3" content
  content="$(cat)"
  if [ "${DRY_RUN}" -eq 1 ]; then
    printf '+ write %s (mode %s, owner %s)\n' "${path}" "${mode}" "${owner}"
    printf '%s\n' "${content}" | sed 's/^/| /'
    return
  fi
  local tmp
  tmp="$(mktemp "${path}.XXXXXX")"
  printf '%s\n' "${content}" >"${tmp}"
  chmod "${mode}" "${tmp}"
  chown "${owner}" "${tmp}"
  mv -f "${tmp}" "${path}"
}

total_cores() {
  case "$1" in
    trn2.3xlarge) echo 4 ;;
    trn2.48xlarge | trn2u.48xlarge) echo 64 ;;
    *) die "unsupported instance type '$1' (trn2.3xlarge, trn2.48xlarge, trn2u.48xlarge)" ;;
  esac
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

# pip constraints (name==version) from runners/toolchain.yaml: keys are record version fields, `_` -> `-`.
toolchain_constraints() {
  sed -nE 's/^([a-z_]+): *"?([^"#[:space:]]+)"?.*/\1==\2/p' "${SCRIPT_DIR}/toolchain.yaml" | tr '_' '-'
}

install_prerequisites() {
  note "prerequisites"
  run apt-get update -q
  run apt-get install -y -q curl jq python3-venv
  if [ "${INSTALL_NEURON_APT}" -eq 1 ]; then
    note "Neuron driver, runtime and tools from ${TRNCAT_NEURON_APT_REPO}"
    local codename
    codename="$(sed -n 's/^VERSION_CODENAME=//p' /etc/os-release)"
    run install -d -m 0755 /etc/apt/keyrings
    run curl -fsSL -o /etc/apt/keyrings/neuron.asc "${TRNCAT_NEURON_APT_REPO}/GPG-PUB-KEY-AMAZON-AWS-NEURON.PUB"
    echo "deb [signed-by=/etc/apt/keyrings/neuron.asc] ${TRNCAT_NEURON_APT_REPO} ${codename} main" |
      write_file /etc/apt/sources.list.d/neuron.list 0644 root:root
    run apt-get update -q
    run apt-get install -y -q aws-neuronx-dkms aws-neuronx-runtime-lib aws-neuronx-collectives aws-neuronx-tools
  fi
}

create_user() {
  note "dedicated user ${RUNNER_USER}: no password, no login shell, no sudo"
  if id -u "${RUNNER_USER}" >/dev/null 2>&1; then
    note "user ${RUNNER_USER} exists"
  else
    run useradd --system --create-home --home-dir "${PREFIX}/home" --shell /usr/sbin/nologin "${RUNNER_USER}"
  fi
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
  note "toolchain from runners/toolchain.yaml, Neuron packages from ${TRNCAT_NEURON_PIP}"
  toolchain_constraints | write_file "${PREFIX}/toolchain-constraints.txt" 0644 root:root
  run python3 -m venv "${PREFIX}/toolchain"
  run "${PREFIX}/toolchain/bin/pip" install --quiet --upgrade pip
  run "${PREFIX}/toolchain/bin/pip" install --quiet --extra-index-url "${TRNCAT_NEURON_PIP}" \
    --extra-index-url "${TORCH_CPU_INDEX}" --constraint "${PREFIX}/toolchain-constraints.txt" torch torch-neuronx neuronx-cc transformers
}

check_machine() {
  # trncat doctor: driver, devices, neuron-ls, cores, the pinned toolchain, the NEFF cache, disk and memory.
  # A runner is never registered on a machine that fails it.
  if [ -n "${CONTAINER_IMAGE}" ]; then
    note "container mode: the benchmark workflow's smoke job runs trncat doctor in the image"
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
    echo "# runner ${index}: ${cores} NeuronCore(s) from core ${first} (written by setup-runner.sh)"
    echo "RUNNER_INDEX=${index}"
    echo "RUNNER_LABELS=${labels}"
    echo "RUNNER_GROUP_ID=${RUNNER_GROUP_ID}"
    echo "RUNNER_USER=${RUNNER_USER}"
    echo "TRNCAT_PREFIX=${PREFIX}"
    echo "TRNCAT_CONF=${CONF}"
    echo "GITHUB_API_PATH=${api_path}"
    echo "TRNCAT_INSTANCE_TYPE=${INSTANCE}"
    if [ -n "${CONTAINER_IMAGE}" ]; then
      # Inside the container the passed devices are numbered from 0: re-base the range onto them.
      echo "NEURON_RT_VISIBLE_CORES=$(core_range $((first % CORES_PER_DEVICE)) "${cores}")"
      echo "TRNCAT_CONTAINER_IMAGE=${CONTAINER_IMAGE}"
      echo "TRNCAT_NEURON_DEVICES=${devices}"
    else
      echo "NEURON_RT_VISIBLE_CORES=$(core_range "${first}" "${cores}")"
      echo "TRNCAT_PYTHON=${PREFIX}/toolchain/bin/python"
    fi
  } | write_file "${CONF}/runner-${index}.env" 0644 root:root
}

install_unit() {
  local template="${SCRIPT_DIR}/trncat-runner.service" run_as="${RUNNER_USER}"
  [ -f "${template}" ] || die "missing ${template}"
  # docker needs root; the container itself runs as its unprivileged `runner` user.
  [ -n "${CONTAINER_IMAGE}" ] && run_as="root"
  sed -e "s|@PREFIX@|${PREFIX}|g" -e "s|@CONF@|${CONF}|g" -e "s|@RUN_AS@|${run_as}|g" "${template}" |
    write_file "${UNIT_DIR}/trncat-runner@.service" 0644 root:root
}

cmd_install() {
  [ -n "${SCOPE}" ] || die "pass --repo OWNER/NAME or --org ORG"
  [ -n "${TOKEN_FILE}" ] || die "pass --token-file FILE"
  [ "${DRY_RUN}" -eq 1 ] || [ "$(id -u)" -eq 0 ] || die "install needs root (or --dry-run)"
  [ "${DRY_RUN}" -eq 1 ] || [ -r "${TOKEN_FILE}" ] || die "cannot read ${TOKEN_FILE}"
  [[ "${RUNNERS}" =~ ^[0-9]+$ ]] && [ "${RUNNERS}" -ge 1 ] || die "--runners must be a positive integer"
  if [ -z "${INSTANCE}" ] && [ "${DRY_RUN}" -eq 1 ]; then
    note "would read the instance type from IMDSv2; assuming trn2.48xlarge (pass --instance to choose)"
    INSTANCE="trn2.48xlarge"
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
  install_prerequisites
  create_user
  fetch_runner
  install_toolchain
  check_machine

  note "GitHub credential: root-only, read by the jit phase only"
  run install -d -m 0700 -o root -g root "${CONF}"
  run install -m 0600 -o root -g root "${TOKEN_FILE}" "${CONF}/github-token"
  run install -m 0755 "${SCRIPT_DIR}/setup-runner.sh" "${PREFIX}/bin/setup-runner.sh"

  local index first labels
  for ((index = 0; index < RUNNERS; index++)); do
    first="${FIRSTS[index]}"
    cores="${SIZES[index]}"
    labels="self-hosted,linux,x64,trn2,${INSTANCE},trn2-${cores}c"
    note "runner ${index}: cores $(core_range "${first}" "${cores}"), labels ${labels}"
    write_runner_env "${index}" "${cores}" "${first}" "${labels}" "${api_path}"
  done
  install_unit
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

# Root phase before each job: a fresh runner directory and a JIT registration for exactly one job.
cmd_jit() {
  local index="$1"
  require_env RUNNER_LABELS RUNNER_USER TRNCAT_PREFIX TRNCAT_CONF GITHUB_API_PATH NEURON_RT_VISIBLE_CORES
  local dir="${TRNCAT_PREFIX}/runner-${index}" cached="${TRNCAT_PREFIX}/cache/${RUNNER_TARBALL}"
  local name
  name="$(hostname -s)-${RUNNER_LABELS##*,}-${index}-$(date +%s)"
  note "fresh runner ${name}: nothing survives from the previous job"
  run rm -rf "${dir}"
  run install -d -m 0750 -o "${RUNNER_USER}" -g "${RUNNER_USER}" "${dir}"
  if [ "${DRY_RUN}" -eq 1 ]; then
    printf '+ sha256sum -c <<< %q\n' "${RUNNER_SHA256}  ${cached}"
  elif ! echo "${RUNNER_SHA256}  ${cached}" | sha256sum -c --quiet -; then
    die "${cached} does not match the pinned checksum: run setup-runner.sh install again"
  fi
  run tar -xzf "${cached}" -C "${dir}"
  # The runner reads .env into every job's environment.
  {
    echo "NEURON_RT_VISIBLE_CORES=${NEURON_RT_VISIBLE_CORES}"
    echo "TRNCAT_INSTANCE_TYPE=${TRNCAT_INSTANCE_TYPE:-}"
    [ -z "${TRNCAT_PYTHON:-}" ] || echo "TRNCAT_PYTHON=${TRNCAT_PYTHON}"
    echo "TORCH_NEURONX_NEFF_CACHE_DIR=${TRNCAT_PREFIX}/home/neff-cache"
  } | write_file "${dir}/.env" 0644 "${RUNNER_USER}:${RUNNER_USER}"

  local body
  body="$(jq -nc --arg name "${name}" --arg labels "${RUNNER_LABELS}" --argjson group "${RUNNER_GROUP_ID:-1}" \
    '{name: $name, runner_group_id: $group, labels: ($labels | split(",")), work_folder: "_work"}')"
  note "JIT registration (ephemeral by construction: one job, then GitHub removes it)"
  # The token goes in a header read from a file descriptor, never in argv (visible to `ps`).
  if [ "${DRY_RUN}" -eq 1 ]; then
    run curl -fsS -X POST -H "@<authorization header from ${TRNCAT_CONF}/github-token>" \
      -H "Accept: application/vnd.github+json" -H "X-GitHub-Api-Version: 2022-11-28" \
      --data "${body}" "${GITHUB_API}/${GITHUB_API_PATH}/actions/runners/generate-jitconfig"
    write_file "${dir}/.jitconfig" 0600 "${RUNNER_USER}:${RUNNER_USER}" <<<"<encoded_jit_config>"
    return
  fi
  local answer
  answer="$(curl -fsS -X POST \
    -H @<(printf 'Authorization: Bearer %s\n' "$(cat "${TRNCAT_CONF}/github-token")") \
    -H "Accept: application/vnd.github+json" -H "X-GitHub-Api-Version: 2022-11-28" \
    --data "${body}" "${GITHUB_API}/${GITHUB_API_PATH}/actions/runners/generate-jitconfig")"
  jq -er '.encoded_jit_config' <<<"${answer}" | write_file "${dir}/.jitconfig" 0600 "${RUNNER_USER}:${RUNNER_USER}"
  run chown -R "${RUNNER_USER}:${RUNNER_USER}" "${dir}"
}

# One job: the runner exits when it is done and systemd starts the next jit phase.
cmd_run() {
  local index="$1"
  require_env TRNCAT_PREFIX
  local dir="${TRNCAT_PREFIX}/runner-${index}" jit="<encoded_jit_config>"
  if [ "${DRY_RUN}" -eq 0 ]; then
    jit="$(cat "${dir}/.jitconfig")"
    rm -f "${dir}/.jitconfig"
  fi
  if [ -n "${TRNCAT_CONTAINER_IMAGE:-}" ]; then
    local args=(docker run --rm --name "trncat-runner-${index}" --security-opt no-new-privileges
      --env "NEURON_RT_VISIBLE_CORES=${NEURON_RT_VISIBLE_CORES:-}" --env "TRNCAT_INSTANCE_TYPE=${TRNCAT_INSTANCE_TYPE:-}")
    local device
    IFS=',' read -ra devices <<<"${TRNCAT_NEURON_DEVICES:?}"
    for device in "${devices[@]}"; do args+=(--device "${device}"); done
    args+=("${TRNCAT_CONTAINER_IMAGE}" --jitconfig "${jit}")
    if [ "${DRY_RUN}" -eq 1 ]; then run "${args[@]}"; else exec "${args[@]}"; fi
  else
    if [ "${DRY_RUN}" -eq 1 ]; then
      run "${dir}/run.sh" --jitconfig "${jit}"
    else
      cd "${dir}"
      exec ./run.sh --jitconfig "${jit}"
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
      --runner-group-id)
        [[ "${2:-}" =~ ^[0-9]+$ ]] || die "--runner-group-id wants a number"
        RUNNER_GROUP_ID="$2"
        shift
        ;;
      --container) CONTAINER_IMAGE="${2:?--container IMAGE}" && shift ;;
      --neuron-apt) INSTALL_NEURON_APT=1 ;;
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

main "$@"
