"""pipeline.hub against the local hub: listings, reads, commits, PRs, error translation, retries and rebases."""

from __future__ import annotations

import json
import logging

import pytest
from huggingface_hub import CommitOperationAdd

from pipeline.errors import (
    GatedRepoError,
    HubRateLimitError,
    HubServerError,
    ModelIdError,
    ParentMovedError,
    RepoNotFoundError,
)
from pipeline.hub import ModelListing
from pipeline.ids import is_revision, validate_model_id
from tests.support import localhub_fixtures as pytest_plugin
from tests.support.localhub_fixtures import repo_file, repo_history

localhub = pytest_plugin.localhub


def _seed_models(store, n: int) -> None:
    for i in range(n):
        tags = ["transformers"] + (["custom_code"] if i % 10 == 3 else [])
        store.create_repo(
            f"org/m{i:04d}",
            metadata={
                "pipeline_tag": "text-generation" if i % 2 else "image-text-to-text",
                "tags": tags,
                "downloads": 10 * i,
                "likes": i,
                "trendingScore": n - i,
                "gated": "auto" if i % 10 == 7 else False,
                "library_name": "transformers",
                "safetensors": {"total": 1_000_000 + i},
            },
        )


def _dataset(localhub, repo_id: str = "org/results") -> str:
    localhub.client.create_repo(repo_id, repo_type="dataset")
    return repo_id


def _ops(files: dict[str, bytes]):
    return lambda parent: [CommitOperationAdd(path, data) for path, data in files.items()]


def test_list_models_carries_everything_in_one_listing(localhub):
    _seed_models(localhub.store, 300)
    trending = localhub.client.list_models(task="text-generation", sort="trending_score", limit=50)
    downloads = localhub.client.list_models(task="text-generation", sort="downloads", limit=50)

    assert len(trending) == 50 and all(isinstance(m, ModelListing) for m in trending)
    assert trending[0].id == "org/m0001" and downloads[0].id == "org/m0299"
    top = downloads[0]
    assert top.params == 1_000_299 and top.sha and len(top.sha) == 40
    assert top.pipeline_tag == "text-generation" and top.library_name == "transformers"
    assert top.downloads == 2990 and top.likes == 299 and top.trending_score == 1
    assert top.last_modified is not None
    assert {m.id for m in downloads if m.custom_code} == {f"org/m{i:04d}" for i in range(93, 300, 10)} & {
        m.id for m in downloads
    }
    assert any(m.gated == "auto" for m in downloads) and any(m.gated is False for m in downloads)
    api_requests = [p for m, p in localhub.server.requests if p.startswith("/api/models")]
    assert len(api_requests) == 2  # one listing each, nothing per model


def test_a_listing_entry_with_null_counts_does_not_stop_the_listing(localhub):
    """A model whose safetensors total is null (a diffusers pipeline's weights live in subfolders) once made the
    whole listing fail with int(None); the Hub's JSON is untrusted: its counts are read or left empty."""
    localhub.store.create_repo("org/pipe", metadata={"pipeline_tag": "text-to-image", "safetensors": {"total": None}})
    localhub.store.create_repo("org/ok", metadata={"pipeline_tag": "text-to-image", "safetensors": {"total": 7}})
    listed = {m.id: m for m in localhub.client.list_models(task="text-to-image", sort="downloads", limit=10)}
    assert listed["org/pipe"].params is None and listed["org/ok"].params == 7


def test_model_info_config_and_params_at_a_revision(localhub):
    store = localhub.store
    store.create_repo("org/tiny", metadata={"pipeline_tag": "text-generation", "safetensors": {"total": 123}})
    old = store.commit_files("org/tiny", {"config.json": json.dumps({"model_type": "llama", "v": 1}).encode()})
    store.commit_files("org/tiny", {"config.json": json.dumps({"model_type": "llama", "v": 2}).encode()})
    client = localhub.client

    assert client.fetch_json("org/tiny", "config.json")["v"] == 2
    assert client.fetch_json("org/tiny", "config.json", revision=old)["v"] == 1
    assert client.model_info("org/tiny", revision=old).sha == old
    assert client.fetch_safetensors_params("org/tiny") == 123


