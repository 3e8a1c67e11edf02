"""Launching a benchmark child on several devices: ``torch.distributed.run`` (torchrun) on one node.

Shared by the backends that shard over cores or GPUs; an argument list, never a shell string.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from pipeline.errors import ConfigError


def torchrun_command(
    *,
    nproc: int,
    module_args: Sequence[str],
    python: str = sys.executable,
    master_port: int | None = None,
) -> list[str]:
    """Argument list that runs a Python module under ``torch.distributed.run`` on one node.

    Args:
        nproc: Processes (one per NeuronCore).
        module_args: The module to run (``-m``) followed by its arguments, e.g.
            ``["pipeline.bench.child", "--spec", "spec.json"]``.
        python: Interpreter to run torchrun with.
        master_port: Rendezvous port on 127.0.0.1; None lets ``--standalone`` pick a free one.

    Returns:
        The command as a list, for ``subprocess.run(cmd)``.

    Raises:
        ConfigError: If ``nproc`` or ``master_port`` is out of range or ``module_args`` is empty.
    """
    if nproc < 1:
        raise ConfigError(f"nproc must be at least 1, got {nproc}")
    if not module_args or not module_args[0] or module_args[0].startswith("-"):
        raise ConfigError("module_args must start with the module name to run")
    cmd = [python, "-m", "torch.distributed.run"]
    if master_port is None:
        cmd.append("--standalone")
    else:
        if not 1 <= master_port <= 65535:
            raise ConfigError(f"master_port must be in 1..65535, got {master_port}")
        # --standalone would override the endpoint with localhost:0, so spell the rendezvous out.
        cmd += ["--nnodes", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{master_port}"]
    cmd += ["--nproc-per-node", str(nproc), "-m", *module_args]
    return cmd
