"""huggingface_hub, unmodified, against the local hub: the protocol subset pipeline.hub relies on."""

from __future__ import annotations

import hashlib
import json
import socket
from pathlib import Path

import httpx2
import pytest
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi, hf_hub_download
from huggingface_hub import errors as hf_errors

from pipeline.errors import StoreError
from pipeline.hub import point_client_at
from pipeline.localhub import LocalHub, LocalHubStore
from pipeline.localhub.storage import git_blob_sha
from tests.support import localhub_fixtures as pytest_plugin
from tests.support.localhub_fixtures import repo_file, repo_history

localhub = pytest_plugin.localhub


def _api(localhub) -> HfApi:
    return HfApi(endpoint=localhub.url, token="localhub-token")


def _models_requests(localhub) -> list[str]:
    return [p for m, p in localhub.server.requests if m == "GET" and p.startswith("/api/models?")]


def test_listing_follows_link_pagination_with_the_expected_request_count(localhub):
    for i in range(2500):
        tag = "text-generation" if i % 5 else "image-text-to-text"
        meta = {"pipeline_tag": tag, "downloads": i, "trendingScore": (i * 7919) % 2500, "safetensors": {"total": i}}
        localhub.store.create_repo(f"org/m{i:04d}", metadata=meta)

    models = list(
        _api(localhub).list_models(
            pipeline_tag="text-generation", sort="downloads", limit=1200, expand=["sha", "safetensors", "downloads"]
        )
    )

    assert len(models) == 1200
    assert [m.downloads for m in models] == sorted((m.downloads for m in models), reverse=True)
    assert models[0].id == "org/m2499" and models[0].safetensors.total == 2499
    assert all(len(m.sha) == 40 for m in models)
    requests = _models_requests(localhub)
    assert len(requests) == 2  # 1,000 per page: the second page comes from the Link header
    assert "cursor=1000" in requests[1] and "expand=sha" in requests[1]


def test_listing_filters_tags_and_expand_limits_fields(localhub):
    localhub.store.create_repo("org/a", metadata={"pipeline_tag": "text-generation", "tags": ["custom_code"]})
    localhub.store.create_repo("org/b", metadata={"pipeline_tag": "text-generation", "tags": ["transformers"]})
    response = httpx2.get(f"{localhub.url}/api/models", params={"filter": "custom_code", "expand[]": "tags"})
    assert response.status_code == 200
    assert response.json() == [{"_id": "org/a", "id": "org/a", "tags": ["custom_code"]}]


def test_model_info_and_download_at_a_revision(localhub, tmp_path):
    store = localhub.store
    store.create_repo("org/tiny", metadata={"pipeline_tag": "text-generation", "safetensors": {"total": 42}})
    old = store.commit_files("org/tiny", {"config.json": b'{"v": 1}'})
    new = store.commit_files("org/tiny", {"config.json": b'{"v": 2}', "extra.txt": b"x"})
    api = _api(localhub)

    assert api.model_info("org/tiny").sha == new
    info = api.model_info("org/tiny", revision=old)
    assert info.sha == old and {s.rfilename for s in info.siblings} == {".gitattributes", "config.json"}
    assert info.safetensors.total == 42

    old_path = hf_hub_download("org/tiny", "config.json", revision=old, endpoint=localhub.url, cache_dir=tmp_path)
    new_path = hf_hub_download("org/tiny", "config.json", endpoint=localhub.url, cache_dir=tmp_path)
    assert json.loads(Path(old_path).read_text()) == {"v": 1}
    assert json.loads(Path(new_path).read_text()) == {"v": 2}


