"""The OpenAI-compatible engine a serving run drives: its exact command, its launch in a process group of its
own, readiness, the log tail and a stop that leaves no server process behind.

Three engines, one contract (an HTTP server on loopback with ``/health`` and ``/v1/completions``):

- ``transformers-serve``: transformers' own server (``transformers serve``, continuous batching), on the CPU;
- ``vllm`` on cuda (the GPU twin) and ``vllm-neuron`` (vLLM with the vllm-neuron plugin) on Trainium2: both
  ``vllm serve`` with the options the docs give (docs/neuron-facts.md, "vLLM Neuron"); neither installs here, so
  their commands are built and recorded, and settled on first hardware.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from pipeline.backends import group_members, owned_group
from pipeline.errors import BenchError

ENGINES = ("transformers-serve", "vllm", "vllm-neuron")
#: How much of the engine's log an error record keeps.
LOG_TAIL_CHARS = 2000
#: The environment no engine run may miss: nothing reaches the Hub, nothing phones home.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "TRANSFORMERS_OFFLINE": "1"}


@dataclass(frozen=True)
class EngineSpec:
    """One engine launch: the command, its environment additions and the options a record keeps."""

    engine: str
    argv: tuple[str, ...]
    port: int
    model_name: str
    env: dict[str, str] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def shell(self) -> str:
        """The command as one shell line (environment first), as serve.sh ships it."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        return " ".join(filter(None, [env, shlex.join(self.argv)]))


def _console_script(name: str) -> str:
    beside = Path(sys.executable).with_name(name)
    return str(beside) if beside.is_file() else (shutil.which(name) or name)


#: Tokens per KV cache block of ``transformers serve``'s continuous batching (given, so the block count is exact).
CB_BLOCK_TOKENS = 32


#: Why an image-text-to-text model is served without continuous batching: transformers 5.24's server batches an LLM
#: only (``cli/serving/utils.py``, ``use_continuous_batching``: ``modality == Modality.LLM``; for a VLM it logs
#: "does not support continuous batching. Falling back to sequential generation").
NO_CB_FOR_IMAGES = "transformers serve batches text-only models only: an image model runs sequential generate()"


