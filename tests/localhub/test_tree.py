"""The local hub's trees: a commit costs what it changes, a listing pages from a cursor (issues 29.19, 36)."""

from __future__ import annotations

import json
import random

import httpx2
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi

from pipeline.localhub import LocalHubStore
from tests.support import localhub_fixtures as pytest_plugin

localhub = pytest_plugin.localhub


class _Path(str):
    """A path that counts how often it is ordered against another (sorting or searching the tree)."""

    __slots__ = ()
    compared = 0

    def __lt__(self, other: object) -> bool:
        _Path.compared += 1
        return str.__lt__(self, other)  # type: ignore[operator]


def _seed(store: LocalHubStore, files: int, *, repo: str = "org/big") -> list[str]:
    store.create_repo(repo, repo_type="dataset")
    paths = [f"data/{i % 7}/{i % 13}/f{i:05d}.json" for i in range(files)] + [f"top{i}.txt" for i in range(5)]
    random.Random(29).shuffle(paths)
    store.commit_files(repo, {_Path(p): p.encode() for p in paths}, repo_type="dataset")
    return paths


def test_a_commit_stores_what_it_changes_not_the_whole_tree(tmp_path):
    """Issue 29.19: each commit wrote its repo's whole tree (9.4 s p50 per commit at 50 clients)."""
    store = LocalHubStore(tmp_path)
    _seed(store, 2000)
    repo = store.get("org/big", repo_type="dataset")
    commits = repo.path / "commits"
    before = {p.name for p in commits.iterdir()}
    _Path.compared = 0
    sha = store.commit_files("org/big", {"data/new.json": b"new"}, repo_type="dataset", deletions=("top0.txt",))
    (written,) = [p for p in commits.iterdir() if p.name not in before]
    assert written.stat().st_size < 2000  # the change, not 2,006 entries (about 300 KB)
    assert _Path.compared < 2000  # the chunks it touches; a sort of the whole tree is about 20,000
    assert json.loads(written.read_text())["changes"].keys() == {"data/new.json", "top0.txt"}
    tree = repo.tree(sha)
    assert "data/new.json" in tree and "top0.txt" not in tree and len(tree) == 2006
    parent = repo.tree(repo.commits[sha]["parent"])
    assert "data/new.json" not in parent and "top0.txt" in parent  # the parent's tree is unchanged
    reopened = LocalHubStore(tmp_path).get("org/big", repo_type="dataset")
    assert dict(reopened.tree(sha)) == dict(tree) and dict(reopened.tree(repo.commits[sha]["parent"])) == dict(parent)


def test_a_reopened_root_merges_a_pr_beside_main_s_own_changes(tmp_path):
    store = LocalHubStore(tmp_path)
    store.create_repo("org/ds", repo_type="dataset")
    num = store.open_pull_request(store.get("org/ds", repo_type="dataset"), title="t", author="a")
    store.commit_files("org/ds", {"a.txt": b"pr"}, repo_type="dataset", branch=f"refs/pr/{num}")
    reopened = LocalHubStore(tmp_path)  # the trees rebuilt from each commit's changes, the PR's base kept
    assert set(reopened.get("org/ds", repo_type="dataset").tree("main")) == {".gitattributes"}
    repo = reopened.get("org/ds", repo_type="dataset")
    reopened.commit_files("org/ds", {"b.txt": b"main"}, repo_type="dataset")
    reopened.merge_pull_request(repo, num, author="a")
    assert set(repo.tree("main")) == {".gitattributes", "a.txt", "b.txt"}


def test_a_listing_pages_from_a_cursor_and_never_sorts_the_tree_again(localhub):
    """Issue 36: each page rebuilt and sorted the whole tree (30,013 files: 31 pages, 36 s)."""
    paths = _seed(localhub.store, 2500)
    api = HfApi(endpoint=localhub.url, token="localhub-token")
    _Path.compared = 0
    entries = list(api.list_repo_tree("org/big", repo_type="dataset", recursive=True))
    assert _Path.compared < 1000  # a lookup per page; a sort per page is about 30,000 per page
    pages = localhub.server.count_requests(r"/tree/main")
    files = [e.path for e in entries if e.__class__.__name__ == "RepoFile"]
    folders = [e.path for e in entries if e.__class__.__name__ == "RepoFolder"]
    assert pages == 3 and files == sorted([*paths, ".gitattributes"])
    assert sorted(folders) == [
        "data",
        *sorted({p.rsplit("/", 1)[0] for p in paths if "/" in p} | {f"data/{i}" for i in range(7)}),
    ]
    assert len(set(folders)) == len(folders)
    top = [e.path for e in api.list_repo_tree("org/big", repo_type="dataset")]
    assert sorted(top) == sorted(["data", ".gitattributes", *(f"top{i}.txt" for i in range(5))])
    under = [e.path for e in api.list_repo_tree("org/big", path_in_repo="data/3", repo_type="dataset")]
    assert under == [f"data/3/{i}" for i in sorted(range(13), key=str)]


def test_a_listing_is_whole_at_any_page_size_and_folders_come_once(localhub):
    paths = ["a-b", "a/x/1", "a/x/2", "a/y", "a0", "b/c/d/e", "b/c/f", "z"]
    localhub.store.create_repo("org/small", repo_type="dataset")
    localhub.store.commit_files("org/small", {p: b"x" for p in paths}, repo_type="dataset")
    whole = [e["path"] for e in _pages(localhub, "org/small", 1000)]
    assert whole == [".gitattributes", "a-b", "a", "a/x", "a/x/1", "a/x/2", "a/y", "a0", "b", "b/c", "b/c/d",
                     "b/c/d/e", "b/c/f", "z"]  # fmt: skip
    for size in (1, 2, 3):
        assert [e["path"] for e in _pages(localhub, "org/small", size)] == whole
    # a cursor no listing made is refused, not a server error
    answer = httpx2.get(f"{localhub.url}/api/datasets/org/small/tree/main?recursive=1&cursor=bm9wZQ")
    assert answer.status_code == 400


def _pages(localhub, repo: str, size: int) -> list[dict]:
    out: list[dict] = []
    url: str | None = f"{localhub.url}/api/datasets/{repo}/tree/main?recursive=1&limit={size}"
    while url:
        answer = httpx2.get(url)
        assert answer.status_code == 200
        out += answer.json()
        link = answer.headers.get("link")
        url = link.split(">", 1)[0][1:] if link else None
    return out


def test_a_deleted_folder_and_a_merge_touch_only_their_paths(localhub):
    paths = _seed(localhub.store, 600, repo="org/m")
    api = HfApi(endpoint=localhub.url, token="localhub-token")
    api.create_commit("org/m", [CommitOperationDelete("data/3/")], commit_message="rm", repo_type="dataset",
                      create_pr=True)  # fmt: skip
    api.create_commit("org/m", [CommitOperationAdd("added.txt", b"a")], commit_message="add", repo_type="dataset")
    api.merge_pull_request("org/m", 1, repo_type="dataset")
    left = set(api.list_repo_files("org/m", repo_type="dataset"))
    assert left == {".gitattributes", "added.txt", *(p for p in paths if not p.startswith("data/3/"))}