def test_resolve_headers_and_range(localhub):
    localhub.store.create_repo("org/tiny")
    data = bytes(range(256)) * 4
    sha = localhub.store.commit_files("org/tiny", {"notes.txt": data, "w.safetensors": b"S" * 100})
    url = f"{localhub.url}/org/tiny/resolve/main"

    head = httpx2.head(f"{url}/notes.txt")
    assert head.headers["X-Repo-Commit"] == sha
    assert head.headers["ETag"] == f'"{git_blob_sha(data)}"'
    assert head.headers["Content-Length"] == str(len(data))
    lfs = httpx2.head(f"{url}/w.safetensors")
    assert lfs.headers["X-Linked-Etag"] == f'"{hashlib.sha256(b"S" * 100).hexdigest()}"'
    assert lfs.headers["X-Linked-Size"] == "100"

    part = httpx2.get(f"{url}/notes.txt", headers={"Range": "bytes=10-19"})
    assert part.status_code == 206 and part.content == data[10:20]
    assert part.headers["Content-Range"] == f"bytes 10-19/{len(data)}"
    assert httpx2.get(f"{url}/notes.txt", headers={"Range": "bytes=-5"}).content == data[-5:]
    assert httpx2.get(f"{url}/notes.txt", headers={"Range": "bytes=5000-"}).status_code == 416
    missing = httpx2.get(f"{url}/nope.txt")
    assert missing.status_code == 404 and missing.headers["X-Error-Code"] == "EntryNotFound"


def test_small_file_commit_builds_history(localhub):
    api = _api(localhub)
    api.create_repo("org/ds", repo_type="dataset", exist_ok=True)
    first = api.create_commit(
        "org/ds", [CommitOperationAdd("a.txt", b"hello")], commit_message="add a", repo_type="dataset"
    )
    second = api.create_commit(
        "org/ds",
        [CommitOperationAdd("b/c.txt", b"world"), CommitOperationDelete("a.txt")],
        commit_message="add b/c, drop a",
        repo_type="dataset",
    )
    history = repo_history(localhub.store, "org/ds", repo_type="dataset")
    assert [c["sha"] for c in history[:2]] == [second.oid, first.oid]
    assert history[0]["parent"] == first.oid and history[0]["message"] == "add b/c, drop a"
    assert api.list_repo_files("org/ds", repo_type="dataset") == [".gitattributes", "b/c.txt"]
    assert repo_file(localhub.store, "org/ds", "b/c.txt", repo_type="dataset") == b"world"
    assert not any("/lfs" in p for _, p in localhub.server.requests)  # small text files go inline


def test_lfs_commit_goes_through_batch_upload_and_verify(localhub, tmp_path):
    api = _api(localhub)
    api.create_repo("org/ds", repo_type="dataset")
    big = tmp_path / "big.bin.txt"
    big.write_bytes(b"\x00\x01" * (5 * 1024 * 1024 + 10))  # > 10 MB: LFS whatever the name
    parquet = b"PAR1" + b"rows" * 50 + b"PAR1"
    info = api.create_commit(
        "org/ds",
        [CommitOperationAdd("data/results/x.parquet", parquet), CommitOperationAdd("big.txt", big)],
        commit_message="lfs",
        repo_type="dataset",
    )
    paths = [p for _, p in localhub.server.requests]
    assert any(p.endswith(".git/info/lfs/objects/batch") for p in paths)
    assert sum(p.startswith("/lfs-upload/") for p in paths) == 2
    assert sum(p.startswith("/lfs-verify/") for p in paths) == 2
    tree = localhub.store.get("org/ds", repo_type="dataset").tree(info.oid)
    assert tree["data/results/x.parquet"]["lfs"] and tree["big.txt"]["lfs"]
    files = {f.path: f for f in api.list_repo_tree("org/ds", repo_type="dataset", recursive=True) if f.path != "data"}
    assert files["big.txt"].lfs.size == big.stat().st_size
    got = hf_hub_download("org/ds", "data/results/x.parquet", repo_type="dataset", endpoint=localhub.url,
                          cache_dir=tmp_path / "c")  # fmt: skip
    assert Path(got).read_bytes() == parquet
    # Same content again: the batch answer has no upload action, nothing is sent twice.
    api.create_commit(
        "org/ds", [CommitOperationAdd("copy.parquet", parquet)], commit_message="again", repo_type="dataset"
    )
    assert sum(p.startswith("/lfs-upload/") for _, p in localhub.server.requests) == 2


