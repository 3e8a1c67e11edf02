"""Time the result-record validator over 100,000 records, a mix of valid and invalid ones built up front.

Every record is distinct (its own model id, revision, figures and times) and comes from parsing its JSON text,
so each one is a fresh tree of objects, as `trncat validate` sees it. One invalid record in five breaks a single
rule, schema or semantic. Three figures, each the best of ``--repeat`` passes (with the garbage collector off
while timing, as timeit does):

- validate (parsed): ``validate_record(r, from_strict_json=True)``, what `trncat validate` runs after parsing;
- validate (in-memory dicts): ``validate_record(r)``, which also walks the record for NaN and Infinity;
- parse+validate: ``validate_record(parse_record(text), from_strict_json=True)`` from the JSON text.

    .venv/bin/python benchmarks/validate_throughput.py [--records 100000] [--repeat 3] [--seed 0]

The goal of issue 2 is at most 5 µs per record.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import random
import sys
import time
from collections.abc import Callable
from typing import Any

from pipeline.records import dump_record, parse_record, validate_record
from tests.support.records import sample_failure, sample_record

INVALID_EVERY = 5  # one record in five is invalid
GOAL_US = 5.0


def _cpu(record: dict[str, Any]) -> dict[str, Any]:
    record.update(device="cpu", dtype="float32", plan=None)
    record["hardware"].update(name="cpu-x86_64", instance_type=None, accelerator="Intel Xeon", core_config=None,
                              memory_per_core_bytes=None, cores_available=None)  # fmt: skip
    record["versions"].update(torch_neuronx=None, neuronx_cc=None, runtime=None, driver=None, sdk=None)
    record["metrics"].update(compile_s=0.0, peak_device_memory_bytes=None)
    return record


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    *parents, leaf = path.split(".")

    def apply(record: dict[str, Any]) -> None:
        target = record
        for key in parents:
            target = target[key]
        target[leaf] = value

    return apply


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda record: record.pop(key)


#: One broken rule each: half caught by the schema, half by the semantic checks.
BREAKERS: tuple[Callable[[dict[str, Any]], None], ...] = (
    _set("revision", "main"),
    _set("model_id", "tiny-llama"),
    _set("status", "ok"),
    _drop("run"),
    _set("gpu_temperature_c", 61),
    _set("metrics.load_s", -1.0),
    _set("metrics.compile_s", 1e6),
    _set("metrics.latency_s", {"p50": 2.0, "p90": 1.0}),
    _set("run.finished_at", "2026-11-28T09:00:00+00:00"),
    _set("model_id", "trncat-demo/tiny--llama"),
)


def build_texts(count: int, seed: int) -> tuple[list[bytes], int]:
    """``count`` distinct record texts and how many of them are invalid."""
    rng = random.Random(seed)
    bases = [sample_record(), _cpu(sample_record()), sample_failure(), _cpu(sample_failure(stage="load"))]
    texts, invalid = [], 0
    for index in range(count):
        record = parse_record(dump_record(bases[index % len(bases)]))  # a fresh copy
        record["model_id"] = f"org-{index % 997}/model-{index}"
        record["revision"] = hashlib.sha1(str(index).encode()).hexdigest()
        metrics = record["metrics"]
        metrics["wall_s"] = round(rng.uniform(90.0, 600.0), 3)
        metrics["load_s"] = round(rng.uniform(0.5, 30.0), 3)
        if metrics["ttft_s"] is not None:
            metrics["ttft_s"] = round(rng.uniform(0.001, 0.5), 4)
            metrics["decode_tokens_per_s"] = round(rng.uniform(5.0, 500.0), 2)
        record["run"]["finished_at"] = f"2026-11-28T10:{rng.randrange(10, 60):02d}:{rng.randrange(60):02d}+00:00"
        if index % INVALID_EVERY == INVALID_EVERY - 1:
            BREAKERS[(index // INVALID_EVERY) % len(BREAKERS)](record)
            invalid += 1
        texts.append(dump_record(record).encode())
    return texts, invalid


def best_time(run: Callable[[], int], *, repeat: int, expected_invalid: int) -> float:
    """Best wall time of ``repeat`` calls of ``run``, which returns how many records it found invalid.

    Raises:
        SystemExit: the validator's verdicts do not match the records built, so the figure would mean nothing.
    """
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            rejected = run()
            best = min(best, time.perf_counter() - start)
        finally:
            gc.enable()
        if rejected != expected_invalid:
            raise SystemExit(f"the validator rejected {rejected} records, {expected_invalid} were built invalid")
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000, help="records to validate (default 100000)")
    parser.add_argument("--repeat", type=int, default=3, help="timed passes per figure; the best counts (default 3)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.records < 1 or args.repeat < 1:
        parser.error("--records and --repeat must be at least 1")

    texts, invalid = build_texts(args.records, args.seed)
    records = [parse_record(text) for text in texts]
    n = len(records)
    print(f"{n} records ({n - invalid} valid, {invalid} invalid), best of {args.repeat}; goal ≤ {GOAL_US:g} µs/record")

    def parsed() -> int:
        return sum(1 for r in records if validate_record(r, from_strict_json=True))

    def in_memory() -> int:
        return sum(1 for r in records if validate_record(r))

    def end_to_end() -> int:
        return sum(1 for t in texts if validate_record(parse_record(t), from_strict_json=True))

    for label, run in (("validate (parsed)", parsed), ("validate (in-memory dicts)", in_memory),
                       ("parse+validate", end_to_end)):  # fmt: skip
        seconds = best_time(run, repeat=args.repeat, expected_invalid=invalid)
        print(f"{label}: {seconds / n * 1e6:.1f} µs/record", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