def test_a_listing_and_model_info_carry_the_model_s_family(localhub):
    store = localhub.store
    store.create_repo("org/ft", metadata={"pipeline_tag": "text-generation", "library_name": "transformers"})
    card = b"---\nbase_model: [org/base, ./not-a-hub-id, org/base]\nbase_model_relation: adapter\n---\n"
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}
    store.commit_files("org/ft", {"README.md": card, "config.json": json.dumps(config).encode()})
    store.create_repo("org/odd", metadata={"pipeline_tag": "text-generation", "library_name": "transformers"})
    hostile = {"architectures": ["Llama; rm -rf /"], "model_type": "../../x"}
    store.commit_files(
        "org/odd", {"config.json": json.dumps(hostile).encode(), "README.md": b"---\nbase_model: 7\n---\n"}
    )

    [ft, odd] = sorted(
        localhub.client.list_models(task="text-generation", sort="downloads", limit=5), key=lambda m: m.id
    )
    assert (ft.architecture, ft.model_type, ft.base_model, ft.base_relation) == (
        "LlamaForCausalLM",
        "llama",
        ("org/base",),
        "adapter",
    )
    assert ft.files is None  # a listing never carries the file list
    # Untrusted names are dropped, never passed on.
    assert (odd.architecture, odd.model_type, odd.base_model) == (None, None, ())
    info = localhub.client.model_info("org/ft", files=True)
    assert info.base_model == ("org/base",) and info.files is not None and "config.json" in info.files


def test_download_snapshot_and_files(localhub, tmp_path):
    store = localhub.store
    store.create_repo("org/tiny")
    sha = store.commit_files("org/tiny", {"a.json": b"{}", "sub/b.txt": b"b", "w.safetensors": b"W" * 64})
    client = localhub.client
    assert client.download("org/tiny", "sub/b.txt", revision=sha).read_bytes() == b"b"
    folder = client.snapshot("org/tiny", local_dir=tmp_path / "snap", allow_patterns=["*.json", "sub/*"])
    assert (folder / "sub" / "b.txt").exists() and not (folder / "w.safetensors").exists()
    assert client.list_files("org/tiny", repo_type="model") == [
        ".gitattributes",
        "a.json",
        "sub/b.txt",
        "w.safetensors",
    ]
    assert client.head_sha("org/tiny", repo_type="model") == sha


def test_blob_ids_name_the_regular_files_a_revision_holds_in_batches(localhub, monkeypatch):
    from pipeline.hub import files, git_blob_id

    store, client, server = localhub.store, localhub.client, localhub.server
    store.create_repo("org/ids", repo_type="dataset")
    old = store.commit_files("org/ids", {"a.txt": b"a", "b/c.py": b"c"}, repo_type="dataset")
    store.commit_files("org/ids", {"a.txt": b"A", "w.parquet": b"P" * 64}, repo_type="dataset")
    monkeypatch.setattr(files, "PATHS_INFO_BATCH", 2)
    mark = len(server.requests)
    paths = ["a.txt", "b/c.py", "missing.txt", "w.parquet", "b"]
    ids = client.blob_ids("org/ids", paths, revision="main", repo_type="dataset")
    assert ids == {"a.txt": git_blob_id(b"A"), "b/c.py": git_blob_id(b"c")}, "LFS files and absent paths: none"
    assert server.count_requests("/paths-info/main", "POST") == 3 and len(server.requests) - mark == 3
    assert client.blob_ids("org/ids", ["a.txt"], revision=old, repo_type="dataset") == {"a.txt": git_blob_id(b"a")}


def test_head_sha_reads_the_sha_only_not_the_file_list(localhub):
    """A repo's info lists every file it holds (siblings); the branch head needs none of it (``expand=sha``)."""
    store, client, server = localhub.store, localhub.client, localhub.server
    store.create_repo("org/many", repo_type="dataset")
    sha = store.commit_files("org/many", {f"f/{i:04d}.txt": b"x" for i in range(500)}, repo_type="dataset")
    mark = len(server.sent_bytes)
    assert client.head_sha("org/many", repo_type="dataset") == sha
    assert server.requests[-1][1].endswith("/revision/main?expand=sha")
    assert sum(server.sent_bytes[mark:]) < 200, "the answer carries the sha, not 500 file names"


def test_errors_become_pipeline_errors(localhub):
    localhub.store.create_repo("org/gated", metadata={"gated": "manual"})
    localhub.store.commit_files("org/gated", {"config.json": b"{}"})
    localhub.store.create_repo("org/noconfig")
    client = localhub.client
    with pytest.raises(RepoNotFoundError, match="org/missing"):
        client.model_info("org/missing")
    with pytest.raises(GatedRepoError, match="gated"):
        client.fetch_json("org/gated", "config.json")
    with pytest.raises(RepoNotFoundError, match="config.json"):
        client.fetch_json("org/noconfig", "config.json")
    with pytest.raises(RepoNotFoundError, match="revision"):
        client.model_info("org/noconfig", revision="nope")
    assert isinstance(GatedRepoError("x"), RepoNotFoundError)
    assert localhub.sleeps == []  # none of these is retried