def test_pull_request_push_to_it_and_discussions(localhub):
    api = _api(localhub)
    api.create_repo("org/ds", repo_type="dataset")
    main_before = api.dataset_info("org/ds").sha
    pr = api.create_commit(
        "org/ds", [CommitOperationAdd("r.txt", b"1")], commit_message="Results", repo_type="dataset", create_pr=True
    )
    assert pr.pr_num == 1 and pr.pr_revision == "refs/pr/1"
    pushed = api.create_commit(
        "org/ds", [CommitOperationAdd("r2.txt", b"2")], commit_message="More", repo_type="dataset",
        revision="refs/pr/1",
    )  # fmt: skip
    assert api.dataset_info("org/ds").sha == main_before  # main untouched
    assert api.dataset_info("org/ds", revision="refs/pr/1").sha == pushed.oid
    assert set(api.list_repo_files("org/ds", repo_type="dataset", revision="refs/pr/1")) >= {"r.txt", "r2.txt"}

    discussions = list(api.get_repo_discussions("org/ds", repo_type="dataset", discussion_status="open"))
    assert [(d.num, d.title, d.is_pull_request, d.status) for d in discussions] == [(1, "Results", True, "open")]
    comment = api.comment_discussion("org/ds", 1, "looks good", repo_type="dataset")
    assert comment.content == "looks good"
    details = api.get_discussion_details("org/ds", 1, repo_type="dataset")
    assert [e.type for e in details.events] == ["comment", "commit", "commit", "comment"]

    localhub.store.set_discussion_status("org/ds", 1, "closed")
    assert list(api.get_repo_discussions("org/ds", repo_type="dataset", discussion_status="open")) == []


def test_stale_parent_commit_is_refused_with_412(localhub):
    api = _api(localhub)
    api.create_repo("org/ds", repo_type="dataset")
    parent = api.dataset_info("org/ds").sha
    localhub.store.commit_files("org/ds", {"other.txt": b"x"}, repo_type="dataset")
    with pytest.raises(hf_errors.HfHubHTTPError) as caught:
        api.create_commit(
            "org/ds", [CommitOperationAdd("a.txt", b"a")], commit_message="m", repo_type="dataset",
            parent_commit=parent,
        )  # fmt: skip
    assert caught.value.response.status_code == 412


def test_errors_are_hub_shaped(localhub, tmp_path):
    api = _api(localhub)
    localhub.store.create_repo("org/gated", metadata={"gated": "manual"})
    with pytest.raises(hf_errors.RepositoryNotFoundError):
        api.model_info("org/missing")
    with pytest.raises(hf_errors.RevisionNotFoundError):
        api.model_info("org/gated", revision="nope")
    with pytest.raises(hf_errors.GatedRepoError):
        hf_hub_download("org/gated", ".gitattributes", endpoint=localhub.url, cache_dir=tmp_path)
    assert api.model_info("org/gated").gated == "manual"  # listing data stays public


def test_fault_injection_and_request_log(localhub):
    localhub.store.create_repo("org/tiny")
    fault = localhub.server.inject(r"^/api/models/org/tiny", "GET", statuses=[429, 503], retry_after=3)
    url = f"{localhub.url}/api/models/org/tiny"
    first, second, third = httpx2.get(url), httpx2.get(url), httpx2.get(url)
    assert (first.status_code, second.status_code, third.status_code) == (429, 503, 200)
    assert first.headers["Retry-After"] == "3" and fault.hits == 2
    assert localhub.server.count_requests(r"^/api/models/org/tiny", "GET") == 3

    forever = localhub.server.inject(r"/api/whoami", statuses=[500], forever=True)
    assert all(httpx2.get(f"{localhub.url}/api/whoami-v2").status_code == 500 for _ in range(4))
    assert forever.hits == 4
    localhub.server.clear_faults()
    assert httpx2.get(f"{localhub.url}/api/whoami-v2").json()["name"] == "localhub-user"


