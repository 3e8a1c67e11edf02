"""What the planner refuses to build, and the time and memory one build may take.

A config.json is untrusted text, and the planner builds its architecture on the meta device: about a millisecond
and 35 KB of host memory per decoder layer (measured here, transformers 5 on CPU), so a config that asks for
millions of layers would run a discovery out of time or memory before anything is queued. Two guards:

- :func:`config_problem`, before anything is built: the config's size and every layer, expert and head count
  in it (nested configs included) against bounds far above any real model's;
- :func:`limited`, around the build itself: a child process (forked, so nothing is imported twice) under
  :data:`PLAN_TIME_LIMIT_S` and :data:`PLAN_MEMORY_BYTES`, killed past either. Where ``fork`` does not exist the
  build runs in-process, under the bounds alone.

Either raises :class:`pipeline.errors.PlanLimitError`: the queue skips that model and goes on.
"""

from __future__ import annotations

import importlib
import json
import multiprocessing
import os
import resource
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from pipeline.errors import PlanError, PlanLimitError

T = TypeVar("T")
GiB = 1024**3

#: The largest config.json accepted, as canonical JSON: real ones are a few KB (the largest of the planner's
#: fixtures, Llama 4 Scout's, is 2.1 KB); a megabyte leaves room for long per-layer lists.
MAX_CONFIG_BYTES = 1 << 20
#: Decoder (or any) layers in one config: Qwen3-235B-A22B has 94 and Llama 3.1 405B 126; ten times that.
MAX_LAYERS = 1024
#: Routed experts per MoE layer: Qwen3-Next-80B-A3B has 512, DeepSeek-V3 256; eight times the largest.
MAX_EXPERTS = 4096
#: Attention heads (query or key/value): DeepSeek-V3 has 128; eight times that.
MAX_HEADS = 1024
#: Layers times experts, what a build of an MoE costs: Qwen3-Next-80B-A3B has 48 x 512 = 24,576; about five times.
MAX_EXPERT_LAYERS = 131_072
#: One build's wall-clock limit. The largest real configs build in under 0.3 s once transformers is imported
#: (DeepSeek-V3 0.18 s, Llama 4 Scout 0.24 s here); a build at the bounds above takes seconds.
PLAN_TIME_LIMIT_S = 60.0
#: Host memory one build may add to what the process holds: the largest real configs add tens of MB, a build
#: at the bounds above about a GB.
PLAN_MEMORY_BYTES = 4 * GiB

_FAMILIES = (("layer", MAX_LAYERS), ("expert", MAX_EXPERTS), ("heads", MAX_HEADS), ("n_head", MAX_HEADS))


def _counts(config: Mapping[str, Any], path: str = "") -> Iterator[tuple[str, int, int]]:
    """(dotted key, value, bound) of every integer count a bound applies to, nested configs included."""
    for key, value in config.items():
        if isinstance(value, Mapping):
            yield from _counts(value, f"{path}{key}.")
        elif isinstance(value, int) and not isinstance(value, bool):
            for word, bound in _FAMILIES:
                if word in str(key).lower() and "per_tok" not in str(key):
                    yield f"{path}{key}", value, bound
                    break


def config_problem(config: Mapping[str, Any]) -> str | None:
    """Why ``config`` is too large to build (its size, or a layer, expert or head count past its bound), or None."""
    size = len(json.dumps(config, separators=(",", ":"), default=str))
    if size > MAX_CONFIG_BYTES:
        return f"config is {size} bytes of JSON, more than the {MAX_CONFIG_BYTES} a config.json may have"
    layers = experts = 1
    for key, value, bound in _counts(config):
        if value > bound:  # the key is the config's text: quoted with its control characters escaped
            return f"{ascii(key)[1:-1][:120]} is {value}, more than the planner's bound of {bound}"
        if "layer" in key.rsplit(".", 1)[-1] and value > layers:
            layers = value
        if "expert" in key.rsplit(".", 1)[-1] and value > experts:
            experts = value
    if layers * experts > MAX_EXPERT_LAYERS:
        return f"{layers} layers of {experts} experts, more than the planner's bound of {MAX_EXPERT_LAYERS}"
    return None


def check_config(config: Mapping[str, Any]) -> None:
    """Raise :class:`PlanLimitError` when :func:`config_problem` finds one."""
    if (problem := config_problem(config)) is not None:
        raise PlanLimitError(f"refusing to build this config: {problem}")


def _address_space() -> int | None:
    """The process's virtual memory size in bytes (/proc/self/statm), or None where it cannot be read."""
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _child(send: Any, fn: Callable[..., Any], args: tuple[Any, ...], memory: int, imports: tuple[str, ...]) -> None:
    for module in imports:  # before the limit, as if the parent had imported them before the fork
        importlib.import_module(module)
    current = _address_space()
    if current is not None:  # the limit is on address space: what the child holds already, plus the build's share
        resource.setrlimit(resource.RLIMIT_AS, (current + memory, resource.RLIM_INFINITY))
    try:
        send.send(("ok", fn(*args)))
    except MemoryError:
        send.send(("memory", None))
    except Exception as exc:  # noqa: BLE001 - handed to the parent, which decides
        send.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        send.close()


def limited(fn: Callable[..., T], *args: Any, what: str, imports: tuple[str, ...] = ()) -> T:
    """``fn(*args)`` in a forked child under :data:`PLAN_TIME_LIMIT_S` and :data:`PLAN_MEMORY_BYTES`.

    Args:
        fn: The build (its result must pickle).
        args: Its arguments (never pickled: the child is a fork).
        what: What is built, for the messages.
        imports: Modules the child imports before its memory limit is set (what the parent did not import, so
            that it stays small: their mapped libraries are not the build's share). The time limit covers them.

    Returns:
        What ``fn`` returned.

    Raises:
        PlanLimitError: the child ran past the time limit, the memory limit, or died.
        PlanError: ``fn`` raised (its type and message).
    """
    if "fork" not in multiprocessing.get_all_start_methods():
        for module in imports:
            importlib.import_module(module)
        return fn(*args)
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(send, fn, args, PLAN_MEMORY_BYTES, imports), daemon=True)
    child.start()
    send.close()
    try:
        if not receive.poll(PLAN_TIME_LIMIT_S):
            raise PlanLimitError(f"building {what} took longer than {PLAN_TIME_LIMIT_S:g} s: stopped")
        try:
            status, value = receive.recv()
        except EOFError:
            raise PlanLimitError(f"building {what} ended without an answer (exit code {child.exitcode})") from None
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        receive.close()
    if status == "memory":
        raise PlanLimitError(f"building {what} needed more than {PLAN_MEMORY_BYTES} bytes of host memory: stopped")
    if status == "error":
        raise PlanError(str(value))
    return value  # type: ignore[no-any-return]
