"""``trncat page`` at Hub scale: rebuilding the catalog Space of a dataset of N models on the local hub, beside what a
user would script instead (``snapshot_download`` of the dataset's data and scripts, the same tree built, then
``HfApi.upload_folder`` of it).

The dataset is :func:`benchmarks.page_scale.seed_dataset`'s (latest shards, a results file, rankings, exclusions, a
run.py and requirements.txt per model), committed to the local hub. Each way is timed three times: the first build
(the Space is new), a rebuild with nothing changed, and a rebuild after one model's run.py changed. Prints wall time,
CPU time of the whole process (client and local hub), peak memory above the start, HTTP requests and bytes down and
up. The local hub answers at once: with ``--latency-ms`` each answer is held that long, as on a network.

    .venv/bin/python benchmarks/space_scale.py [--models 5000] [--latency-ms 0] [--no-upload-folder]

Measured 2026-12-04 on the 2-core machine (load average about 1), ``--models 5000`` (10,016 files):

=====================  ==========================================  ==========================================
                       trncat page                                 snapshot_download + upload_folder
=====================  ==========================================  ==========================================
first build            25.6 s, 28.3 s CPU, 10,112 requests         79.5 s, 94.7 s CPU, 20,093 requests
nothing changed        1.1 s, 1.1 s CPU, 83 requests, 7.3 MB down  88.7 s, 104.4 s CPU, 20,093 requests
one run.py changed     1.5 s, 1.5 s CPU, 87 requests               90.1 s, 105.6 s CPU, 20,093 requests
=====================  ==========================================  ==========================================

A rebuild downloads the dataset's ``data/`` (7.3 MB here: the page reads the latest view, the results and the
rankings) and two tree listings; of the scripts, only those the Space lacks. Before the scripts were fetched apart
(at f9149a5, which already compared by the Space's listing), the rebuild with nothing changed took 88 s and 20,067
requests at 5,000 models, by a one-off script; before that (f131a3a, not measured), a snapshot of the Space, 10,079
more files, came on top. Below 2,000 models with scripts the page is one file that inlines their texts, and every
script is fetched.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from page_scale import seed_dataset  # noqa: E402
from publish_scale import Figures, _counting, _since  # noqa: E402

from pipeline.hub import Hub, point_client_at  # noqa: E402
from pipeline.localhub import LocalHub  # noqa: E402
from pipeline.space import DATASET_PATTERNS, SiteNames, publish_space, write_site  # noqa: E402

DATASET, OURS, THEIRS = "trncat/results", "trncat/catalog", "someone/catalog"


def theirs(local: LocalHub, work: Path) -> None:
    """The script a user would write: download the dataset's data and scripts, build the tree, upload the folder."""
    from huggingface_hub import HfApi, snapshot_download

    folder, tree = work / "dataset", work / "space"
    snapshot_download(DATASET, repo_type="dataset", local_dir=folder, allow_patterns=DATASET_PATTERNS)
    write_site(folder, tree, names=SiteNames(dataset_repo=DATASET, space_repo=THEIRS))
    api = HfApi(endpoint=local.url, token="localhub-token")
    api.create_repo(THEIRS, repo_type="space", space_sdk="static", exist_ok=True)
    api.upload_folder(repo_id=THEIRS, repo_type="space", folder_path=tree, commit_message="Catalog page")


def measure(local: LocalHub, step: Callable[[], object]) -> Figures:
    mark = _counting(local)
    step()
    return _since(local, mark)


def line(name: str, f: Figures) -> str:
    return (
        f"{name}: {f.seconds:.1f} s, {f.cpu:.1f} s CPU, peak +{f.peak / 2**20:.0f} MiB, {f.requests} requests, "
        f"{f.downloaded / 1e6:.2f} MB down, {f.uploaded / 1e6:.2f} MB up"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=5000)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--no-upload-folder", action="store_true", help="skip the snapshot + upload_folder pair")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)  # upload_folder's advice to install hf_xet
    with tempfile.TemporaryDirectory(prefix="space-scale-") as tmp:
        work = Path(tmp)
        seed_dataset(args.models, work / "seed")
        files = {p.relative_to(work / "seed").as_posix(): p for p in (work / "seed").rglob("*") if p.is_file()}
        print(f"dataset of {args.models} models: {len(files)} files")
        with LocalHub(work / "hub", latency_s=args.latency_ms / 1000) as local:
            restore = point_client_at(local.url, cache_dir=work / "cache")
            try:
                local.store.create_repo(DATASET, repo_type="dataset")
                local.store.commit_files(DATASET, files, message="seed", repo_type="dataset")
                hub = Hub(endpoint=local.url, token="localhub-token", cache_dir=work / "cache")
                script = next(p for p in sorted(files) if p.endswith("/run.py"))
                for n, label in enumerate(("first build", "nothing changed", "one run.py changed")):
                    if n == 2:
                        local.store.commit_files(DATASET, {script: b"# changed\n"}, repo_type="dataset")
                    ours = measure(local, lambda: publish_space(hub=hub, dataset_repo=DATASET, space_repo=OURS))
                    print(line(f"trncat page, {label}", ours))
                    if not args.no_upload_folder:
                        other = measure(local, lambda n=n: theirs(local, work / f"theirs-{n}"))
                        print(line(f"snapshot_download + upload_folder, {label}", other))
            finally:
                restore()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