def test_store_survives_a_restart(tmp_path):
    store = LocalHubStore(tmp_path)
    store.create_repo("org/ds", repo_type="dataset", metadata={"likes": 3})
    sha = store.commit_files("org/ds", {"a.txt": b"a"}, repo_type="dataset")
    reopened = LocalHubStore(tmp_path)
    repo = reopened.get("org/ds", repo_type="dataset")
    assert repo.refs["main"] == sha and repo.meta["likes"] == 3
    assert repo_file(reopened, "org/ds", "a.txt", repo_type="dataset") == b"a"


def test_a_pull_request_merges_into_main_and_refs_list_branches_and_prs(localhub):
    api = _api(localhub)
    api.create_repo("org/ds", repo_type="dataset")
    api.create_commit(
        "org/ds", [CommitOperationAdd("a.txt", b"pr")], commit_message="PR", repo_type="dataset", create_pr=True
    )
    localhub.store.commit_files("org/ds", {"b.txt": b"main moved"}, repo_type="dataset")  # main moves meanwhile
    refs = api.list_repo_refs("org/ds", repo_type="dataset", include_pull_requests=True)
    assert [b.name for b in refs.branches] == ["main"] and [p.ref for p in refs.pull_requests] == ["refs/pr/1"]
    assert api.list_repo_refs("org/ds", repo_type="dataset").pull_requests is None

    api.merge_pull_request("org/ds", 1, repo_type="dataset", comment="thanks")

    assert set(api.list_repo_files("org/ds", repo_type="dataset")) == {".gitattributes", "a.txt", "b.txt"}
    details = api.get_discussion_details("org/ds", 1, repo_type="dataset")
    assert details.status == "merged" and details.events[-1].type == "status-change"
    assert api.list_repo_refs("org/ds", repo_type="dataset").branches[0].target_commit == api.dataset_info("org/ds").sha
    with pytest.raises(hf_errors.HfHubHTTPError) as caught:  # merged once: not again
        api.merge_pull_request("org/ds", 1, repo_type="dataset")
    assert caught.value.response.status_code == 400


def test_a_merge_that_conflicts_with_main_is_refused_and_changes_nothing(localhub):
    api = _api(localhub)
    api.create_repo("org/ds", repo_type="dataset")
    api.create_commit(
        "org/ds", [CommitOperationAdd("a.txt", b"pr")], commit_message="PR", repo_type="dataset", create_pr=True
    )
    localhub.store.commit_files("org/ds", {"a.txt": b"main"}, repo_type="dataset")
    head = api.dataset_info("org/ds").sha
    with pytest.raises(hf_errors.HfHubHTTPError) as caught:
        api.merge_pull_request("org/ds", 1, repo_type="dataset")
    assert caught.value.response.status_code == 409
    assert api.dataset_info("org/ds").sha == head
    api.change_discussion_status("org/ds", 1, "closed", repo_type="dataset")
    assert api.get_discussion_details("org/ds", 1, repo_type="dataset").status == "closed"


def test_a_static_space_is_created_committed_and_downloaded(localhub, tmp_path):
    api = _api(localhub)
    api.create_repo("org/page", repo_type="space", space_sdk="static")
    api.upload_file(path_or_fileobj=b"<p>hi</p>", path_in_repo="index.html", repo_id="org/page", repo_type="space")
    assert api.space_info("org/page").sha == api.list_repo_refs("org/page", repo_type="space").branches[0].target_commit
    path = hf_hub_download("org/page", "index.html", repo_type="space", cache_dir=tmp_path / "c")
    assert Path(path).read_bytes() == b"<p>hi</p>"


