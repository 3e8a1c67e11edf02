"""A Neuron emulator: the documented TorchNeuron / Neuron runtime contract, played on the CPU, for the tests.

Nothing here is AWS's code or a Trainium device. It exists so that the production Neuron path (the neuron
backend, the harness, the child, torchrun, ``trncat doctor``) can run unchanged, as real processes, against a
machine that enforces what the Neuron 2.33 docs say the runtime and TorchNeuron do; each rule names its row in
``docs/neuron-facts.md`` (:mod:`~pipeline.testing.neuron.rules`). Production code never imports this package
(``tests/testing/test_neuron_emulator.py`` checks it): a test builds a machine (:func:`build`) and runs
processes in its :func:`environment`.

- :mod:`~pipeline.testing.neuron.machine`: the machine on disk (devices, sysfs, tools, packages);
- :mod:`~pipeline.testing.neuron.runtime`: core reservation and HBM; :mod:`~pipeline.testing.neuron.device`:
  the ``neuron`` device; :mod:`~pipeline.testing.neuron.compiler`: ``torch.compile(backend="neuron")``;
  :mod:`~pipeline.testing.neuron.distributed`: the ``neuron`` process group; :mod:`~pipeline.testing.neuron.api`:
  ``torch_neuronx``'s functions; :mod:`~pipeline.testing.neuron.tools`: ``neuron-ls``, ``dpkg-query``.

Only the machine and the rules are imported here (no torch): the rest loads inside the processes that run on
the emulated machine.
"""

from __future__ import annotations

from pipeline.testing.neuron.machine import EMULATOR, INSTANCES, PACKAGES, PROFILES, Machine, build, environment
from pipeline.testing.neuron.rules import RULES, Rule, rule
