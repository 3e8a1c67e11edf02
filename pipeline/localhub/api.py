"""The Hub API subset, as pure functions of (store, request) -> response, read from huggingface_hub's client.

Routes (``{type}`` is model/dataset/space; ``{prefix}`` is "" for models, "datasets/" for datasets):
``GET /api/{type}s`` (listing), ``GET /api/{type}s/{id}[/revision/{rev}]``, ``GET .../tree/{rev}[/{path}]``,
``POST .../paths-info/{rev}``, ``POST .../preupload/{rev}``, ``POST .../commit/{rev}``,
``GET .../discussions[/{num}]``, ``POST .../discussions/{num}/{comment,merge,status}``, ``GET .../refs``,
``POST /api/repos/create``,
``GET /api/whoami-v2``, ``POST /api/validate-yaml``, ``HEAD|GET /{prefix}{id}/resolve/{rev}/{path}``,
``POST /{prefix}{id}.git/info/lfs/objects/batch``, ``PUT /lfs-upload/{oid}``, ``POST /lfs-verify/{oid}``.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, urlencode

from pipeline.errors import StoreError
from pipeline.localhub.cards import card_and_config
from pipeline.localhub.messages import PREFIX, USER, Request, Response, error, ok, split_rev
from pipeline.localhub.repo import Repo
from pipeline.localhub.storage import LocalHubStore
from pipeline.localhub.tree import cursor
from pipeline.localhub.writes import commit, discussions, lfs_batch, lfs_upload, preupload, refs

PAGE_MAX = 1000
_TYPES = {"models": "model", "datasets": "dataset", "spaces": "space"}
_SORT_KEYS = {"trendingScore", "downloads", "likes", "lastModified", "createdAt"}
_RANGE = re.compile(r"bytes=(\d*)-(\d*)\Z")
#: What a listing gives of each repo when it asks for no ``expand``, as the Hub does.
LISTING_FIELDS = "modelId likes downloads trendingScore private tags pipeline_tag library_name createdAt".split()


def dispatch(store: LocalHubStore, req: Request) -> Response:
    """Route a request; store errors become Hub-shaped error responses."""
    try:
        return _route(store, req)
    except StoreError as exc:
        extra = {"X-Repo-Commit": exc.commit} if exc.commit else None
        return error(exc.status, str(exc), exc.code, extra)


def _route(store: LocalHubStore, req: Request) -> Response:
    s, m = req.segments, req.method
    # Every route is exact: a path with more segments than its route is no route (issue 22.10).
    if s == ["api", "whoami-v2"]:
        return ok({"type": "user", "name": USER, "fullname": "Local Hub", "orgs": [], "auth": {"type": "none"}})
    if s == ["api", "validate-yaml"] and m == "POST":
        return ok({"errors": [], "warnings": []})
    if s == ["api", "repos", "create"] and m == "POST":
        return _create_repo(store, req)
    if len(s) == 2 and s[0] == "api" and s[1] in _TYPES and m == "GET":
        return _listing(store, req, _TYPES[s[1]])
    if len(s) >= 4 and s[0] == "api" and s[1] in _TYPES:
        repo = store.get(f"{s[2]}/{s[3]}", repo_type=_TYPES[s[1]])
        return _repo_api(store, req, repo, s[4:])
    if s[:1] == ["lfs-upload"] and len(s) == 2 and m == "PUT":
        return lfs_upload(store, req, s[1])
    if s[:1] == ["lfs-verify"] and len(s) == 2 and m == "POST":
        body = req.json()
        found = store.has_blob(body["oid"], body.get("size"))
        return ok({"message": "ok"}) if found else error(404, "Object not found")
    repo_type = "model"
    if s and s[0] in {"datasets", "spaces"}:
        repo_type, s = _TYPES[s[0]], s[1:]
    if len(s) == 6 and s[1].endswith(".git") and s[2:] == ["info", "lfs", "objects", "batch"]:
        return lfs_batch(store, req, store.get(f"{s[0]}/{s[1][:-4]}", repo_type=repo_type))
    if len(s) >= 5 and s[2] == "resolve" and m in {"GET", "HEAD"}:
        rev, rest = split_rev(s[3:])
        return _resolve(store, req, store.get(f"{s[0]}/{s[1]}", repo_type=repo_type), rev, "/".join(rest))
    return error(404, f"No route for {m} {req.path}")


def _repo_api(store: LocalHubStore, req: Request, repo: Repo, rest: list[str]) -> Response:
    m = req.method
    if (not rest or rest[:1] == ["revision"]) and m == "GET":
        sha = repo.resolve("/".join(rest[1:]) if rest else "main")
        blobs = req.arg("blobs") in {"1", "true", "True"}
        return ok(repo_json(store, repo, sha, blobs=blobs, expand=req.args("expand") or None))
    if rest[:1] == ["tree"] and m == "GET":
        rev, path = split_rev(rest[1:])
        return _tree(req, repo, rev, "/".join(path))
    if rest[:1] == ["paths-info"] and m == "POST" and _one_rev(rest):
        sha = repo.resolve(split_rev(rest[1:])[0])
        tree = repo.commits[sha]["tree"]
        form = parse_qs(req.body.decode())
        expand = form.get("expand", ["False"])[0].lower() == "true"  # the Hub adds each file's last commit
        return ok(
            [_file_json(p, tree[p]) | ({"lastCommit": _last_commit(repo, sha, p)} if expand else {})
             for p in form.get("paths", []) if p in tree]
        )  # fmt: skip
    if rest[:1] == ["preupload"] and m == "POST" and _one_rev(rest):
        return preupload(req, repo, split_rev(rest[1:])[0])
    if rest[:1] == ["commit"] and m == "POST" and _one_rev(rest):
        return commit(store, req, repo, split_rev(rest[1:])[0])
    if rest[:1] == ["discussions"]:
        return discussions(store, req, repo, rest[1:])
    if rest == ["refs"] and m == "GET":
        return refs(repo, req)
    return error(404, f"No route for {m} {req.path}")


def _one_rev(rest: list[str]) -> bool:
    """``[action, revision]`` and nothing after the revision (raw ``refs/pr/N`` counts as one)."""
    return len(rest) >= 2 and not split_rev(rest[1:])[1]


# -- repos and listing -------------------------------------------------------------------------------
def repo_json(
    store: LocalHubStore, repo: Repo, sha: str, *, blobs: bool = False, expand: list[str] | None = None
) -> dict[str, Any]:
    """The info document huggingface_hub parses into ModelInfo / DatasetInfo.

    ``cardData`` is the README's front matter and a model's ``config`` the summary of its config.json (or
    model_index.json), as the Hub answers them (:mod:`pipeline.localhub.cards`); a repo's metadata may set
    ``cardData`` for a repo without a README.
    """
    meta, commit = repo.meta, repo.commits[sha]
    org = repo.repo_id.split("/")[0]
    out: dict[str, Any] = {
        "_id": repo.repo_id,
        "id": repo.repo_id,
        "author": org,
        "sha": sha,
        "lastModified": commit["date"],
        "createdAt": meta.get("createdAt"),
        "private": bool(meta.get("private", False)),
        "disabled": False,
        "gated": meta.get("gated", False),
        "downloads": meta.get("downloads", 0),
        "likes": meta.get("likes", 0),
        "trendingScore": meta.get("trendingScore", 0),
        "tags": list(meta.get("tags", [])),
        "cardData": meta.get("cardData", {}),
    }
    wanted = expand is None or "cardData" in expand or "config" in expand
    if wanted:
        card, config = card_and_config(commit["tree"], store.blob_path)
        if card is not None:
            out["cardData"] = card
        if config is not None and repo.repo_type == "model":
            out["config"] = config
    if repo.repo_type == "model":
        out["modelId"] = repo.repo_id
        out["pipeline_tag"] = meta.get("pipeline_tag")
        out["library_name"] = meta.get("library_name")
        if meta.get("safetensors"):
            st = meta["safetensors"]
            out["safetensors"] = {"parameters": st.get("parameters", {"BF16": st["total"]}), "total": st["total"]}
    if expand is None or "siblings" in expand:
        out["siblings"] = [_sibling(p, e, blobs) for p, e in commit["tree"].pairs()]
    if expand is not None:
        out = {k: v for k, v in out.items() if k in expand or k in {"_id", "id"}}
    return out


def _sibling(path: str, entry: dict[str, Any], blobs: bool) -> dict[str, Any]:
    if not blobs:
        return {"rfilename": path}
    out: dict[str, Any] = {"rfilename": path, "size": entry["size"], "blobId": entry["oid"]}
    if entry["lfs"]:
        out["lfs"] = {"size": entry["size"], "sha256": entry["sha256"], "pointerSize": entry["pointer_size"]}
    return out


def _next(req: Request, cursor_text: str) -> dict[str, str]:
    """The Link header of the next page: this request's URL with ``cursor`` moved on (GitHub-style, as the Hub)."""
    query = {k: v for k, v in req.query.items() if k != "cursor"} | {"cursor": [cursor_text]}
    return {"Link": f'<{req.base_url}/{"/".join(req.segments)}?{urlencode(query, doseq=True)}>; rel="next"'}


