"""``trncat check`` at Hub scale, paired against what a user would write instead, in one run.

The user's alternative: ``hf_hub_download(<dataset>, "data/families/all.parquet")`` and a pandas filter for the model
and its architecture. ``trncat check`` does more (the model's listing and small files, its bases, the planner,
the verdict), so the pair shows what its answer costs beside a lookup.

For each dataset size (``--rows``, default 10,000 and 100,000 models over ``--architectures`` architectures, a
seventh of them failures; the family index is the real build's rows of 14 models, tiled: :func:`family_index`)
and each latency the local hub holds every answer (``--latency-ms``, default 0 and 100 ms, as a round trip to the
real Hub takes), four ways, each in a fresh process on the same local hub and download cache:

- ``check in-process``: one process imports trncat, checks once (warm-up: imports, first downloads), then checks
  ``--repeat`` times; the median of those, and the process's peak RSS (a process keeps the family index it read
  at a commit and its paths, so the repeats ask the Hub for main's head (and the model's listing) and read no index;
  the user's script asks for the file's head and reads it each time; the ``process`` figures are first checks);
- ``pandas in-process``: the same for the user's script (pandas and huggingface_hub imported before timing);
- ``check process`` / ``pandas process``: the whole command, ``--repeat`` times (start-up and imports included),
  median wall time and CPU time and the largest peak RSS (the process and the children it waited for, so the
  planner's build child counts). On a shared, loaded machine the CPU seconds are the steadier figure.

Three models are checked, one per rule: a fine-tune whose card names a measured base (base-model evidence),
another model of a measured architecture (architecture evidence) and a Llama of an architecture never measured
(unknown; transformers knows its type, so the planner builds it on the meta device, in its child). Caches are
warm after the first run (the model's files at its commit, the family index at the dataset's commit), on both
sides. optimum-neuron's cache is not asked (``--no-cache``): it is not on the local hub. Start-up is the import of
the check command in a fresh process (``python -c "import pipeline.cli.check, pipeline.check"``) against the
script's ``import huggingface_hub, pandas``.

    python benchmarks/check_scale.py [--rows 10000 100000] [--architectures 50] [--repeat 5] [--latency-ms 0 100]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

REPO = "bench/results"
TASK = "text-generation"

#: The user's script: download the family index, filter it for the model and for its architecture.
USER_SCRIPT = """
import sys
import pandas as pd
from huggingface_hub import hf_hub_download
def lookup(model_id, architecture, model_type):
    path = hf_hub_download(sys.argv[1], "data/families/all.parquet", repo_type="dataset")
    df = pd.read_parquet(path)
    own = df[df["model_id"].str.lower() == model_id.lower()]
    family = df[(df["architecture"] == architecture) & (df["model_type"] == model_type) & (df["task"] == TASK)]
    return len(own), int((family["status"] == "pass").sum()), len(family)
""".replace("TASK", repr(TASK))

#: The in-process worker: warm up once, then time ``repeat`` runs; prints the times.
WORKER = """
import json, sys, time
kind, model_id, architecture, model_type, repeat = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6])
if kind == "check":
    from pipeline.check import check_model
    from pipeline.hub import Hub
    hub = Hub()
    def run():
        return check_model(model_id, hub=hub, dataset_repo=sys.argv[1], cache_repo=None).verdict
else:
    exec(USER_SCRIPT)
    def run():
        return lookup(model_id, architecture, model_type)
answer = run()
times = []
for _ in range(repeat):
    start = time.perf_counter()
    again = run()
    times.append(time.perf_counter() - start)
    assert again == answer, (again, answer)
