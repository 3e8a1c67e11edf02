"""Headless Chromium as the tests and benchmarks start it: Debian's binary, no network chatter."""

from __future__ import annotations

from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
#: Without the background-networking flags Chromium keeps trying hosts this machine cannot reach.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
