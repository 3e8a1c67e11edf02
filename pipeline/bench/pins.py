"""``trncat doctor``'s pin checks beyond the Python packages: the Neuron Debian packages against the toolchain file's
``apt:`` section, and one line naming every installed package that differs from its pin.

A runner whose installed toolchain is not the pinned one records rows the queue does not count as measured at the
pins (it re-runs them), or worse, rows of another release under this one's name: the Neuron runtime, collectives,
tools and driver arrive as Debian packages (docs/neuron-facts.md, "runtime package"), pinned ``NAME=VERSION*``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Literal, Protocol

__all__ = ["Line", "apt_checks", "pin_summary"]

#: One doctor line as these checks give it: (name, status, detail, fix); doctor makes its ``Check`` of it.
Line = tuple[str, Literal["ok", "warn", "fail"], str, str | None]


class _Checked(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def detail(self) -> str: ...


def apt_matches(installed: str, pin: str) -> bool:
    """Whether an installed upstream version is what apt's ``NAME=PIN`` selects (a trailing ``*`` is a prefix)."""
    return installed.startswith(pin[:-1]) if pin.endswith("*") else installed == pin


def apt_checks(apt: Mapping[str, str], dpkg: Callable[[str], str | None]) -> list[Line]:
    """One check per pinned Debian package: installed at its pin, another version, or missing."""
    out: list[Line] = []
    for package, pin in apt.items():
        have = dpkg(package)
        fix = f"apt-get install {package}={pin} (runners/setup-runner.sh --neuron-apt installs every pin)"
        if have is None:
            out.append((package, "fail", f"not installed; runners/toolchain.yaml pins {pin}", fix))
        elif not apt_matches(have, pin):
            out.append((package, "fail", f"{have}, but runners/toolchain.yaml pins {pin}", fix))
        else:
            out.append((package, "ok", have, None))
    return out


def pin_summary(checks: Iterable[_Checked], pinned: Iterable[str]) -> Line:
    """The ``toolchain`` line: ok, or every pinned package whose installed version differs from its pin, by name."""
    names = set(pinned)
    differ = [c for c in checks if c.name in names and c.status == "fail"]
    if not differ:
        return ("toolchain", "ok", "every pinned package is installed at runners/toolchain.yaml's version", None)
    listed = "; ".join(f"{c.name} {c.detail.split(', but', 1)[0].split(';', 1)[0]}" for c in differ)
    return (
        "toolchain",
        "fail",
        f"the installed toolchain differs from the pin in {len(differ)} package(s): {listed}",
        "install the pinned versions (runners/setup-runner.sh), or its rows are not the pinned toolchain's",
    )