# -- attacks (issue 11.13, 11.14) --------------------------------------------------------------------------


def _post(url: str, body: bytes, *, headers: dict[str, str] | None = None) -> httpx2.Response:
    return httpx2.post(url, content=body, headers=headers or {}, timeout=10)


def test_an_lfs_oid_never_becomes_a_path_outside_the_hub_root(localhub, tmp_path):
    """Committing ``lfsFile`` with oid ``../../secret`` and resolving it returned a file outside the root;
    lfs-verify answered 200/404 for any path (an existence oracle)."""
    secret = tmp_path / "secret.txt"
    secret.write_text("id_rsa contents")
    localhub.store.create_repo("org/victim")
    escape = "../" * 12 + str(secret).lstrip("/")
    lines = [
        {"key": "header", "value": {"summary": "x"}},
        {"key": "lfsFile", "value": {"path": "w.bin", "algo": "sha256", "oid": escape, "size": 15}},
    ]
    answer = _post(f"{localhub.url}/api/models/org/victim/commit/main", "\n".join(map(json.dumps, lines)).encode())
    assert answer.status_code == 400 and "64 hex" in answer.json()["error"]
    assert "w.bin" not in localhub.store.get("org/victim").tree("main")
    got = httpx2.get(f"{localhub.url}/org/victim/resolve/main/w.bin", timeout=10)
    assert got.status_code == 404 and b"id_rsa" not in got.content
    for oid in (escape, str(secret), "A" * 64, "0" * 63):
        verify = _post(f"{localhub.url}/lfs-verify/{'0' * 64}", json.dumps({"oid": oid, "size": 15}).encode())
        assert verify.status_code == 400, oid
        batch = _post(f"{localhub.url}/org/victim.git/info/lfs/objects/batch",
                      json.dumps({"operation": "upload", "objects": [{"oid": oid, "size": 1}]}).encode())  # fmt: skip
        assert batch.status_code == 400, oid
    upload = httpx2.put(f"{localhub.url}/lfs-upload/{'A' * 64}", content=b"x", timeout=10)
    assert upload.status_code == 400 and "64 hex" in upload.json()["error"]
    assert not any((localhub.store.root / "tmp").glob("*"))  # refused before anything is written
    with pytest.raises(StoreError):
        localhub.store.blob_path("../x")


def test_repo_ids_stay_inside_the_root(localhub):
    for org, name in (("..", ".."), ("org", ".."), ("org", "."), ("a", "b\\..\\c")):
        answer = _post(f"{localhub.url}/api/repos/create", json.dumps({"organization": org, "name": name}).encode())
        assert answer.status_code == 400, (org, name)
    assert not (localhub.store.root / "meta.json").exists()


def test_request_bodies_are_capped(tmp_path):
    with LocalHub(tmp_path) as hub:
        hub.server.max_body = 1024
        assert _post(f"{hub.url}/api/repos/create", b"{" + b" " * 2048 + b"}").status_code == 413
        chunked = httpx2.post(f"{hub.url}/api/repos/create", content=iter([b"x" * 600, b"y" * 600]), timeout=10)
        assert chunked.status_code == 413
        host, port = hub.server.server_address[:2]
        with socket.create_connection((host, port), timeout=10) as raw:  # read(-1) would wait for EOF
            raw.sendall(b"POST /api/repos/create HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n{}")
            assert raw.recv(100).startswith(b"HTTP/1.1 400")
        assert _post(f"{hub.url}/api/repos/create", b'{"name": "ok"}').status_code == 200


def test_a_hub_started_with_tokens_refuses_writes_without_one(tmp_path):
    with LocalHub(tmp_path, tokens=["good-token"]) as hub:
        restore = point_client_at(hub.url, cache_dir=tmp_path / "cache")  # Xet off, as the fixture does
        try:
            _writes_need_the_token(hub)
        finally:
            restore()


