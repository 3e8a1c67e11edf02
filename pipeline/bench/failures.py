"""Ordered rules that turn an exception, an exit signal or a log into ``{status, stage, code}``.

The harness calls :func:`classify` once per failed attempt with whatever it knows: the exception's type
name, its message (or the child's captured log), the signal or exit code of a child process, whether the
harness's own timeout fired, and the stage it was in. Rules are tried in order and the **first match
wins**, so the order is part of the contract:

1. ``timeout`` -- the harness's timeout fired; whatever the child printed while being killed is noise.
2. ``remote_code`` -- our own ``RemoteCodeRefused``: the model needs ``trust_remote_code``.
3. Infrastructure, status ``error`` (retried, never published as an incompatibility): disk full (first: a
   download that fills the disk surfaces as a Hub error), a port another server holds (a serving engine's),
   Neuron device not found, NeuronCores busy, Neuron
   runtime init failure, network/download error. They come before the model rules because their symptoms
   surface inside load or compile errors (a tokenizer that "cannot be loaded" because the Hub was unreachable
   is not a missing tokenizer).
4. ``compiler_oom`` -- ``NCC_EOOM*`` and the other neuronx-cc codes AWS documents as "exceeds the
   high-bandwidth memory limit" (``NCC_EVRF009``, ``NCC_EXSP001``); before the generic ``NCC_`` rule.
5. ``compiler_host_oom`` -- neuronx-cc killed for lack of *host* memory (``[F137]``, ``failed with -9``).
6. ``device_oom`` -- Neuron runtime / CUDA allocation failures; before anything matching a generic
   ``RuntimeError`` so that a CUDA OOM wrapped in a RuntimeError stays an OOM.
   ``host_oom_allocator`` -- torch's ``DefaultCPUAllocator`` out of host memory (a ``RuntimeError``, often
   while compiling), for the same reason.
7. ``unsupported_op`` -- operator without a Neuron lowering (``NCC_EUOC*``, ``NCC_EVRF001``, "Could not
   run 'aten::...' with arguments from the ... backend"); before the generic ``NCC_`` rule and before
   ``BackendCompilerFailed``, which usually wraps it.
8. ``ncc_error`` -- any other ``NCC_XXXX000`` code (code = the NCC code lowercased), then
   ``compiler_error`` for older neuronx-cc logs without an ``NCC_`` prefix.
9. ``backend_compiler_failed`` -- torch.compile / dynamo failures whose cause no earlier rule knew.
10. ``host_oom`` -- ``MemoryError``, or SIGKILL together with a memory-limit hint; then ``killed`` (status
    ``error``): a signal only another process sends (SIGKILL without the hint, SIGTERM, SIGINT, SIGHUP,
    SIGQUIT), so the run was stopped from outside, not failed.
11. Load failures: unknown architecture, corrupt weights, missing weights, missing tokenizer/processor, a
    config the library's own code refuses (``bad_config``), a single-core library asked for several cores
    (``one_core_task``: sentence-transformers and diffusers have no tensor parallelism here).
12. ``signal`` -- the child died from a signal of its own fault (``signal_sigsegv`` ...).
13. ``exception`` -- any other exception, when the harness knows the stage (``exception_<type>``).
14. ``exit_code`` -- a non-zero exit without an exception (``exit_<code>``).
15. Nothing matched: ``crash`` / ``unknown``.

Every rule has a fixture with real error text under ``tests/fixtures/errors/`` and is documented with its
source in ``docs/failures.md``.
"""

from __future__ import annotations

import re
import signal as signal_module
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pipeline.types import STAGES, STATUSES

#: The failure code of a run stopped by a signal to ``trncat bench`` or ``trncat serve`` (status ``error``:
#: retried, never published): set by the caller, which knows it asked for the stop, before any rule is tried.
INTERRUPTED = "interrupted"

#: Phrase the harness puts in the message when its own memory watchdog kills a child, so that a SIGKILL
#: with this hint is classified as host OOM rather than a crash.
HOST_OOM_HINT = "host memory limit exceeded"

_I = re.IGNORECASE