def test_commit_pr_push_to_open_pr_and_comment(localhub):
    repo = _dataset(localhub)
    client = localhub.client
    assert client.open_bot_prs(repo) == []
    pr = client.commit(repo, operations_factory=_ops({"data/a.txt": b"a"}), message="[trncat] results", create_pr=True)
    assert pr.pr_num == 1 and pr.created and pr.rebases == 0
    assert client.open_bot_prs(repo, author="localhub-user", title_prefix="[trncat]") == [1]
    assert client.open_bot_prs(repo, title_prefix="[other]") == []

    pushed = client.commit(repo, operations_factory=_ops({"data/b.txt": b"b"}), message="more", revision="refs/pr/1")
    assert pushed.pr_num is None and client.head_sha(repo, revision="refs/pr/1") == pushed.sha
    assert "data/a.txt" not in client.list_files(repo)  # main untouched until a maintainer merges
    client.comment(repo, 1, "Updated with run 42")
    events = localhub.store.get(repo, repo_type="dataset").discussions[0]["events"]
    assert events[-1]["data"]["latest"]["raw"].startswith("Updated with run 42\n\n<!-- trncat-op ")

    same = client.commit(repo, operations_factory=_ops({"data/b.txt": b"b"}), message="again", revision="refs/pr/1")
    assert not same.created and same.sha == pushed.sha  # nothing changed: no commit


def test_429_then_success_honours_retry_after(localhub):
    localhub.store.create_repo("org/tiny")
    localhub.server.inject(r"^/api/models/org/tiny", "GET", statuses=[429], retry_after=7)
    assert localhub.client.model_info("org/tiny").id == "org/tiny"
    assert localhub.sleeps == [7.0]


def test_500_then_success_on_commit(localhub):
    repo = _dataset(localhub)
    fault = localhub.server.inject(r"/commit/", "POST", statuses=[500])
    result = localhub.client.commit(repo, operations_factory=_ops({"a.txt": b"a"}), message="m")
    assert fault.hits == 1 and localhub.sleeps == [1.0]
    assert repo_file(localhub.store, repo, "a.txt", repo_type="dataset") == b"a"
    assert localhub.client.head_sha(repo) == result.sha


def test_retries_inside_huggingface_hub_calls_spend_the_hub_budget(localhub):
    _seed_models(localhub.store, 5)
    localhub.server.inject(r"^/api/models\?", "GET", statuses=[503, 429])
    assert len(localhub.client.list_models(task="text-generation", sort="downloads", limit=10)) == 2
    assert len(localhub.sleeps) == 2  # huggingface_hub's own backoff never ran: both waits on our clock


def test_500_forever_fails_after_the_budget_with_one_line(localhub):
    repo = _dataset(localhub)
    client = localhub.make_client(max_retries=3)
    localhub.server.inject(r"/commit/", "POST", statuses=[500], forever=True)
    with pytest.raises(HubServerError) as caught:
        client.commit(repo, operations_factory=_ops({"a.txt": b"a"}), message="m")
    message = str(caught.value)
    assert "\n" not in message and "HTTP 500" in message and "after 4 attempts" in message
    assert localhub.server.count_requests(r"/commit/", "POST") == 4
    assert localhub.sleeps == [1.0, 2.0, 4.0]  # capped exponential backoff
    assert "a.txt" not in client.list_files(repo)


def test_rate_limit_forever_on_listing_is_one_budget(localhub):
    _seed_models(localhub.store, 3)
    client = localhub.make_client(max_retries=2)
    localhub.server.inject(r"^/api/models\?", "GET", statuses=[429], forever=True)
    with pytest.raises(HubRateLimitError, match="429"):
        client.list_models(task="text-generation", sort="downloads", limit=10)
    # huggingface_hub would retry listing pages itself; inside a Hub call only the Hub's budget counts.
    assert localhub.server.count_requests(r"^/api/models\?") == 3


