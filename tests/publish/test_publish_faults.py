"""Publishing through faults: two publishes at once (issue 29.13), and a faulty network that fails each request of
one publish in turn (issue 29's must-hold: 429, 503, a connection dropped after the Hub applied the request, a
stall past the client's timeout). After each, every record is in the dataset's open PR exactly once, and exactly
one PR is open.
"""

from __future__ import annotations

import io
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from pipeline import constants
from pipeline.hub import Hub, point_client_at
from pipeline.localhub import LocalHub, LocalHubStore
from pipeline.publish import publish
from tests.support.fault_proxy import FAULT_KINDS, FaultKind, FaultProxy
from tests.support.localhub_fixtures import PROXY_READ_TIMEOUT_S, repo_file
from tests.support.records import sample_failure, sample_record

REPO = "trncat/results"


def _open_prs(store: LocalHubStore) -> list[int]:
    repo = store.get(REPO, repo_type="dataset")
    return [d["num"] for d in repo.discussions if d["isPullRequest"] and d["status"] == "open"]


def _result_rows(store: LocalHubStore, revision: str) -> Counter[str]:
    """How many rows of each model the results files at ``revision`` hold (a record is one row)."""
    tree = store.get(REPO, repo_type="dataset").tree(revision)
    frames = [
        pd.read_parquet(io.BytesIO(repo_file(store, REPO, path, revision=revision, repo_type="dataset")))
        for path in sorted(tree)
        if path.startswith("data/results/")
    ]
    return Counter(pd.concat(frames).model_id) if frames else Counter()


def _latest_rows(store: LocalHubStore, revision: str) -> Counter[str]:
    tree = store.get(REPO, repo_type="dataset").tree(revision)
    frames = [
        pd.read_parquet(io.BytesIO(repo_file(store, REPO, path, revision=revision, repo_type="dataset")))
        for path in sorted(tree)
        if path.startswith("data/latest/")
    ]
    return Counter(pd.concat(frames).model_id)


def test_two_publishes_at_once_end_in_one_pr_holding_every_record(localhub) -> None:
    """Issue 29.13: with no open bot PR, two publishes at once both opened a PR; merging one made the other conflict,
    and a re-run said "nothing to publish" since the stuck PR held its records. The newer PR now folds into the
    older one: one open PR, every record in it once, and once merged, on main once."""
    store, server = localhub.store, localhub.server
    store.create_repo(REPO, repo_type="dataset")
    other: dict[str, object] = {}

    def concurrent(_server: object) -> None:  # the other publish runs while ours is about to open its PR
        other["result"] = publish([sample_failure(model_id="acme/broken")], repo=REPO, hub=localhub.make_client())

    hook = server.on_request(r"/commit/main\?create_pr=", "POST", concurrent)
    ours = publish([sample_record()], repo=REPO, hub=localhub.client)
    assert hook.hits == 1 and getattr(other["result"], "pr_num", None) == 1
    assert _open_prs(store) == [1] and ours.pr_num == 1 and ours.published
    assert _result_rows(store, "refs/pr/1") == Counter({"trncat-demo/tiny-llama": 1, "acme/broken": 1})
    closed = store.get(REPO, repo_type="dataset").discussions[1]
    assert closed["status"] == "closed"
    assert any("Folded into #1" in e["data"]["latest"]["raw"] for e in closed["events"] if e["type"] == "comment")

    store.merge_pull_request(store.get(REPO, repo_type="dataset"), 1, author="maintainer")
    assert _result_rows(store, "main") == Counter({"trncat-demo/tiny-llama": 1, "acme/broken": 1})
    again = publish([sample_record(), sample_failure(model_id="acme/broken")], repo=REPO, hub=localhub.client)
    assert not again.published and _open_prs(store) == []


# -- the must-hold: each request of one publish, failed in turn --------------------------------------------------

SEEDED = [sample_record()]
NEW = [sample_failure(model_id="acme/broken"), sample_failure(model_id="acme/other", stage="load", code="oom")]