print(json.dumps({"times": times, "answer": str(answer)}))
"""


def _architecture(index: int, architectures: int) -> tuple[str, str]:
    n = index % architectures
    return f"Arch{n:03d}ForCausalLM", f"arch{n:03d}"


def records(rows: int, architectures: int) -> list[dict]:
    from tests.support.records import fake_revision, sample_failure, sample_record

    out = []
    for i in range(rows):
        architecture, model_type = _architecture(i, architectures)
        family = {"architecture": architecture, "model_type": model_type}
        model_id = f"org/model-{i:05d}"
        if i % 7 == 3:
            record = sample_failure(model_id=model_id, code=f"ncc_e{i % 5:03d}", **family)
        else:
            record = sample_record(model_id=model_id, **family)
        record["revision"] = fake_revision(model_id)
        out.append(record)
    return out


def family_index(rows: int, architectures: int, out: Path, work: Path) -> None:
    """A dataset folder holding the family index of ``rows`` models, all a check and the user's script read.

    The real build makes the index of 14 models (12 passes, 2 failures); their rows are tiled to ``rows`` with each
    copy's model id, revision and architecture replaced (the real build of 100,000 records takes tens of minutes and
    gigabytes here, and its latest view is read by neither side)."""
    import hashlib

    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipeline.dataset import FAMILIES_FILE, build

    seed = work / "seed-dataset"
    if not (seed / FAMILIES_FILE).is_file():
        build(records(14, 1), seed, page=False)
    with pq.ParquetFile(seed / FAMILIES_FILE) as parquet:
        base = parquet.read()
    schema = base.schema
    table = base.take(pa.array([i % base.num_rows for i in range(rows)]))
    ids = [f"org/model-{i:05d}" for i in range(rows)]
    names = [_architecture(i, architectures) for i in range(rows)]
    columns = {
        "model_id": ids,
        "revision": [hashlib.sha1(m.encode()).hexdigest() for m in ids],
        "architecture": [a for a, _ in names],
        "model_type": [t for _, t in names],
    }
    for name, values in columns.items():
        table = table.set_column(schema.get_field_index(name), name, pa.array(values, pa.string()))
    (out / FAMILIES_FILE).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table.cast(schema), out / FAMILIES_FILE, compression="snappy")


#: rule -> (model id, architecture, model_type, card)
MODELS = {
    "base": ("bench/finetune", "Arch001ForCausalLM", "arch001", b"---\nbase_model: org/model-00001\n---\n"),
    "architecture": ("bench/other-model", "Arch002ForCausalLM", "arch002", b"---\nlicense: mit\n---\n"),
    "unknown": ("bench/new-architecture", "LlamaForCausalLM", "llama", b"---\nlicense: mit\n---\n"),
}


def seed(store: Any, dataset: Path, work: Path) -> None:
    """The dataset repo (its card and data files; the scripts, two per model, are left out: a check never lists
    or reads them) and the three checked models."""
    from pipeline.testing import build_tiny_llama

    files = {p.relative_to(dataset).as_posix(): p for p in dataset.rglob("*") if p.is_file()}
    files = {path: file for path, file in files.items() if path.startswith("data/") or "/" not in path}
    store.create_repo(REPO, repo_type="dataset")
    store.commit_files(REPO, files, message="merged results", repo_type="dataset")
    tiny = build_tiny_llama(work / "tiny-llama")
    config = json.loads((tiny / "config.json").read_text())
    for model_id, architecture, model_type, card in MODELS.values():
        own = {**config, "architectures": [architecture], "model_type": model_type}
        weights = {p.name: p for p in tiny.glob("*.safetensors")}
        store.create_repo(model_id, metadata={"pipeline_tag": TASK, "library_name": "transformers",
                                              "safetensors": {"total": 1_000_000}})  # fmt: skip
        store.commit_files(model_id, {"config.json": json.dumps(own).encode(), "README.md": card, **weights})


#: Runs a command and writes its wall seconds and peak RSS: a small process forks it, so the figure is the
#: command's own (a child forked straight from this big process would start from this process's peak: Linux keeps
#: ``ru_maxrss`` across exec).
LAUNCHER = """
import resource, subprocess, sys, time
start = time.perf_counter()
code = subprocess.run(sys.argv[2:]).returncode
wall = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(sys.argv[1], "w") as out:
    out.write(f"{wall} {usage.ru_maxrss} {usage.ru_utime + usage.ru_stime}")