def _writes_need_the_token(hub: LocalHub) -> None:
    body = json.dumps({"name": "m", "organization": "org"}).encode()
    assert _post(f"{hub.url}/api/repos/create", body).status_code == 401
    wrong = {"Authorization": "Bearer bad-token"}
    assert _post(f"{hub.url}/api/repos/create", body, headers=wrong).status_code == 401
    assert httpx2.put(f"{hub.url}/lfs-upload/{'0' * 64}", content=b"x", timeout=10).status_code == 401
    api = HfApi(endpoint=hub.url, token="good-token")
    api.create_repo("org/ds", repo_type="dataset")
    big = b"\x00" * 100  # *.bin: LFS, through a signed upload URL
    api.create_commit("org/ds", [CommitOperationAdd("w.bin", big)], commit_message="m", repo_type="dataset")
    assert repo_file(hub.store, "org/ds", "w.bin", repo_type="dataset") == big
    with pytest.raises(hf_errors.HfHubHTTPError):
        HfApi(endpoint=hub.url, token="bad").create_commit(
            "org/ds", [CommitOperationAdd("a.txt", b"a")], commit_message="m", repo_type="dataset"
        )
    assert api.list_repo_files("org/ds", repo_type="dataset")  # reads need no token


def test_a_write_needs_a_token_whatever_segments_its_path_adds(tmp_path):
    """Issue 22.10: reads were told from writes by a segment anywhere in the path, so
    `POST /api/repos/create/paths-info` created a repo with no token. Requests are classified by their exact
    route now, and a route with extra segments does not exist."""
    with LocalHub(tmp_path, tokens=["good-token"]) as hub:
        body = json.dumps({"name": "m", "organization": "org"}).encode()
        for path in ("/api/repos/create/paths-info", "/api/repos/create/validate-yaml",
                     "/api/models/org/m/paths-info/../commit/main", "/api/validate-yaml/../repos/create"):  # fmt: skip
            answer = _post(f"{hub.url}{path}", body)
            assert answer.status_code == 401, (path, answer.status_code)
        assert hub.store.repos("model") == [], "no repo was created"
        good = {"Authorization": "Bearer good-token"}
        assert _post(f"{hub.url}/api/repos/create", body, headers=good).status_code == 200
        for path in ("/api/repos/create/paths-info", "/api/whoami-v2/x", "/api/validate-yaml/x", "/lfs-verify/a/b"):
            assert _post(f"{hub.url}{path}", b"{}", headers=good).status_code == 404, path
        # the two read-only POSTs still need no token
        assert _post(f"{hub.url}/api/validate-yaml", b"{}").status_code == 200
        info = httpx2.post(f"{hub.url}/api/models/org/m/paths-info/main", data={"paths": ["x"]}, timeout=10)
        assert info.status_code == 200


def test_the_token_is_checked_before_a_body_is_read_and_idle_clients_time_out(tmp_path):
    """Issue 22.10: the server read (and buffered) a whole body before checking the token, and kept a socket
    open for ever: idle unauthenticated clients each held a buffer. A write without a token is refused at once,
    its body unread, and a connection that sends nothing is closed after the timeout."""
    from pipeline.localhub.server import REQUEST_TIMEOUT_S

    assert 0 < REQUEST_TIMEOUT_S <= 120
    with LocalHub(tmp_path, tokens=["good-token"]) as hub:
        host, port = hub.server.server_address[:2]
        with socket.create_connection((host, port), timeout=120) as raw:  # a body announced, never sent
            raw.sendall(b"POST /api/repos/create HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n")
            assert raw.recv(100).startswith(b"HTTP/1.1 401"), "answered before the body"
        hub.server.timeout_s = 0.5
        # The client waits far longer than the server's 0.5 s: the server closing first (an empty read) is the
        # behaviour; a socket.timeout here means it never did. No sum of seconds is asserted.
        with socket.create_connection((host, port), timeout=120) as idle:
            idle.sendall(b"GET /api/whoami-v2 HTTP/1.1\r\nHost: x\r\n")  # headers never finished
            assert idle.recv(100) == b"", "the server closed it"