@pytest.fixture(scope="module")
def seeded_hub(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local hub's folder whose dataset holds one merged publish (summary, latest view, scripts, card)."""
    root = tmp_path_factory.mktemp("seeded") / "hub"
    with LocalHub(root) as hub:
        restore = point_client_at(hub.url, cache_dir=root.parent / "cache")
        try:
            hub.store.create_repo(REPO, repo_type="dataset")
            client = Hub(endpoint=hub.url, token="localhub-token", sleep=lambda s: None, cache_dir=root.parent / "c")
            assert publish(SEEDED, repo=REPO, hub=client).pr_num == 1
            hub.store.merge_pull_request(hub.store.get(REPO, repo_type="dataset"), 1, author="maintainer")
        finally:
            restore()
    return root


@pytest.fixture
def short_timeouts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(constants, "TRNCAT_HUB_READ_TIMEOUT_S", PROXY_READ_TIMEOUT_S)
    monkeypatch.setattr(constants, "TRNCAT_HUB_CONNECT_TIMEOUT_S", PROXY_READ_TIMEOUT_S)


class _Run:
    """One publish of NEW onto a fresh copy of the seeded hub, through a proxy that fails request ``at``."""

    def __init__(self, seeded: Path, folder: Path) -> None:
        shutil.copytree(seeded, folder)
        self.hub = LocalHub(folder)
        self.proxy = FaultProxy(self.hub.url, hold_s=30.0)
        self._restore = point_client_at(self.proxy.url, cache_dir=folder.parent / f"{folder.name}-cache")
        self.client = Hub(endpoint=self.proxy.url, token="localhub-token", sleep=lambda s: None, max_retries=8,
                          base_delay=0.01, cache_dir=folder.parent / f"{folder.name}-cache")  # fmt: skip

    def close(self) -> None:
        self._restore()
        self.proxy.stop()
        self.hub.stop()


@pytest.fixture
def runs(seeded_hub: Path, tmp_path: Path, short_timeouts: None) -> Iterator[list[_Run]]:
    made: list[_Run] = []
    yield made
    for run in made:
        run.close()


@pytest.mark.slow
@pytest.mark.timeout(900)  # about 20 publishes each, a stall costs the client's timeout: a loaded machine stretches it
@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_each_request_of_a_publish_failed_in_turn_leaves_every_record_once_in_one_pr(
    kind: FaultKind, seeded_hub: Path, tmp_path: Path, runs: list[_Run]
) -> None:
    """Issue 29 (must hold): a fault on request i of a publish, for every i. Every record is in the one open PR
    exactly once (results and latest view), main is untouched, and a stall ends at the client's timeout."""
    clean = _Run(seeded_hub, tmp_path / "clean")
    runs.append(clean)
    main_head = clean.hub.store.get(REPO, repo_type="dataset").refs["main"]
    assert publish(NEW, repo=REPO, hub=clean.client).pr_num == 2
    requests = len(clean.proxy.requests)
    assert requests >= 15, clean.proxy.requests  # the head, the PRs, the mirror, preupload, LFS, the commit
    want = Counter({"trncat-demo/tiny-llama": 1, "acme/broken": 1, "acme/other": 1})
    for index in range(requests):
        run = _Run(seeded_hub, tmp_path / f"run-{index}")
        runs.append(run)
        fault = run.proxy.fail(kind, at=index)
        result = publish(NEW, repo=REPO, hub=run.client)
        store, hit = run.hub.store, run.proxy.requests[index]
        assert fault.hits == 1, hit
        assert result.published and _open_prs(store) == [result.pr_num] == [2], (hit, _open_prs(store))
        assert _result_rows(store, "refs/pr/2") == want, hit
        assert _latest_rows(store, "refs/pr/2") == want, hit
        assert store.get(REPO, repo_type="dataset").refs["main"] == main_head, hit
        if kind == "stall":
            assert run.proxy.settle() == 1, f"{hit}: the client hung up at its timeout"
        run.close()
        runs.remove(run)
