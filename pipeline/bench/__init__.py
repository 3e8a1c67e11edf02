"""The benchmark harness: ``run(spec) -> record``. Backends and tasks come from registries."""
