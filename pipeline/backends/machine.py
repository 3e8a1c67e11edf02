"""Which machine a run is on (issue 47.4): the identity a second-machine warm check compares, since runner names
are per job (``runners/setup-runner.sh`` names a JIT runner ``<host>-<label>-<index>-<epoch>``: two jobs on one
host, on the same chips, carry two names).

The identity is the EC2 instance id where there is one, else the host name (``host:<name>``). The instance id is
read from the DMI board asset tag, which a Nitro instance sets to its id (a local file: no network; a trn1.32xlarge
shows ``i-...`` there, gist verdimrc/1ba1387ebe5702dadd027f144e128dff, "Probe ec2 instances without instance
metadata"); only on an EC2 machine that does not show it there is the instance metadata service asked (IMDSv2, a
short timeout: the runners' jobs may have no metadata service, and then the host name stands).
"""

from __future__ import annotations

import functools
import re
import socket
import urllib.request
from pathlib import Path

from pipeline import constants

_DMI = Path("/sys/devices/virtual/dmi/id")
_INSTANCE_ID = re.compile(r"i-[0-9a-f]{8,17}")
_IMDS = "http://169.254.169.254/latest"
IMDS_TIMEOUT_S = 0.5


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="ascii", errors="replace").strip()[:64]
    except OSError:
        return ""


def _imds_instance_id(timeout_s: float) -> str | None:
    try:
        put = urllib.request.Request(f"{_IMDS}/api/token", method="PUT",
                                     headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"})  # fmt: skip
        with urllib.request.urlopen(put, timeout=timeout_s) as answer:  # noqa: S310 (a fixed link-local URL)
            token = answer.read(256).decode("ascii", "replace")
        get = urllib.request.Request(f"{_IMDS}/meta-data/instance-id", headers={"X-aws-ec2-metadata-token": token})
        with urllib.request.urlopen(get, timeout=timeout_s) as answer:  # noqa: S310
            found = answer.read(64).decode("ascii", "replace").strip()
    except (OSError, ValueError):
        return None
    return found if _INSTANCE_ID.fullmatch(found) else None


def _host(name: str) -> str:
    return "host:" + (re.sub(r"[^A-Za-z0-9._-]", "_", name)[:100] or "unknown")


def machine_identity(*, dmi: Path = _DMI, timeout_s: float = IMDS_TIMEOUT_S) -> str:
    """This machine's identity: its EC2 instance id (``i-...``), else ``host:<host name>``
    (:data:`pipeline.constants.TRNCAT_MACHINE` names an emulated machine: ``host:<that name>``)."""
    if constants.TRNCAT_MACHINE:
        return _host(constants.TRNCAT_MACHINE)
    tag = _read(dmi / "board_asset_tag")
    if _INSTANCE_ID.fullmatch(tag):
        return tag
    if _read(dmi / "sys_vendor") == "Amazon EC2" and (found := _imds_instance_id(timeout_s)):
        return found
    return _host(socket.gethostname())


@functools.cache
def this_machine() -> str:
    """:func:`machine_identity` of this machine, looked up once, when first asked (never at import)."""
    return machine_identity()