@dataclass(frozen=True)
class Classification:
    """The verdict for one failed attempt.

    Attributes:
        status: ``fail`` (the model does not run) or ``error`` (infrastructure; retry).
        stage: One of :data:`pipeline.types.STAGES`.
        code: Short snake_case reason, e.g. ``compiler_oom``.
        rule: Name of the rule that matched (for logs and docs).
    """

    status: Literal["fail", "error"]
    stage: str
    code: str
    rule: str


@dataclass(frozen=True)
class MatchContext:
    """What the harness knows about one failure, normalised for the rules."""

    exc_type: str | None
    message: str
    signal: int | None
    exit_code: int | None
    timed_out: bool
    stage_hint: str | None

    @property
    def exc_name(self) -> str | None:
        """Last dotted component of the exception type (``torch.OutOfMemoryError`` -> ``OutOfMemoryError``)."""
        return self.exc_type.rsplit(".", 1)[-1] if self.exc_type else None

    @property
    def text(self) -> str:
        """Type and message together, as a traceback's last line shows them."""
        return f"{self.exc_type}: {self.message}" if self.exc_type else self.message


CodeFn = Callable[[MatchContext, "re.Match[str] | None"], str]


@dataclass(frozen=True)
class Rule:
    """One row of the table. A rule matches when its evidence is present and all its guards hold.

    Evidence: ``exc_types`` (exception type names, last dotted component) or ``pattern`` (searched in
    ``"<type>: <message>"``); a rule with neither has no evidence requirement. Guards: ``signals``,
    ``timed_out``, ``nonzero_exit``, ``needs_exception``, ``needs_stage_hint``, ``stage_hints``.
    """

    name: str
    status: Literal["fail", "error"]
    stage: str
    code: str | CodeFn
    exc_types: frozenset[str] = frozenset()
    pattern: re.Pattern[str] | None = None
    signals: frozenset[int] = frozenset()
    timed_out: bool = False
    nonzero_exit: bool = False
    needs_exception: bool = False
    needs_stage_hint: bool = False
    stage_hints: frozenset[str] = frozenset()
    #: Infrastructure errors happen in whatever stage the harness was in; take the hint when given.
    stage_from_hint: bool = False

    def __post_init__(self) -> None:
        if self.status not in STATUSES or self.status == "pass":
            raise ValueError(f"rule {self.name}: bad status {self.status!r}")
        if self.stage not in STAGES:
            raise ValueError(f"rule {self.name}: bad stage {self.stage!r}")

    def match(self, ctx: MatchContext) -> tuple[bool, re.Match[str] | None]:
        """Whether this rule matches ``ctx``, with the regex match when the pattern produced it."""
        if (
            (self.timed_out and not ctx.timed_out)
            or (self.signals and ctx.signal not in self.signals)
            or (self.nonzero_exit and (ctx.exit_code is None or ctx.exit_code == 0 or ctx.exc_type))
            or (self.needs_exception and not ctx.exc_type)
            or (self.needs_stage_hint and not ctx.stage_hint)
            or (self.stage_hints and ctx.stage_hint not in self.stage_hints)
        ):
            return False, None
        if (not self.exc_types and self.pattern is None) or ctx.exc_name in self.exc_types:
            return True, None
        found = self.pattern.search(ctx.text) if self.pattern is not None else None
        return found is not None, found

    def result(self, ctx: MatchContext, found: re.Match[str] | None) -> Classification:
        """The classification this rule gives ``ctx``."""
        code = self.code(ctx, found) if callable(self.code) else self.code
        stage = self.stage
        if self.stage_from_hint and ctx.stage_hint in STAGES:
            stage = ctx.stage_hint
        return Classification(status=self.status, stage=stage, code=code, rule=self.name)


def _snake(name: str) -> str:
    """``BackendCompilerFailed`` -> ``backend_compiler_failed``; ``OSError`` -> ``os_error``."""
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return re.sub(r"[^0-9a-zA-Z]+", "_", name).strip("_").lower() or "unknown"


def _signal_code(ctx: MatchContext, _found: re.Match[str] | None) -> str:
    try:
        return f"signal_{signal_module.Signals(ctx.signal or 0).name.lower()}"
    except ValueError:
        return f"signal_{ctx.signal}"


def _any(*patterns: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns), _I)