sys.exit(code)
"""


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, int, float, str]:
    """One process: wall seconds, its peak RSS in KiB (the largest of it and the children it waited for, so the
    planner's build child counts), its CPU seconds (user and system, children included), its stdout."""
    with tempfile.TemporaryDirectory() as tmp:
        figures = Path(tmp) / "figures"
        done = subprocess.run([sys.executable, "-c", LAUNCHER, str(figures), *argv], env=env, capture_output=True,
                              text=True, check=False)  # fmt: skip
        if done.returncode != 0:
            raise SystemExit(f"{argv[:4]} failed ({done.returncode}): {done.stderr[-2000:]}")
        wall, peak, cpu = figures.read_text().split()
        return float(wall), int(peak), float(cpu), done.stdout


def _process(argv: list[str], env: dict[str, str], repeat: int) -> tuple[float, int, float]:
    """Median wall seconds, the largest peak RSS (KiB) and the median CPU seconds of ``repeat`` runs of a command,
    after one warm-up."""
    _run(argv, env)
    runs = [_run(argv, env) for _ in range(repeat)]
    return (statistics.median(r[0] for r in runs), max(r[1] for r in runs), statistics.median(r[2] for r in runs))


def _in_process(kind: str, rule: str, env: dict[str, str], repeat: int) -> tuple[float, int, str]:
    model_id, architecture, model_type, _ = MODELS[rule]
    code = f"USER_SCRIPT = {USER_SCRIPT!r}\n{WORKER}"
    argv = [sys.executable, "-c", code, REPO, kind, model_id, architecture, model_type, str(repeat)]
    _, peak, _, out = _run(argv, env)
    report = json.loads(out.strip().splitlines()[-1])
    return statistics.median(report["times"]), peak, report["answer"]


def _startup(env: dict[str, str], repeat: int) -> None:
    for name, code in (("trncat check", "import pipeline.cli.check, pipeline.check"),
                       ("the pandas script", "import huggingface_hub, pandas")):  # fmt: skip
        wall, peak, cpu = _process([sys.executable, "-c", code], env, repeat)
        print(f"start-up, {name}: median {wall:.3f} s wall, {cpu:.3f} s CPU, peak RSS {peak / 1024:.0f} MiB",
              flush=True)  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--architectures", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, nargs="+", default=[0.0, 100.0])
    parser.add_argument("--rules", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--datasets", type=Path, default=None, help="keep the built datasets here (reused if there)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    from pipeline.dataset import FAMILIES_FILE
    from pipeline.localhub import LocalHub

    with tempfile.TemporaryDirectory(prefix="trncat-check-scale-") as tmp:
        work = Path(tmp)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_DISABLE_XET": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
        _startup(env, args.repeat)
        for rows in args.rows:
            dataset = (args.datasets or work) / f"dataset-{rows}-{args.architectures}"
            start = time.perf_counter()
            if not (dataset / FAMILIES_FILE).is_file():
                family_index(rows, args.architectures, dataset, work)
            size = (dataset / FAMILIES_FILE).stat().st_size
            print(f"\n{rows} models over {args.architectures} architectures: built (or found) in "
                  f"{time.perf_counter() - start:.0f} s; family index {size / 1e6:.1f} MB", flush=True)  # fmt: skip
            with LocalHub(work / f"hub-{rows}") as local:
                seed(local.store, dataset, work)
                run_env = {**env, "HF_ENDPOINT": local.url, "HF_HUB_CACHE": str(work / f"cache-{rows}"),
                           "HF_TOKEN": "bench"}  # fmt: skip
                for latency_ms in args.latency_ms:
                    local.server.latency_s = latency_ms / 1000
                    for rule in args.rules:
                        _pair(rule, latency_ms, run_env, args.repeat)
    return 0


def _pair(rule: str, latency_ms: float, env: dict[str, str], repeat: int) -> None:
    model_id, architecture, model_type, _ = MODELS[rule]
    check_t, check_peak, verdict = _in_process("check", rule, env, repeat)
    user_t, user_peak, _ = _in_process("pandas", rule, env, repeat)
    check_argv = [sys.executable, "-m", "pipeline", "check", model_id, "--dataset", REPO, "--no-cache", "--json"]
    user_argv = [sys.executable, "-c", USER_SCRIPT + "\nprint(lookup(*sys.argv[2:]))", REPO, model_id,
                 architecture, model_type]  # fmt: skip
    check_p, check_p_peak, check_cpu = _process(check_argv, env, repeat)
    user_p, user_p_peak, user_cpu = _process(user_argv, env, repeat)
    print(
        f"latency {latency_ms:g} ms, {rule} rule ({verdict}):\n"
        f"  in-process  check {check_t:.3f} s ({check_peak / 1024:.0f} MiB)  pandas {user_t:.3f} s "
        f"({user_peak / 1024:.0f} MiB)  x{check_t / user_t:.2f}\n"
        f"  process     check {check_p:.3f} s, {check_cpu:.2f} s CPU ({check_p_peak / 1024:.0f} MiB)  pandas "
        f"{user_p:.3f} s, {user_cpu:.2f} s CPU ({user_p_peak / 1024:.0f} MiB)  x{check_p / user_p:.2f}",
        flush=True,
    )


if __name__ == "__main__":
    raise SystemExit(main())
