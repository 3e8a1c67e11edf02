"""``trncat demo``: the whole flow offline on this machine, through the embedded local hub.

It starts the local hub, seeds it with the tiny models it builds (as model repos with ranking metadata,
beside a remote-code model and a gated one that discovery must keep out) and a dataset repo holding what
``out`` already holds, then runs discover -> queue -> bench (cpu) -> validate -> publish (a PR) against
it, and leaves the PR's tree in ``out``.
"""

from __future__ import annotations

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
from pipeline.bench.backends import get_backend
from pipeline.bench.run import bench_model
from pipeline.records import validate_paths
from pipeline.testing.tiny import build_tiny_llama, build_tiny_llava

DATASET_REPO = "trncat-demo/results"
#: (repo id, task, builder, listing metadata). Downloads and trending scores order the rankings.
DEMO_MODELS: tuple[tuple[str, str, Callable[[Path], Path], dict[str, Any]], ...] = (
    ("trncat-demo/tiny-llama", "text-generation", build_tiny_llama, {"downloads": 5000, "trendingScore": 40}),
    ("trncat-demo/tiny-llava", "image-text-to-text", build_tiny_llava, {"downloads": 3000, "trendingScore": 30}),
)
#: Models discovery must keep out, with their reason: they never reach the matrix.
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
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.invalid == 0 and bool(self.records) and all(r["status"] == "pass" for r in self.records)

    def table(self) -> str:
        header = f"{'model':<28} {'task':<20} {'status':<8} {'load s':>7} {'ttft ms':>8} {'tok/s':>8} {'wall s':>7}"
        lines = [header, "-" * len(header)]

        def fmt(value: float | None, scale: float = 1.0, digits: int = 2) -> str:
            return "-" if value is None else f"{value * scale:.{digits}f}"

        for record in self.records:
            m = record["metrics"]
            lines.append(
                f"{record['model_id']:<28} {record['task']:<20} {record['status']:<8} {fmt(m['load_s']):>7} "
                f"{fmt(m['ttft_s'], 1000, 1):>8} {fmt(m['decode_tokens_per_s'], digits=0):>8} {fmt(m['wall_s']):>7}"
            )
        for model_id, reason in self.kept_out:
            lines.append(f"{model_id:<28} kept out: {reason}")
        lines.append(
            f"\n{self.pr or 'no PR'}; its tree is in {self.out}/ (data/, scripts/, README.md, index.html), "
            f"{self.seconds:.0f} s"
        )
        return "\n".join(lines)


def _cpu_toolchain() -> dict[str, str]:
    return {name: importlib.metadata.version(name) for name in ("torch", "transformers")}


def _seed(store: Any, work: Path, out: Path, echo: Callable[[str], None]) -> None:
    for index, (repo_id, task, builder, meta) in enumerate(DEMO_MODELS, 1):
        echo(f"[seed {index}/{len(DEMO_MODELS)}] building {repo_id} ({task})")
        folder = builder(work / "models" / repo_id.split("/")[1])
        from pipeline.params import describe

        params = describe(json.loads((folder / "config.json").read_text())).params
        store.create_repo(
            repo_id,
            metadata={"pipeline_tag": task, "library_name": "transformers", "safetensors": {"total": params}, **meta},
        )
        files = {p.relative_to(folder).as_posix(): p for p in folder.rglob("*") if p.is_file()}
        store.commit_files(repo_id, files, message="upload tiny model")
    for repo_id, task, meta in KEPT_OUT:
        store.create_repo(repo_id, metadata={"pipeline_tag": task, "library_name": "transformers", **meta})
        store.commit_files(repo_id, {"config.json": b'{"model_type": "llama"}'}, message="config")
    store.create_repo(DATASET_REPO, repo_type="dataset")
    existing = {p.relative_to(out).as_posix(): p for p in out.rglob("*") if p.is_file()} if out.is_dir() else {}
    if existing:  # what --out holds plays the dataset's main branch: a second demo adds to it
        store.commit_files(DATASET_REPO, existing, message="existing dataset", repo_type="dataset")


