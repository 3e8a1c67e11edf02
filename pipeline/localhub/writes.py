"""Routes that write: preupload, LFS batch/upload, commit (with create_pr and parentCommit), discussions."""

from __future__ import annotations

import base64
import json
import re
import tempfile
from pathlib import Path
from typing import Any

from pipeline.localhub.messages import PREFIX, USER, Request, Response, error, ok
from pipeline.localhub.repo import Repo
from pipeline.localhub.storage import LocalHubStore, check_sha256, is_lfs_path

DISCUSSIONS_PAGE = 50
#: The discussion statuses a listing's ``status=open`` and ``status=closed`` take in (``all``: every one).
STATUS_FILTERS = {"open": {"open", "draft"}, "closed": {"closed", "merged"}}


# -- uploads and commits ------------------------------------------------------------------------------
def preupload(req: Request, repo: Repo, rev: str) -> Response:
    tree = repo.tree(rev)
    files = []
    for item in req.json().get("files", []):
        path, size = item["path"], int(item["size"])
        answer: dict[str, Any] = {"path": path, "shouldIgnore": False}
        answer["uploadMode"] = "lfs" if size > 0 and is_lfs_path(path, size) else "regular"
        if path in tree:
            # huggingface_hub compares this with its local oid: sha256 for LFS, git blob sha otherwise.
            answer["oid"] = tree[path]["sha256"] if tree[path]["lfs"] else tree[path]["oid"]
        files.append(answer)
    return ok({"files": files, "commitOid": repo.resolve(rev)})


def lfs_batch(store: LocalHubStore, req: Request, repo: Repo) -> Response:
    objects = []
    for obj in req.json().get("objects", []):
        oid, size = obj["oid"], int(obj["size"])
        answer: dict[str, Any] = {"oid": oid, "size": size}
        if not store.has_blob(oid, size):  # a bad oid is a 400 here already (storage.check_sha256)
            answer["authenticated"] = True
            signature = f"?sig={req.sign(oid)}" if req.sign else ""
            answer["actions"] = {
                "upload": {"href": f"{req.base_url}/lfs-upload/{oid}{signature}"},
                "verify": {"href": f"{req.base_url}/lfs-verify/{oid}"},
            }
        objects.append(answer)
    body = json.dumps({"transfer": "basic", "objects": objects}).encode()
    return Response(200, body, {"Content-Type": "application/vnd.git-lfs+json"})


def lfs_upload(store: LocalHubStore, req: Request, oid: str) -> Response:
    check_sha256(oid)  # before anything is written: an oid names the blob's file
    tmp_dir = store.root / "tmp"
    tmp_dir.mkdir(exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=tmp_dir, delete=False) as handle:
        handle.write(req.body)
    store.put_blob_file(Path(handle.name), oid)
    return Response(200)


def commit(store: LocalHubStore, req: Request, repo: Repo, rev: str) -> Response:
    lines = [json.loads(line) for line in req.body.splitlines() if line.strip()]
    header: dict[str, Any] = next((x["value"] for x in lines if x["key"] == "header"), {})
    additions: dict[str, dict[str, Any]] = {}
    deletions: list[str] = []
    for item in lines:
        key, value = item["key"], item["value"]
        if key == "file":
            data = base64.b64decode(value["content"]) if value.get("encoding") == "base64" else value["content"]
            data = data if isinstance(data, bytes) else data.encode()
            additions[value["path"]] = store.entry_for_bytes(value["path"], data)
        elif key == "lfsFile":
            additions[value["path"]] = store.entry_for_lfs(value["oid"], value.get("size"))
        elif key == "deletedFile":
            deletions.append(value["path"])
        elif key == "deletedFolder":
            deletions.append(value["path"].rstrip("/") + "/")
    create_pr = req.arg("create_pr") in {"1", "true", "True"}
    message = header.get("summary") or "Commit"
    with store.lock:
        head = repo.resolve(rev)
        parent = header.get("parentCommit")
        if parent is not None and not head.startswith(parent):
            return error(412, "A commit has happened since. Please refresh and try again.", "PreconditionFailed")
        if rev not in repo.refs and not rev.startswith("refs/"):
            return error(400, f"Cannot commit to {rev}: not a branch")
        changes = store.changes(repo, head, additions, deletions)  # refused before a PR is opened, not after
        ref, pr_num = rev, None
        if create_pr:
            pr_num = store.open_pull_request(
                repo, title=message, author=USER, description=header.get("description") or ""
            )
            ref = f"refs/pr/{pr_num}"
        sha = store.add_commit(
            repo, ref, parent=head, changes=changes, message=message, description=header.get("description", "")
        )
        match = re.fullmatch(r"refs/pr/(\d+)", ref)
        if match:
            event = {"id": sha[:24], "type": "commit", "createdAt": repo.commits[sha]["date"]}
            event |= {"author": {"name": USER}, "data": {"subject": message, "oid": sha}}
            store.add_discussion_event(repo, int(match[1]), event)
    url = f"{req.base_url}/{PREFIX[repo.repo_type]}{repo.repo_id}"
    pr_url = f"{url}/discussions/{pr_num}" if pr_num else None
    return ok({"commitUrl": f"{url}/commit/{sha}", "commitOid": sha, "success": True, "pullRequestUrl": pr_url})


