"""The Neuron backend: TorchNeuron (torch-neuronx) on Trainium2, and what the parent side reads of the machine.

- :mod:`~pipeline.backends.neuron.backend`: :class:`NeuronBackend` (device, compile, memory, versions, launch);
- :mod:`~pipeline.backends.neuron.launch`: the launch environment (``NEURON_RT_VISIBLE_CORES``, LNC, the NEFF
  cache) and the cores a run takes;
- :mod:`~pipeline.backends.neuron.bundle`: the compiled-cache bundle (a passing run's NEFF cache, data only):
  packed, checked and unpacked under one rule, in one read of one file; :mod:`~pipeline.backends.neuron.deflate`
  its gzip stream, written on two threads;
- :mod:`~pipeline.backends.neuron.cachekey`: the bundle's key manifest (what its NEFFs are keyed by: graphs,
  config shapes, dtype, workload, toolchain, compiler options, target, LNC, cores, replica groups), in the record
  and inside the bundle, and the comparison run.py and ``trncat check`` make before a warm start;
- :mod:`~pipeline.backends.neuron.tools`: ``neuron-ls``, sysfs and ``/dev/neuron*`` parsed defensively;
- :mod:`~pipeline.backends.neuron.measure`: what a run reports beside its timings (TorchNeuron's compile
  figures, the recorded peak, the runtime's memory table after an out-of-memory).

Every Neuron fact these rely on is in ``docs/neuron-facts.md`` with its documentation source. May import: the
top-level modules and :mod:`pipeline.backends` (the interface). Imported by: :mod:`pipeline.backends`'
registry, :mod:`pipeline.bench` (``trncat doctor``, the bundle after a pass), :mod:`pipeline.records` (``trncat
collect`` checks a bundle), :mod:`pipeline.render` (run.py's copy of the bundle rule), :mod:`pipeline.publish` (the
bundles it uploads) and the CLI.
"""

from __future__ import annotations

from pipeline.backends.neuron.backend import (
    NEURON_INDEX_URL,
    TORCH_CPU_INDEX_URL,
    NeuronBackend,
    dlami_venv,
    dpkg_version,
    inventory_json,
)
from pipeline.backends.neuron.bundle import (
    BUNDLE_SUFFIX,
    MAX_BUNDLE_BYTES,
    BundleInfo,
    bundle_beside,
    bundle_rule,
    check_bundle,
    pack_cache,
    unpack_bundle,
)
from pipeline.backends.neuron.cachekey import KEY_FILE, build_key, config_shapes, key_differences, key_rule, read_config
from pipeline.backends.neuron.launch import DEFAULT_NEFF_CACHE_DIR, format_visible_cores
from pipeline.backends.neuron.tools import driver_version, sysfs_memory_layout, visible_devices
