"""The rules the emulator plays, each tied to the row of ``docs/neuron-facts.md`` it comes from.

A rule is the emulator's reading of one documented fact. Its ``fact`` is the first cell of that row, word for
word, so that ``tests/testing/test_neuron_emulator.py`` can fail on a rule whose row is missing; ``invented``
says where the docs give no text or shape and the emulator made one up (the row then says "docs silent").
Code that enforces a rule calls :func:`rule` with its key, so the table and the code cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    """One documented behaviour the emulator enforces.

    Attributes:
        key: The name the emulator's code uses.
        fact: The first cell of its row in docs/neuron-facts.md.
        behaviour: What the emulator does, in one line.
        invented: What the emulator had to invent because the docs are silent (None: nothing).
    """

    key: str
    fact: str
    behaviour: str
    invented: str | None = None


RULES: tuple[Rule, ...] = (
    Rule(
        "visible_cores",
        "`NEURON_RT_VISIBLE_CORES`",
        "a process reserves the cores it names: one index, an inclusive range, or a comma list of them",
    ),
    Rule(
        "reserve_all_by_default",
        "runtime reserves every core by default",
        "without NEURON_RT_VISIBLE_CORES the runtime takes every core of the machine",
    ),
    Rule(
        "exclusive_cores",
        "a reserved NeuronCore is exclusive",
        "a second process asking for a reserved core fails at runtime initialisation with the documented "
        "nrt_allocate_neuron_cores line",
    ),
    Rule(
        "lnc",
        "`NEURON_LOGICAL_NC_CONFIG`",
        "1 or 2 physical cores per logical core; trn2 defaults to 2 (4 logical cores per device)",
    ),
    Rule(
        "hbm_per_core",
        "HBM per logical core",
        "an allocation past its HBM bank (24 GiB, or the limit a test sets) fails; a bank is one logical core's "
        "at LNC=2 and two neighbouring cores' at LNC=1",
    ),
    Rule(
        "runtime_overhead",
        "the runtime's own HBM",
        "each reserved physical core holds 96 MB of the runtime's micro-code (counted in its bank and in sysfs's "
        "model_code, not by the allocator)",
        invented="MB read as MiB",
    ),
    Rule(
        "oom_text",
        "device out-of-memory text",
        "the failure prints the documented 'Failed to allocate ... on ND x:NC y' line and writes the memory "
        "table to /tmp/neuron_mem_table_device_<d>_hbm_<h>.log",
        invented="the table's rows hold the emulator's own counts (tensors only)",
    ),
    Rule(
        "device",
        "TorchNeuron device",
        "torch.device('neuron', i) backed by host memory, ops run by the CPU kernels; an index naming no core of "
        "this process fails (under torch.distributed only LOCAL_RANK's); torch.accelerator's device index is "
        "torch.neuron's, and binding a device starts the runtime",
        invented="that binding a device starts the runtime; index 0 on a later rank read as the current device "
        "(a Python backend's device guard answers 0 for a missing index: an explicit 0 looks the same)",
    ),
    Rule(
        "autoload",
        "TorchNeuron autoloads with `import torch`",
        "a torch.backends entry point registers the device when torch is imported",
    ),
    Rule(
        "compile_backend",
        "`torch.compile` backend",
        "backend 'neuron' compiles each graph once per input signature (a new shape recompiles), rejects "
        "dynamic=True and warns on a mode other than the default",
        invented="the texts of the rejection and of the warning; dynamo's automatic dynamic shapes turned off",
    ),
    Rule(
        "neff_cache",
        "`TORCH_NEURONX_NEFF_CACHE_DIR`",
        "a compiled graph is a NEFF file in the cache (default /tmp/neff_cache), laid out ab/cd/<key>.neff; a "
        "second process with the same graph is served from it",
        invented="the key's hashing (sha256 of the parts of rule cache_key)",
    ),
    Rule(
        "cache_key",
        "the compile cache's key",
        "a graph's key holds its FX code, its inputs' dtypes, shapes and strides, the torch-neuronx, neuronx-cc "
        "and NKI versions, the compiler arguments (NEURON_CC_FLAGS), the target (trn2) and the replica groups; "
        "a parameter lifted as a graph input is keyed by its shape and dtype, never its values",
        invented="TorchNeuron's own key is undocumented: the emulator uses vLLM Neuron's documented parts, adds the "
        "LNC and the bytes of the graph's constants (get_attr tensors, compiled into the NEFF)",
    ),
    Rule(
        "neff_locks",
        "`TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR`",
        "each compile takes a lock file in the local cache directory (default /tmp/local_cache)",
    ),
    Rule(
        "fallback_execution",
        "`TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION`",
        "a graph that fails to compile raises, unless the variable is 0: then it runs eagerly",
    ),
    Rule(
        "fallback_unimplemented",
        "`TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS`",
        "an op that fails on the device runs on the CPU instead unless the variable is 1",
        invented="which ops fail on the device (the machine's failing_ops) and the default 0",
    ),
    Rule(
        "cpu_fallback_ops",
        "CPU fallback of eager ops",
        "ops the machine lists as unimplemented run on the CPU and are counted by get_fallback_ops()",
        invented="which ops are unimplemented (the machine's fallback_ops)",
    ),
    Rule(
        "fallback_tracking",
        "listing the ops that fell back",
        "get_fallback_ops() lists each op name once per fallback; clear_op_tracking() empties it",
    ),
    Rule(
        "dynamo_metrics",
        "compile time from TorchNeuron",
        "get_dynamo_metrics() gives per graph torch_neuronx_fx_passes_us, torch_neuronx_lower_us and "
        "torch_neuronx_compile_us (0 for a graph served from the persistent cache)",
        invented="the mapping's outer shape ({graph key: {metric: microseconds}})",
    ),
    Rule(
        "memory_api",
        "memory statistics",
        "memory_stats, memory_allocated, max_memory_allocated, memory_reserved, max_memory_reserved and "
        "reset_peak_memory_stats per device; the allocator reserves segments",
        invented="the segment size (2 MiB)",
    ),
    Rule(
        "synchronize",
        "synchronize",
        "execution is asynchronous: memory statistics and the fallback list are current only after "
        "torch.neuron.synchronize()",
    ),
    Rule(
        "distributed_backend",
        "torch.distributed on TorchNeuron",
        "process-group backend 'neuron'; one visible core per process (the local rank's when none is set); "
        "an error when the runtime started before init_process_group",
    ),
    Rule(
        "integer_all_reduce",
        "integer all-reduce",
        "an all-reduce of an integer tensor on the device fails with NCC_EVRF061",
    ),
    Rule("float8", "float8_e4m3fn", "a graph holding float8_e4m3fn fails to compile with NCC_EVRF051"),
    Rule(
        "neuron_ls_233",
        "`neuron-ls --json-output`",
        "a JSON list, one object per device, with nc_count, logical_neuroncore_config, memory_size, "
        "neuroncore_ids, connected_to (the 4x4 torus of a 16-chip host, else null), neuron_processes and no "
        "instance type",
    ),
    Rule(
        "neuron_ls_234",
        "`neuron-ls` in Neuron 2.34",
        "--json-output is gone; --output-format json prints an object with top-level instance fields",
        invented="the object's shape ({'instance': {...}, 'ultraserver': null, 'devices': [...]}): no sample is "
        "published",
    ),
    Rule(
        "sysfs_pre_231",
        "sysfs device memory",
        "device_mem/{total,present,peak} and one folder per category under each physical neuron_core",
    ),
    Rule(
        "sysfs_moved",
        "sysfs after driver 2.31",
        "the machine of Neuron 2.33 (driver 2.31.7.0): the memory counters are not at the pre-2.31 paths; only a "
        "driver older than 2.31 has the pre-2.31 tree",
        invented="where they are instead (one folder per logical core, counters under stats/memory/)",
    ),
    Rule("driver_version", "driver version", "/sys/module/neuron/version holds the driver's version"),
    Rule("devices", "trn2 cores", "one /dev/neuron<N> per device; 8 physical cores and 96 GiB of HBM per device"),
    Rule(
        "trn3_devices",
        "trn3 cores",
        "a trn3.48xlarge: 16 devices of 8 physical cores and 144 GiB of HBM (36 GiB per bank) each",
        invented="its neuron-ls output (the trn2 one's shape, connected_to null) and its host memory",
    ),
    Rule(
        "runtime_package",
        "runtime package",
        "dpkg-query knows aws-neuronx-runtime-lib, -collectives, -tools and -dkms at the 2.33 versions",
    ),
    Rule(
        "versions",
        "versions of 2.33",
        "torch-neuronx 2.14.3.0, neuronx-cc 2.28.7631.0 and nki 0.7.0 are installed (package metadata)",
    ),
)

_BY_KEY = {r.key: r for r in RULES}


def rule(key: str) -> Rule:
    """The rule named ``key`` (a KeyError names a rule the table lacks: every enforced rule has a row)."""
    return _BY_KEY[key]


def cite(key: str) -> str:
    """A short mark for a message the emulator prints: ``[emulated: <fact>]``."""
    return f"[trncat Neuron emulator: {rule(key).fact.strip('`')}]"