# -- discussions --------------------------------------------------------------------------------------
def refs(repo: Repo, req: Request) -> Response:
    """``GET .../refs[?include_prs=1]``: branches, tags, converts and (asked for) PR refs, as the Hub lists them."""

    def ref(name: str, full: str) -> dict[str, str]:
        return {"name": name, "ref": full, "targetCommit": repo.refs[name]}

    branches = [ref(n, f"refs/heads/{n}") for n in sorted(repo.refs) if not n.startswith("refs/")]
    prs = sorted((n for n in repo.refs if n.startswith("refs/pr/")), key=lambda n: int(n.rsplit("/", 1)[1]))
    out: dict[str, Any] = {"branches": branches, "tags": [], "converts": []}
    if req.arg("include_prs") in {"1", "true", "True"}:
        out["pullRequests"] = [ref(n, n) for n in prs]
    return ok(out)


def _discussion_json(repo: Repo, d: dict[str, Any], details: bool = False) -> dict[str, Any]:
    out = {k: v for k, v in d.items() if k != "events"}
    out |= {"repo": {"name": repo.repo_id, "type": repo.repo_type}, "pinned": False, "numComments": len(d["events"])}
    if details:
        out |= {"events": d["events"], "filesWithConflicts": [], "diff": ""}
        out["changes"] = {"base": "refs/heads/main"}
    return out


def discussions(store: LocalHubStore, req: Request, repo: Repo, rest: list[str]) -> Response:
    if not rest and req.method == "GET":
        items = list(reversed(repo.discussions))
        kind, status, author = req.arg("type", "all"), req.arg("status", "all"), req.arg("author")
        if kind != "all":
            items = [d for d in items if d["isPullRequest"] == (kind == "pull_request")]
        if status in STATUS_FILTERS:
            items = [d for d in items if d["status"] in STATUS_FILTERS[status]]
        if author:
            items = [d for d in items if d["author"]["name"] == author]
        start = int(req.arg("p", "0") or 0) * DISCUSSIONS_PAGE
        page = [_discussion_json(repo, d) for d in items[start : start + DISCUSSIONS_PAGE]]
        closed = sum(d["status"] in STATUS_FILTERS["closed"] for d in repo.discussions)
        return ok({"discussions": page, "count": len(items), "start": start, "numClosedDiscussions": closed})
    num = int(rest[0])
    if len(rest) == 1 and req.method == "GET":
        return ok(_discussion_json(repo, store.discussion(repo, num), details=True))
    if rest[1:] == ["comment"] and req.method == "POST":
        return ok({"newMessage": store.comment(repo, num, req.json()["comment"], author=USER)})
    if rest[1:] == ["merge"] and req.method == "POST":
        body = req.json() if req.body else {}
        store.merge_pull_request(repo, num, author=USER, comment=(body or {}).get("comment"))
        return ok({})
    if rest[1:] == ["status"] and req.method == "POST":
        body = req.json()
        if body.get("status") not in {"open", "closed"}:
            return error(400, "status must be open or closed")
        event = store.set_discussion_status(repo.repo_id, num, body["status"], repo_type=repo.repo_type)
        return ok({"newStatus": event})
    return error(404, f"No route for {req.method} {req.path}")