def test_urls_name_the_bound_address_never_the_host_header(localhub):
    localhub.store.create_repo("org/m")
    answer = _post(f"{localhub.url}/api/repos/create", json.dumps({"name": "n"}).encode(),
                   headers={"Host": "evil.example:80"})  # fmt: skip
    assert answer.json()["url"].startswith(localhub.url) and "evil" not in answer.text
    listing = httpx2.get(f"{localhub.url}/api/models?limit=1", headers={"Host": "evil.example"}, timeout=10)
    assert "evil" not in listing.headers.get("Link", "") and localhub.url in listing.headers.get("Link", "")


def test_latency_holds_each_answer_and_concurrent_requests_overlap(tmp_path, monkeypatch):
    """``latency_s`` models the real Hub's round trip for benchmarks: every answer waits at least that long, and
    answers are held side by side, not one after another. The overlap is shown by the order of events (a second
    request is held while the first still is), never by a sum of seconds, so a loaded machine cannot fail it."""
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    from pipeline.localhub import server as server_module

    send = server_module._Handler._send
    held: list[str] = []
    lock = threading.Lock()
    second_held = threading.Event()

    def holding(self, method, response) -> None:
        if self.server.latency_s > 0:
            with lock:
                held.append(threading.current_thread().name)
                first = len(held) == 1
                if len(held) >= 2:
                    second_held.set()
            if first:
                # The first answer waits until another request is being held beside it: a server that answered
                # one request at a time would never get there (the generous bound only ends a broken run).
                second_held.wait(timeout=120)
        send(self, method, response)

    with LocalHub(tmp_path / "hub", latency_s=0.2) as hub:
        url = f"{hub.url}/api/whoami-v2"
        start = time.perf_counter()
        assert httpx2.get(url).status_code == 200
        assert time.perf_counter() - start >= 0.2  # a lower bound: a slow machine only adds to it

        monkeypatch.setattr(server_module._Handler, "_send", holding)
        with ThreadPoolExecutor(2) as pool:
            codes = list(pool.map(lambda _: httpx2.get(url, timeout=300).status_code, range(2)))
        assert codes == [200, 200]
        assert second_held.is_set(), "the second request was not held while the first was: answers are serial"
        assert len(set(held)) == 2, held  # two handler threads, each holding its own answer

        hub.server.latency_s = 0.0
        held.clear()
        assert httpx2.get(url).status_code == 200
        assert held == []  # no latency, no hold


