"""``trncat check`` on a 10,000-row dataset in the local hub: seconds beyond the model's own file downloads, and
the requests the dataset side takes.

The dataset holds ``--rows`` models (one latest row each, a seventh of them failures) over ``--architectures``
architectures, built by the real build (so its family index is the one a publish keeps). Three models are checked,
one per rule: a fine-tune whose card names a measured base (base-model evidence), another model of a measured
architecture (architecture evidence over every row of that family), and a model of an architecture never measured
(unknown). optimum-neuron's cache is not asked (``cache_repo=None``): it is not on the local hub.

Goals (the issue): at most 3 s beyond the model's own downloads (its ``model_info`` and small files, and its
bases'), and at most 5 requests for the dataset side. ``--latency-ms`` holds each answer of the local hub that long,
as a round trip to the real Hub takes (default 0 and 100 ms); a dataset without the family index (written before
layout 4) is measured too: it is read from its latest shards instead.

    python benchmarks/check_scale.py [--rows 10000] [--architectures 50] [--repeat 5] [--latency-ms 0 100]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline.check import check_model  # noqa: E402
from pipeline.dataset import FAMILIES_FILE, build  # noqa: E402
from pipeline.hub import Hub, point_client_at  # noqa: E402
from pipeline.localhub import LocalHub, LocalHubStore  # noqa: E402
from pipeline.testing import build_tiny_llama  # noqa: E402
from pipeline.testing.records import fake_revision, sample_failure, sample_record  # noqa: E402

REPO, OLD_REPO = "bench/results", "bench/results-before-layout-4"


def _architecture(index: int, architectures: int) -> tuple[str, str]:
    n = index % architectures
    return f"Arch{n:03d}ForCausalLM", f"arch{n:03d}"


def records(rows: int, architectures: int) -> list[dict]:
    out = []
    for i in range(rows):
        architecture, model_type = _architecture(i, architectures)
        family = {"schema_version": "1.3", "architecture": architecture, "model_type": model_type}
        model_id = f"org/model-{i:05d}"
        if i % 7 == 3:
            record = sample_failure(model_id=model_id, code=f"ncc_e{i % 5:03d}", **family)
        else:
            record = sample_record(model_id=model_id, **family)
        record["revision"] = fake_revision(model_id)
        out.append(record)
    return out


def seed(store: LocalHubStore, dataset: Path, work: Path) -> dict[str, str]:
    """The dataset repos (with and without the family index) and the three checked models; name -> model id."""
    files = {p.relative_to(dataset).as_posix(): p for p in dataset.rglob("*") if p.is_file()}
    store.create_repo(REPO, repo_type="dataset")
    store.commit_files(REPO, files, message="merged results", repo_type="dataset")
    store.create_repo(OLD_REPO, repo_type="dataset")
    old = {path: file for path, file in files.items() if path != FAMILIES_FILE}
    store.commit_files(OLD_REPO, old, message="merged results", repo_type="dataset")
    tiny = build_tiny_llama(work / "tiny-llama")
    config = json.loads((tiny / "config.json").read_text())
    models = {
        "base": ("bench/finetune", "Arch001ForCausalLM", "arch001", b"---\nbase_model: org/model-00001\n---\n"),
        "architecture": ("bench/other-model", "Arch002ForCausalLM", "arch002", b"---\nlicense: mit\n---\n"),
        "unknown": ("bench/new-architecture", "LlamaForCausalLM", "llama", b"---\nlicense: mit\n---\n"),
    }
    for _, (model_id, architecture, model_type, card) in models.items():
        own = {**config, "architectures": [architecture], "model_type": model_type}
        if model_type != "llama":  # a class transformers lacks: counted from the listing's safetensors total
            own["model_type"] = model_type
        weights = {p.name: p for p in tiny.glob("*.safetensors")}
        store.create_repo(model_id, metadata={"pipeline_tag": "text-generation", "library_name": "transformers",
                                              "safetensors": {"total": 1_000_000}})  # fmt: skip
        store.commit_files(model_id, {"config.json": json.dumps(own).encode(), "README.md": card, **weights})
    return {name: model_id for name, (model_id, *_) in models.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--architectures", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, nargs="+", default=[0.0, 100.0])
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="trncat-check-scale-") as tmp:
        work = Path(tmp)
        print(f"building a {args.rows}-row dataset over {args.architectures} architectures ...", flush=True)
        build(records(args.rows, args.architectures), work / "dataset", page=False)
        size = (work / "dataset" / FAMILIES_FILE).stat().st_size
        print(f"family index: {size / 1e3:.0f} kB")
        failed = False
        for latency_ms in args.latency_ms:
            with LocalHub(work / f"hub-{latency_ms:g}", latency_s=latency_ms / 1000) as local:
                restore = point_client_at(local.url, cache_dir=work / f"cache-{latency_ms:g}")
                try:
                    models = seed(local.store, work / "dataset", work)
                    hub = Hub(endpoint=local.url, token="bench", cache_dir=work / f"cache-{latency_ms:g}")
                    check_model(models["base"], hub=hub, dataset_repo=REPO, cache_repo=None)  # imports, first use
                    for repo in (REPO, OLD_REPO):
                        for rule, model_id in models.items():
                            failed |= _measure(local, hub, repo, rule, model_id, args.repeat, latency_ms)
                finally:
                    restore()
    print("all goals met" if not failed else "a goal was missed")
    return 1 if failed else 0


def _measure(local: LocalHub, hub: Hub, repo: str, rule: str, model_id: str, repeat: int, latency_ms: float) -> bool:
    beyond, totals, dataset_requests, verdicts = [], [], [], set()
    for _ in range(repeat):
        mark = len(local.server.requests)
        answer = check_model(model_id, hub=hub, dataset_repo=repo, cache_repo=None)
        requests = [p for _, p in local.server.requests[mark:]]
        dataset_requests.append(sum(1 for p in requests if "/datasets/" in p))
        t = answer.timings
        totals.append(t["total"])
        beyond.append(t["total"] - t["model"] - t.get("bases", 0.0))
        verdicts.add(answer.verdict)
    index = "with the family index" if repo == REPO else "without it (latest shards)"
    over = statistics.median(beyond)
    print(
        f"latency {latency_ms:g} ms, {index}, {rule} rule ({'/'.join(sorted(verdicts))}): beyond the model's "
        f"downloads median {over:.3f} s (max {max(beyond):.3f}), whole check median {statistics.median(totals):.3f} s, "
        f"dataset requests {max(dataset_requests)}"
    )
    return repo == REPO and (over > 3.0 or max(dataset_requests) > 5)


if __name__ == "__main__":
    raise SystemExit(main())