def _page(req: Request, items: list[Any]) -> tuple[list[Any], dict[str, str]]:
    """Cursor pagination with a GitHub-style Link header, like the Hub (at most 1,000 per page)."""
    start = int(req.arg("cursor", "0") or 0)
    size = max(1, min(int(req.arg("limit", str(PAGE_MAX)) or PAGE_MAX), PAGE_MAX))
    return items[start : start + size], _next(req, str(start + size)) if start + size < len(items) else {}


def _listing(store: LocalHubStore, req: Request, repo_type: str) -> Response:
    repos = store.repos(repo_type)
    if tag := req.arg("pipeline_tag"):
        repos = [r for r in repos if r.meta.get("pipeline_tag") == tag]
    for wanted in req.args("filter"):
        repos = [
            r
            for r in repos
            if wanted in r.meta.get("tags", []) or wanted in {r.meta.get("pipeline_tag"), r.meta.get("library_name")}
        ]
    if author := req.arg("author"):
        repos = [r for r in repos if r.repo_id.split("/")[0] == author]
    if search := req.arg("search"):
        repos = [r for r in repos if search.lower() in r.repo_id.lower()]
    sort = req.arg("sort")
    if sort in _SORT_KEYS:
        descending = req.arg("direction", "-1") != "1"
        repos = sorted(repos, key=lambda r: r.repo_id)
        repos.sort(key=lambda r: r.meta.get(sort) or 0, reverse=descending)
    page, headers = _page(req, repos)
    expand = req.args("expand") or LISTING_FIELDS
    return ok([repo_json(store, r, r.refs["main"], expand=expand) for r in page], headers=headers)