def test_every_connection_has_nagle_off(localhub, monkeypatch):
    """A small answer on a kept-alive connection must not wait for the client's delayed ACK (~40 ms): the
    handler turns Nagle's algorithm off on every connection it serves (what every benchmark figure relies on)."""
    from pipeline.localhub import server as server_module

    seen: list[int] = []
    setup = server_module._Handler.setup

    def recording(self) -> None:
        setup(self)
        seen.append(self.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

    monkeypatch.setattr(server_module._Handler, "setup", recording)
    with httpx2.Client() as client:  # one kept-alive connection, then a second client's own
        assert [client.get(f"{localhub.url}/api/whoami-v2").status_code for _ in range(3)] == [200] * 3
    assert httpx2.get(f"{localhub.url}/api/whoami-v2").status_code == 200
    assert len(seen) == 2 and all(seen), seen


_CARD = b"""---
license: apache-2.0
base_model:
- meta-llama/Llama-3.2-1B
base_model_relation: finetune
tags: [trl]
---
# A fine-tune

Some text with --- inside it.
"""


def test_model_info_answers_card_data_and_config_from_the_repo_files(localhub):
    store = localhub.store
    store.create_repo("org/ft", metadata={"pipeline_tag": "text-generation"})
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "auto_map": {}}
    store.commit_files("org/ft", {"README.md": _CARD, "config.json": json.dumps(config).encode()})
    store.create_repo("org/sd", metadata={"pipeline_tag": "text-to-image"})
    index = {"_class_name": "StableDiffusionPipeline", "unet": ["diffusers", "UNet2DConditionModel"]}
    store.commit_files("org/sd", {"model_index.json": json.dumps(index).encode()})
    store.create_repo("org/bare")
    api = _api(localhub)

    info = api.model_info("org/ft", expand=["cardData", "config"])
    assert (
        info.card_data.base_model == ["meta-llama/Llama-3.2-1B"]
        and info.card_data.get("base_model_relation") == "finetune"
    )
    # The Hub's summary of config.json, not the whole file.
    assert info.config == {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "auto_map": {}}
    assert api.model_info("org/sd").config == {"diffusers": {"_class_name": "StableDiffusionPipeline"}}
    bare = api.model_info("org/bare")
    assert bare.config is None and not bare.card_data
    # The listing's expand answers them too, one request for the page.
    listed = {m.id: m for m in api.list_models(expand=["cardData", "config"])}
    assert listed["org/ft"].config["model_type"] == "llama" and listed["org/ft"].card_data.base_model
    assert len(_models_requests(localhub)) == 1


def test_a_card_without_yaml_or_with_broken_yaml_has_no_metadata(localhub):
    from pipeline.hub import front_matter

    assert front_matter("# no front matter\n") == {}
    assert front_matter("---\n[unclosed\n---\n") == {}
    assert front_matter("---\n- a list\n---\n") == {}
    assert front_matter("---\nbase_model: a/b\n") == {}  # never closed
    assert front_matter("\ufeff---\nbase_model: a/b\n---\ntext") == {"base_model": "a/b"}


def test_an_hf_path_read_after_another_local_hub_lists_the_new_hubs_files(tmp_path: Path) -> None:
    """fsspec keeps one ``HfFileSystem`` per endpoint and process, with that endpoint's listings: a second local hub
    on the port a first one had (a free port, reused) holding the same repo with other files got the first one's
    listing and a 404 for its file (seen under pytest-xdist, where one process runs many hub tests). Pointing the
    client anywhere drops the cached ones."""
    import pandas as pd

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    frames = []
    for k, name in enumerate(("0.parquet", "1a.parquet")):
        with LocalHub(tmp_path / f"hub-{k}", port=port) as hub:
            restore = point_client_at(hub.url, cache_dir=tmp_path / f"cache-{k}")
            try:
                hub.store.create_repo("org/ds", repo_type="dataset")
                path = tmp_path / name
                pd.DataFrame({"hub": [k]}).to_parquet(path)
                hub.store.commit_files("org/ds", {f"data/latest/{name}": path}, message="m", repo_type="dataset")
                frames.append(pd.read_parquet("hf://datasets/org/ds/data/latest/"))
            finally:
                restore()
    assert [frame.hub.tolist() for frame in frames] == [[0], [1]]


def test_a_hundred_clients_connecting_at_once_are_all_let_in(tmp_path: Path) -> None:
    """Issue 48.6: a listen backlog of 5 (socketserver's) timed out connections at 100 clients. Nothing accepts
    here (the server is bound, not serving): every connection the kernel completes is one the backlog holds."""
    from pipeline.localhub import LocalHubServer

    server = LocalHubServer(LocalHubStore(tmp_path))
    clients: list[socket.socket] = []
    try:
        for _ in range(100):
            client = socket.socket()
            clients.append(client)
            client.settimeout(1.0)
            client.connect(server.server_address)  # a backlog of 5: the 7th times out
    finally:
        for client in clients:
            client.close()
        server.server_close()
    assert len(clients) == 100