_SIGKILL = int(signal_module.SIGKILL)
_CRASH_SIGNALS = frozenset(int(s) for s in signal_module.Signals)
#: Signals a process gets from outside, never from its own fault.
_OUTSIDE_SIGNALS = frozenset(
    int(s) for s in (signal_module.SIGKILL, signal_module.SIGTERM, signal_module.SIGINT, signal_module.SIGHUP,
                     signal_module.SIGQUIT)
)  # fmt: skip
_NCC = re.compile(r"\bNCC_([A-Z]{3,5}\d{3})\b")

# The table, in the order of the module docstring. Kept unformatted: one rule reads as one block.
# fmt: off
RULES: tuple[Rule, ...] = (
    Rule("timeout", "fail", "timeout", "timeout", timed_out=True),
    Rule("remote_code", "fail", "load", "remote_code", exc_types=frozenset({"RemoteCodeRefused"}),
         pattern=_any(r"\bRemoteCodeRefused\b", r"contains custom code which must be executed",
                      r"never runs remote code")),
    # --- infrastructure (status error, retried) ---
    # A full disk first: a download that fills it surfaces as a Hub error, which the network rule would take.
    Rule("disk_full", "error", "load", "disk_full", stage_from_hint=True,
         pattern=_any(r"No space left on device", r"\[Errno 28\]", r"\bENOSPC\b", r"Disk quota exceeded")),
    # A port another server holds (a serving engine's bind, or trncat's own check of who answers on it).
    Rule("port_in_use", "error", "load", "port_in_use", stage_from_hint=True,
         pattern=_any(r"address already in use", r"\[Errno 98\]", r"\bEADDRINUSE\b",
                      r"\bport \d+ (?:is in use|answers) on loopback")),
    Rule("device_not_found", "error", "load", "device_not_found", stage_from_hint=True,
         pattern=_any(r"no neuron devices? (?:found|available)", r"instance has no neuron devices",
                      r"failed to discover neuron devices", r"Could not open the (?:nd\d+|device index)",
                      r"/dev/neuron\d*\W+(?:no such file|not found|does not exist)")),
    Rule("device_busy", "error", "load", "device_busy", stage_from_hint=True,
         pattern=_any(r"(?:Logical )?Neuron ?Core\(s\) not available", r"cores busy",
                      r"is in use by another process", r"Neuron ?cores are (?:already )?in use",
                      r"NERR_RESOURCE_NC")),
    Rule("nrt_init", "error", "load", "nrt_init_failed", stage_from_hint=True,
         pattern=_any(r"NRT:nrt_init\b", r"\bnrt_init\b.{0,40}fail", r"NRT init failed",
                      r"Failed to initiali[sz]e (?:the )?Neuron runtime",
                      r"Neuron runtime cannot be initiali[sz]ed", r"Neuron Runtime could not be initiali[sz]ed",
                      r"Unable to determine Neuron Driver version")),
    Rule("network", "error", "load", "network_error", stage_from_hint=True,
         exc_types=frozenset({
             "ConnectionError", "ConnectTimeout", "ReadTimeout", "ReadTimeoutError", "ConnectTimeoutError",
             "MaxRetryError", "LocalEntryNotFoundError", "OfflineModeIsEnabled", "ProxyError", "SSLError",
             "RemoteDisconnected", "ChunkedEncodingError", "IncompleteRead", "ConnectError", "TimeoutException",
             # trncat's own Hub errors (pipeline.errors), raised by pipeline.hub after its retries
             "HubError", "HubServerError", "HubRateLimitError",
         }),
         pattern=_any(r"Temporary failure in name resolution", r"Name or service not known",
                      r"Max retries exceeded with url", r"Connection (?:to \S+ )?timed out", r"Connection refused",
                      r"Connection reset by peer", r"\b5\d\d Server Error\b", r"\bHTTP(?:Error)?\W+5\d\d\b",
                      r"we cannot find the (?:appropriate snapshot folder|requested files in the local cache)",
                      r"We couldn't connect to", r"\b(?:ConnectionError|ReadTimeout|ConnectTimeout)\b")),
    # --- out of memory: before every rule that a wrapped OOM message could also match ---
    Rule("compiler_oom", "fail", "oom", "compiler_oom",
         pattern=_any(r"\bNCC_EOOM\d{3}\b", r"\bNCC_EVRF009\b", r"\bNCC_EXSP001\b",
                      r"Maximum peak HBM usage of .{0,40}exceeds")),
    Rule("compiler_host_oom", "fail", "oom", "host_oom",
         pattern=_any(r"\[F137\]", r"neuronx-cc was forcibly killed", r"neuronx-cc failed with -9\b",
                      r"Compile command returned: -9\b")),
    Rule("device_oom", "fail", "oom", "device_oom", exc_types=frozenset({"OutOfMemoryError"}),
         pattern=_any(r"Failed to allocate .{0,80}\bon (?:ND|NC)\b", r"Failed to alloc DEVICE memory",
                      r"Failed to allocate \d+ bytes on DEVICE", r"nrt_\w+ status=4\b", r"\bAllocation Failure\b",
                      r"\bNRT_RESOURCE\b", r"RESOURCE_EXHAUSTED", r"\bCUDA out of memory\b",
                      r"CUDA error: out of memory", r"\bHIP out of memory\b",
                      r"not enough (?:neuron|device|hbm) memory")),
    # torch's host allocator (c10 alloc_cpu.cpp) raises a RuntimeError: host memory, wherever it surfaces.
    Rule("host_oom_allocator", "fail", "oom", "host_oom",
         pattern=_any(r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory)")),
    # --- compile ---
    Rule("unsupported_op", "fail", "compile", "unsupported_op",
         pattern=_any(r"\bNCC_EUOC\d{3}\b", r"\bNCC_EVRF001\b", r"An unsupported operator was used",
                      r"Could not run '[\w.:]+' with arguments from the '\w+' backend",
                      r"is not currently implemented for the \w+ (?:device|backend)",
                      r"operators? (?:is|are) not implemented", r"\bLoweringException\b",
                      r"No lowering (?:found )?for")),
    Rule("ncc_error", "fail", "compile",
         lambda _, found: f"ncc_{found.group(1).lower()}" if found else "compiler_error", pattern=_NCC),
    Rule("compiler_error", "fail", "compile", "compiler_error",
         pattern=_any(r"An Internal Compiler Error has occurred",
                      r"neuronx-cc (?:failed with|terminated abnormally)", r"RunNeuronCCImpl: error condition",
                      r"Got a cached failed neff", r"neuronx-cc compilation failed",
                      r"\[(?:TEN|NLA|XTP|DVR|GCA|BIR|WAL)\d{3}\]", r"Internal tensorizer error")),
    Rule("backend_compiler_failed", "fail", "compile", "backend_compiler_failed",
         exc_types=frozenset({"BackendCompilerFailed", "InductorError"}),
         pattern=_any(r"\bBackendCompilerFailed\b", r"backend='[^']+' raised",
                      r"torch\._dynamo\.exc\.(?:Unsupported|InternalTorchDynamoError)\b")),
    # --- host memory ---
    Rule("host_oom", "fail", "oom", "host_oom", exc_types=frozenset({"MemoryError"})),
    Rule("host_oom_killed", "fail", "oom", "host_oom", signals=frozenset({_SIGKILL}),
         pattern=_any(re.escape(HOST_OOM_HINT), r"memory limit", r"Out of memory: Killed process",
                      r"oom[-_ ]kill", r"\bOOMKilled\b", r"exceeded (?:the )?memory")),
    # A signal only another process sends (a person, the runner's cancel, the kernel): the run was stopped, it did
    # not fail. Retried, never published as an incompatibility (a model's own crash is SIGSEGV, SIGABRT, ...).
    Rule("killed", "error", "crash", lambda ctx, found: "killed_" + _signal_code(ctx, found).removeprefix("signal_"),
         signals=_OUTSIDE_SIGNALS, stage_from_hint=True),
    # --- load ---
    Rule("unknown_architecture", "fail", "load", "unknown_architecture",
         pattern=_any(r"does not recognize this architecture",
                      r"Unrecognized configuration class (?!.{0,300}AutoTokenizer)", r"Unrecognized model in",
                      r"model type `[^`]*` .{0,40}not (?:recogni[sz]ed|supported)")),
    Rule("unknown_model_type", "fail", "load", "unknown_architecture",
         exc_types=frozenset({"KeyError"}), stage_hints=frozenset({"load"})),
    Rule("corrupt_weights", "fail", "load", "corrupt_weights", exc_types=frozenset({"SafetensorError"}),
         pattern=_any(r"Error while deserializing header", r"HeaderTooLarge", r"header too large",
                      r"InvalidHeaderDeserialization", r"incomplete metadata", r"MetadataIncompleteBuffer",
                      r"PytorchStreamReader failed", r"invalid load key", r"unexpected EOF")),
    Rule("missing_weights", "fail", "load", "missing_weights",
         pattern=_any(
             r"does not appear to have a file named (?:pytorch_|tf_|flax_|diffusion_pytorch_)?model\b",
             r"Error no file named (?:pytorch_|tf_|flax_|diffusion_pytorch_)?model\b")),
    Rule("missing_tokenizer", "fail", "load", "missing_tokenizer",
         pattern=_any(r"Can't load tokenizer", r"Can't load (?:the )?processor",
                      r"Can't load (?:image processor|feature extractor)",
                      r"Unrecognized configuration class .{0,300}to build an AutoTokenizer",
                      r"does not appear to have a file named (?:tokenizer|processor|preprocessor|vocab)",
                      # transformers 5 with no tokenizer files falls through to converting a slow tokenizer
                      r"sentencepiece or tiktoken installed to convert a slow tokenizer")),
    Rule("bad_config", "fail", "load", "bad_config",
         pattern=_any(r"is not a multiple of the number of attention heads",
                      r"embed_dim must be divisible by num_heads",
                      r"Must provide the same number of `\w+` as `\w+`")),
    Rule("one_core_task", "fail", "load", "needs_tensor_parallel",
         pattern=_any(r"has no tensor parallelism: its models are benchmarked on one core")),
    # --- process death and the generic fallbacks ---
    Rule("signal", "fail", "crash", _signal_code, signals=_CRASH_SIGNALS),
    Rule("exception", "fail", "crash", lambda ctx, _: f"exception_{_snake(ctx.exc_name or 'unknown')}",
         needs_exception=True, needs_stage_hint=True, stage_from_hint=True),
    Rule("exit_code", "fail", "crash", lambda ctx, _: f"exit_{ctx.exit_code}", nonzero_exit=True),
)
# fmt: on

if len({rule.name for rule in RULES}) != len(RULES):
    raise ValueError("failure rules must have unique names")

_TORCHRUN_WORKER_SIGNAL = re.compile(r"failed \(exitcode: -(\d+)\) local_rank:")
_UNKNOWN = Classification(status="fail", stage="crash", code="unknown", rule="unknown")


def classify(
    *,
    exc_type: str | None = None,
    message: str = "",
    signal: int | None = None,
    exit_code: int | None = None,
    timed_out: bool = False,
    stage_hint: str | None = None,
) -> Classification:
    """Classify one failure with the first rule of :data:`RULES` that matches.

    Args:
        exc_type: Exception type name, qualified or not (``torch.OutOfMemoryError``), if there was one.
        message: Exception message or the child's captured log (searched by the rules' patterns).
        signal: Signal that killed the child process, if any.
        exit_code: Child exit code; a negative code (``subprocess``'s convention) is read as a signal, and
            so is torchrun's ``failed (exitcode: -N) local_rank:`` line in the message.
        timed_out: True when the harness's own timeout killed the child.
        stage_hint: Stage the harness was in (``load``, ``compile``, ``run``), used by infrastructure
            errors and by the generic exception rule.

    Returns:
        The :class:`Classification`; ``crash``/``unknown`` when no rule matched.

    Raises:
        ValueError: If ``stage_hint`` is not one of :data:`pipeline.types.STAGES`.
    """
    if stage_hint is not None and stage_hint not in STAGES:
        raise ValueError(f"stage_hint must be one of {STAGES}, got {stage_hint!r}")
    if signal is None and exit_code is not None and exit_code < 0:
        signal, exit_code = -exit_code, None
    if signal is None and (worker := _TORCHRUN_WORKER_SIGNAL.search(message or "")):
        # torchrun exits 1 when a worker dies; the worker's real fate is in its log line.
        signal = int(worker.group(1))
    ctx = MatchContext(exc_type or None, message or "", signal, exit_code, timed_out, stage_hint)
    for rule in RULES:
        matched, found = rule.match(ctx)
        if matched:
            return rule.result(ctx, found)
    return _UNKNOWN