def test_moved_parent_is_rebuilt_on_the_new_head(localhub):
    repo = _dataset(localhub)
    hook = localhub.server.move_branch_before_commit(repo, count=1)
    parents: list[str] = []

    def factory(parent: str):
        parents.append(parent)
        return [CommitOperationAdd("data/new.txt", f"built on {parent}".encode())]

    result = localhub.client.commit(repo, operations_factory=factory, message="publish")
    assert hook.hits == 1 and result.rebases == 1
    assert len(set(parents)) == 2  # rebuilt with the moved head
    head = repo_history(localhub.store, repo, repo_type="dataset")[0]
    assert head["sha"] == result.sha and head["parent"] == parents[-1]
    tree = head["tree"]
    assert "concurrent/1.txt" in tree  # the concurrent commit is kept, not overwritten
    assert repo_file(localhub.store, repo, "data/new.txt", repo_type="dataset") == f"built on {parents[-1]}".encode()


def test_parent_that_keeps_moving_gives_parent_moved_error(localhub):
    repo = _dataset(localhub)
    localhub.server.move_branch_before_commit(repo, count=100)
    client = localhub.make_client(max_rebases=2)
    with pytest.raises(ParentMovedError, match="moved 3 times"):
        client.commit(repo, operations_factory=_ops({"a.txt": b"a"}), message="m")


def test_validate_model_id():
    assert validate_model_id("Qwen/Qwen2.5-0.5B-Instruct") == "Qwen/Qwen2.5-0.5B-Instruct"
    for bad in ["gpt2", "org/name/extra", "org/-name", "org/name.", "org/a--b", "org/a..b", "org/" + "x" * 97]:
        with pytest.raises(ModelIdError):
            validate_model_id(bad)
    # `$` matched before a trailing newline (issue 11.15): "org/name\n" reached paths and shell lines
    for bad in ["org/name\n", "org/name\r\n", "\norg/name"]:
        with pytest.raises(ModelIdError):
            validate_model_id(bad)
    assert not is_revision("0" * 40 + "\n") and is_revision("0" * 40)


def test_the_transport_adapter_is_what_huggingface_hub_sends_through(localhub, monkeypatch):
    """Fails loudly when huggingface_hub stops building its shared client from the factory, or moves its hook."""
    from huggingface_hub import constants as hf_constants
    from huggingface_hub import get_session
    from huggingface_hub.errors import OfflineModeIsEnabled

    from pipeline.hub import transport

    localhub.store.create_repo("org/tiny")
    # huggingface_hub's shared client sends through the adapter (its private attribute: what this test pins).
    assert isinstance(getattr(get_session(), "_transport", None), transport.BudgetTransport)
    # Outside a Hub call the adapter is transparent: huggingface_hub's own answer comes back.

    assert get_session().get(f"{localhub.url}/api/models/org/tiny").status_code == 200
    # huggingface_hub's request hook still runs (offline mode blocks the request before it is sent).
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(OfflineModeIsEnabled):
        get_session().get(f"{localhub.url}/api/models/org/tiny")


def test_a_network_error_is_retried_on_the_budget_then_one_line(tmp_path):
    import socket

    from pipeline.errors import HubError
    from pipeline.hub import Hub

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps: list[float] = []
    client = Hub(endpoint=f"http://127.0.0.1:{port}", token="t", sleep=sleeps.append, max_retries=2)
    with pytest.raises(HubError, match="cannot reach the Hub after 3 attempts") as caught:
        client.model_info("org/tiny")
    assert "\n" not in str(caught.value) and sleeps == [1.0, 2.0]


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_no_hub_reachable_is_said_before_the_retries(tmp_path):
    """Issue 37: nothing listening at the endpoint is said at once, with how long the retries will take."""
    import socket

    from pipeline.errors import HubError
    from pipeline.hub import Hub

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps: list[float] = []
    client = Hub(endpoint=f"http://127.0.0.1:{port}", token="t", sleep=sleeps.append, max_retries=5)
    lines = _Lines()
    logger = logging.getLogger("pipeline.hub")  # its own handler: the CLI's tests turn propagation off
    logger.addHandler(lines)
    try:
        with pytest.raises(HubError):
            client.model_info("org/tiny")
    finally:
        logger.removeHandler(lines)
    first = lines.lines[0]
    assert f"no answer from the Hub at http://127.0.0.1:{port}" in first and "is it reachable?" in first
    assert "retrying 5 times over about 31 s" in first  # 1 + 2 + 4 + 8 + 16
    assert sum(sleeps) == 31.0 and len(lines.lines) == 5