def _create_repo(store: LocalHubStore, req: Request) -> Response:
    body = req.json()
    repo_id = f"{body.get('organization') or USER}/{body['name']}"
    repo_type = body.get("type") or "model"
    url = f"{req.base_url}/{PREFIX[repo_type]}{repo_id}"
    try:
        store.create_repo(repo_id, repo_type=repo_type, metadata={"private": bool(body.get("private"))})
    except StoreError as exc:
        if exc.status == 409:
            return ok({"error": str(exc), "url": url}, 409)
        raise
    return ok({"url": url, "name": repo_id, "id": repo_id})


# -- files ---------------------------------------------------------------------------------------------
def _file_json(path: str, entry: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "file", "oid": entry["oid"], "size": entry["size"], "path": path}
    if entry["lfs"]:
        out["lfs"] = {"oid": entry["sha256"], "size": entry["size"], "pointerSize": entry["pointer_size"]}
    return out


def _last_commit(repo: Repo, sha: str, path: str) -> dict[str, Any]:
    """The newest commit at or before ``sha`` that changed ``path`` (as the Hub's paths-info ``expand`` gives it)."""
    entry = repo.commits[sha]["tree"].get(path)
    while (parent := repo.commits[sha].get("parent")) and repo.commits[parent]["tree"].get(path) == entry:
        sha = parent
    commit = repo.commits[sha]
    return {"id": sha, "title": str(commit.get("message", "")).split("\n", 1)[0], "date": commit["date"]}


def _tree(req: Request, repo: Repo, rev: str, path: str) -> Response:
    """A folder's listing, a page at a time from a cursor into the tree's sorted index: each page costs what it
    lists, so a whole listing is linear in the files."""
    tree = repo.tree(rev)
    prefix = f"{path.strip('/')}/" if path.strip("/") else ""
    if prefix and next(tree.under(prefix), None) is None:
        return error(404, f"{path} not found at {rev}", "EntryNotFound")
    recursive = req.arg("recursive") in {"1", "true", "True"}
    limit = req.arg("limit") or ""
    size = max(1, min(int(limit), PAGE_MAX)) if limit.isdigit() else PAGE_MAX
    page: list[dict[str, Any]] = []
    resume, headers = ("", 0), dict[str, str]()
    for entry, after in tree.walk(prefix, recursive=recursive, cursor=req.arg("cursor") or None):
        if len(page) == size:  # one more exists: the next page starts after the last one shown
            headers = _next(req, cursor(resume))
            break
        page.append(_file_json(entry["path"], entry) if entry["type"] == "file" else entry)
        resume = after
    return ok(page, headers=headers)


def _resolve(store: LocalHubStore, req: Request, repo: Repo, rev: str, path: str) -> Response:
    if repo.meta.get("gated"):
        return error(403, f"Access to {repo.repo_id} is restricted: you must accept its conditions.", "GatedRepo")
    sha = repo.resolve(rev)
    entry = repo.commits[sha]["tree"].get(path)
    if entry is None:
        raise StoreError(f"{path} does not exist at {rev}", status=404, code="EntryNotFound", commit=sha)
    size = entry["size"]
    headers = {"X-Repo-Commit": sha, "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
    if entry["lfs"]:
        headers |= {"ETag": f'"{entry["sha256"]}"', "X-Linked-Etag": f'"{entry["sha256"]}"'}
        headers["X-Linked-Size"] = str(size)
    else:
        headers["ETag"] = f'"{entry["oid"]}"'
    start, length, status = 0, size, 200
    if (wanted := req.headers.get("range")) is not None:
        match = _RANGE.match(wanted.strip())
        first, last = match.groups() if match else ("", "")
        if first:
            start, end = int(first), min(int(last), size - 1) if last else size - 1
        else:  # the last ``last`` bytes; neither bound given (or no range at all) is unsatisfiable
            start, end = max(0, size - int(last)) if last else size, size - 1
        if start >= size or end < start:
            return Response(416, headers={**headers, "Content-Range": f"bytes */{size}"})
        length, status = end - start + 1, 206
        headers["Content-Range"] = f"bytes {start}-{end}/{size}"
    return Response(status, headers=headers, file=(store.blob_path(entry["sha256"]), start, length))