def transformers_serve(
    model: Path | str,
    *,
    port: int,
    device: str = "cpu",
    dtype: str = "auto",
    kv_tokens: int | None = None,
    continuous_batching: bool = True,
) -> EngineSpec:
    """``transformers serve MODEL --continuous-batching`` on ``device``, bound to loopback.

    ``continuous_batching=False`` (an image-text-to-text model: :data:`NO_CB_FOR_IMAGES`) leaves the flag and the
    cache sizing out, and the record's options say so.

    ``kv_tokens``: the KV cache the run needs (its streams x their longest sequence), given as a block count.
    Left to itself, continuous batching sizes its cache at 60 to 90 % of the device's free memory, which on the
    CPU is the host's: a tiny model's engine took 7 to 14.6 GB of a shared 23 GB machine and the kernel's OOM
    killer ended it mid-sweep (docs/methodology.md, "Serving rows").
    """
    cache: tuple[str, ...] = ()
    if kv_tokens is not None and continuous_batching:
        blocks = max(1, -(-kv_tokens // CB_BLOCK_TOKENS))
        cache = ("--cb-block-size", str(CB_BLOCK_TOKENS), "--cb-num-blocks", str(blocks))
    argv = (
        _console_script("transformers"),
        "serve",
        str(model),
        *(("--continuous-batching",) if continuous_batching else ()),
        "--device",
        device,
        "--dtype",
        dtype,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "info",
        *cache,
    )
    options: dict[str, Any] = {"continuous_batching": continuous_batching, "device": device, "dtype": dtype}
    options["trust_remote_code"] = False
    if not continuous_batching:
        options["continuous_batching_off"] = NO_CB_FOR_IMAGES
    if cache:
        options |= {"cb_block_size": CB_BLOCK_TOKENS, "cb_num_blocks": int(cache[-1])}
    return EngineSpec("transformers-serve", argv, port, str(model), dict(OFFLINE_ENV), options)


def vllm_serve(
    model: Path | str,
    *,
    port: int,
    neuron: bool,
    tensor_parallel: int = 1,
    data_parallel: int = 1,
    max_num_seqs: int = 256,
    max_model_len: int = 2048 + 1024,
    dtype: str = "bfloat16",
    lnc: int | None = None,
    cache_root: Path | None = None,
    images_per_prompt: int = 0,
) -> EngineSpec:
    """``vllm serve`` with the options of docs/neuron-facts.md ("vLLM Neuron"): on Trainium2 the plugin picks the
    device itself; its compile cache lives under ``$VLLM_CACHE_ROOT/neuron/compile_cache/``.

    ``images_per_prompt`` (an image workload's images per request) is vLLM's ``--limit-mm-per-prompt``: the most
    images a prompt may hold, which vLLM sizes its multimodal profiling and encoder cache by."""
    argv = [
        _console_script("vllm"),
        "serve",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--tensor-parallel-size",
        str(tensor_parallel),
        "--max-num-seqs",
        str(max_num_seqs),
        "--max-model-len",
        str(max_model_len),
        "--dtype",
        dtype,
    ]
    if data_parallel > 1:
        argv += ["--data-parallel-size", str(data_parallel)]
    if images_per_prompt:
        argv += ["--limit-mm-per-prompt", json.dumps({"image": images_per_prompt})]
    env = dict(OFFLINE_ENV)
    if neuron and lnc is not None:
        env["NEURON_LOGICAL_NC_CONFIG"] = str(lnc)
    if cache_root is not None:
        env["VLLM_CACHE_ROOT"] = str(cache_root)
    options = {
        "max_num_seqs": max_num_seqs,
        "max_model_len": max_model_len,
        "tensor_parallel": tensor_parallel,
        "data_parallel": data_parallel,
        "lnc": lnc,
        "dtype": dtype,
        "trust_remote_code": False,
    }
    if images_per_prompt:
        options["limit_mm_per_prompt_image"] = images_per_prompt
    return EngineSpec("vllm-neuron" if neuron else "vllm", tuple(argv), port, str(model), env, options)


def port_in_use(port: int) -> bool:
    """True when something already listens on loopback ``port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class EngineStartError(BenchError):
    """The engine never became ready: ``code`` says why (port_in_use, oom, model_refused, exited, not_ready)."""

    def __init__(self, code: str, message: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.log_tail = log_tail


#: What an engine's log says when it could not start, in order: the first match names the reason.
_START_FAILURES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("port_in_use", re.compile(r"address already in use|\[Errno 98\]", re.I)),
    ("oom", re.compile(r"out of memory|OutOfMemoryError|Cannot allocate memory|MemoryError", re.I)),
    (
        "model_refused",
        re.compile(
            r"not supported|unrecognized configuration|does not recognize this architecture|"
            r"no such file|is not a valid model|OSError: .*(config\.json|model)|trust_remote_code",
            re.I,
        ),
    ),
)


def start_failure_code(log: str, returncode: int | None) -> str:
    """Why an engine stopped before it was ready, from its log (and a SIGKILL, the kernel's OOM killer)."""
    for code, pattern in _START_FAILURES:
        if pattern.search(log):
            return code
    if returncode == -signal.SIGKILL:
        return "oom"
    return "exited" if returncode is not None else "not_ready"


class Engine:
    """A running engine: ``with Engine(spec, log) as engine: engine.wait_ready(...)``; leaving the block stops
    the whole process group (the engine's workers too)."""

    def __init__(self, spec: EngineSpec, log_path: Path) -> None:
        self.spec = spec
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None
        self.ready_s: float | None = None
        self._owned = contextlib.ExitStack()

    def __enter__(self) -> Engine:
        """Start the engine in a process group of its own, registered for ``trncat reap``
        (:func:`pipeline.backends.owned_group`).

        Raises:
            EngineStartError: the port is taken already.
            Stopped: a stop was asked for before the engine started.
        """
        if port_in_use(self.spec.port):
            raise EngineStartError("port_in_use", f"port {self.spec.port} is in use on loopback before the start")
        env = {**os.environ, **self.spec.env}
        self.process = self._owned.enter_context(owned_group(self.spec.argv, log=self.log_path, env=env))
        self._started = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def holds_port(self) -> bool:
        """Whether a process of the engine's group listens on its port (and not some other server)."""
        for pid in group_members(self.process.pid) if self.process is not None else []:
            try:
                sockets = psutil.Process(pid).net_connections(kind="tcp")
            except psutil.Error:
                continue
            if any(s.status == psutil.CONN_LISTEN and s.laddr and s.laddr.port == self.spec.port for s in sockets):
                return True
        return False

    def log_tail(self, chars: int = LOG_TAIL_CHARS) -> str:
        try:
            text = self.log_path.read_bytes()[-chars * 2 :].decode("utf-8", errors="replace")
        except OSError:
            return ""
        return text[-chars:]

    def wait_ready(
        self, *, timeout_s: float, poll_s: float = 0.5, clock: Callable[[], float] = time.monotonic
    ) -> float:
        """Seconds from the start until ``/health`` answers 200.

        Raises:
            EngineStartError: it exited first (why, from its log) or never answered in ``timeout_s``.
        """
        deadline = clock() + timeout_s
        while True:
            if not self.alive():
                assert self.process is not None
                tail = self.log_tail()
                code = start_failure_code(tail, self.process.returncode)
                last = next((line.strip() for line in reversed(tail.splitlines()) if line.strip()), "")
                message = f"{self.spec.engine} exited with {self.process.returncode} before it was ready: {last}"
                raise EngineStartError(code, message[:1000], tail)
            if _healthy(self.spec.base_url):
                if not self.holds_port():  # another server took the port after the check, and answers on it
                    message = (f"port {self.spec.port} answers on loopback, but no process of the engine's group "
                               "listens on it: another server took it after the check")  # fmt: skip
                    raise EngineStartError("port_in_use", message, self.log_tail())
                self.ready_s = time.monotonic() - self._started
                return self.ready_s
            if clock() > deadline:
                tail = self.log_tail()
                code = start_failure_code(tail, None)
                raise EngineStartError(code, f"{self.spec.engine} was not ready after {timeout_s:g} s", tail)
            time.sleep(poll_s)

    def stop(self) -> None:
        """Stop the engine's whole process group: SIGTERM, then SIGKILL to whatever is left after 10 s (the workers
        that outlived their parent too), until no live process of the group remains; then deregister it."""
        self._owned.close()


def _healthy(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/health", timeout=2) as answer:  # noqa: S310 - loopback only
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False
