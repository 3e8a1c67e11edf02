"""A Neuron emulator: the documented TorchNeuron / Neuron runtime contract, played on the CPU, for the tests.

Nothing here is AWS's code or a Trainium device. It exists so that the production Neuron path (the neuron
backend, the harness, the child, torchrun, ``trncat doctor``) can run unchanged, as real processes, against a
machine that enforces what the Neuron 2.33 docs say the runtime and TorchNeuron do; each rule names its row in
``docs/neuron-facts.md`` (:mod:`~tests.support.neuron.rules`). Production code never imports this package
(``tests/testing/test_neuron_emulator.py`` checks it): a test builds a machine (:func:`build`) and runs
processes in its :func:`environment`.

- :mod:`~tests.support.neuron.machine`: the machine on disk (devices, sysfs, tools, packages);
- :mod:`~tests.support.neuron.runtime`: core reservation and HBM; :mod:`~tests.support.neuron.device`:
  the ``neuron`` device; :mod:`~tests.support.neuron.compiler`: ``torch.compile(backend="neuron")``;
  :mod:`~tests.support.neuron.distributed`: the ``neuron`` process group; :mod:`~tests.support.neuron.api`:
  ``torch_neuronx``'s functions; :mod:`~tests.support.neuron.tools`: ``neuron-ls``, ``dpkg-query``.

Only the machine and the rules are imported here (no torch): the rest loads inside the processes that run on
the emulated machine.
"""

from __future__ import annotations

from tests.support.neuron.machine import EMULATOR, INSTANCES, PACKAGES, PROFILES, Machine, build, environment
from tests.support.neuron.rules import RULES, Rule, rule