def run_demo(*, out: Path, work: Path | None = None, echo: Callable[[str], None] = lambda _: None) -> DemoSummary:
    """Run discover -> queue -> bench -> validate -> publish against a seeded local hub.

    The pull request's tree lands in ``out``; what ``out`` held before is the dataset's main branch.
    """
    from pipeline.dataset import write_front_files
    from pipeline.discover import discover_all, write_outputs
    from pipeline.hub import Hub, point_client_at
    from pipeline.localhub import LocalHub
    from pipeline.publish import publish
    from pipeline.queue import build_queue

    start = time.perf_counter()
    temporary = work is None
    work = Path(tempfile.mkdtemp(prefix="trncat-demo-")) if work is None else work
    summary = DemoSummary(out=out)
    try:
        with LocalHub(work / "hub") as local:
            restore = point_client_at(local.url, cache_dir=work / "hf-cache")
            try:
                echo(f"local hub at {local.url}")
                _seed(local.store, work, out, echo)
                # The local hub takes any token; publish needs one to know the bot's own PRs (whoami).
                hub = Hub(endpoint=local.url, token="trncat-demo", cache_dir=work / "hf-cache")
                echo("discover: trending and downloads, per task")
                discoveries = discover_all(hub=hub, limit=10, views=("trending", "downloads"), exclusions=[])
                overlay = work / "discovery"
                write_outputs(discoveries, [], overlay)
                summary.kept_out = sorted(
                    {(c.model_id, f"{c.kind}: {c.reason}") for d in discoveries for c in d.ineligible}
                )
                echo("queue: plan each candidate, skip what the dataset holds")
                candidates = [c for d in discoveries for c in d.candidates]
                dataset_root = out if out.is_dir() else None
                queue = build_queue(
                    candidates=candidates,
                    dataset_root=dataset_root,
                    toolchain=_cpu_toolchain(),
                    hub=hub,
                    device="cpu",
                    dtype="float32",
                )
                results = work / "results"
                entries = queue.entries
                cpu = get_backend("cpu")
                for index, entry in enumerate(entries, 1):
                    echo(f"[bench {index}/{len(entries)}] {entry['model_id']} ({entry['task']}) on cpu")
                    bench_model(
                        entry["model_id"],
                        task=entry["task"],
                        backend=cpu,
                        revision=entry["revision"],
                        dtype=entry["dtype"],
                        cores=entry["cores"],
                        hub=hub,
                        out=results / f"{entry['artifact']}.json",
                    )
                echo("validate")
                report = validate_paths([results]) if results.is_dir() else None
                records = [record for _, record in report.records] if report else []
                summary.invalid = len(report.bad_files) if report else 0
                summary.records = records
                echo(f"publish: {len(records)} record(s) to {DATASET_REPO} as a pull request")
                result = publish(records, repo=DATASET_REPO, hub=hub, overlay=overlay, invalid=summary.invalid)
                if result.pr_num is not None:
                    summary.pr = f"PR #{result.pr_num} on {DATASET_REPO}"
                    _copy_tree(hub, f"refs/pr/{result.pr_num}", out, work)
                    # A Hub publish reads only the shards it touches, so it does not rebuild the catalog page
                    # (the whole latest view): the demo builds it from the PR's whole tree.
                    write_front_files(out)
            finally:
                restore()
    finally:
        if temporary:
            shutil.rmtree(work, ignore_errors=True)
    summary.seconds = time.perf_counter() - start
    return summary


def _copy_tree(hub: Any, revision: str, out: Path, work: Path) -> None:
    """Replace ``out`` with the dataset repo's tree at ``revision``, all at once."""
    tree = work / "pr-tree"
    hub.snapshot(DATASET_REPO, revision=revision, repo_type="dataset", local_dir=tree)
    shutil.rmtree(tree / ".cache", ignore_errors=True)
    (tree / ".gitattributes").unlink(missing_ok=True)
    with fsatomic.staged_folder(out) as stage:
        for old in list(stage.iterdir()):
            shutil.rmtree(old) if old.is_dir() else old.unlink()
        for path in sorted(tree.rglob("*")):
            if path.is_file():
                fsatomic.write_bytes(stage / path.relative_to(tree), path.read_bytes())
