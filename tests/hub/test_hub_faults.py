"""pipeline.hub behind a faulty network (tests.support.fault_proxy): answers lost after the Hub acted, stalls.

Issue 29.14: the retry loop repeated non-idempotent calls blindly (a lost answer to create_commit(create_pr=True)
opened a second PR, a lost answer to a comment posted it twice). Issue 29.15: the client had no timeout, so a Hub
that never answered hung a publish for ever.
"""

from __future__ import annotations

import pytest
from huggingface_hub import CommitOperationAdd

from pipeline import constants
from pipeline.errors import HubDeadlineError
from pipeline.hub import deadline
from tests.support.fault_proxy import FaultKind
from tests.support.localhub_fixtures import repo_history

REPO = "org/results"


def _dataset(localhub_proxy) -> str:
    localhub_proxy.localhub.store.create_repo(REPO, repo_type="dataset")
    return REPO


def _open_prs(store) -> list[int]:
    repo = store.get(REPO, repo_type="dataset")
    return [d["num"] for d in repo.discussions if d["isPullRequest"] and d["status"] == "open"]


def _ops(files: dict[str, bytes]):
    return lambda parent: [CommitOperationAdd(path, data) for path, data in files.items()]


@pytest.mark.parametrize("kind", ["drop", "stall"])
def test_a_lost_answer_to_opening_a_pr_never_opens_a_second_one(localhub_proxy, kind: FaultKind) -> None:
    repo, proxy, store = _dataset(localhub_proxy), localhub_proxy.proxy, localhub_proxy.localhub.store
    fault = proxy.fail(kind, path_regex=r"/commit/main\?create_pr=", method="POST")
    result = localhub_proxy.client.commit(
        repo, operations_factory=_ops({"data/a.txt": b"a\n"}), message="[trncat] one", create_pr=True
    )
    assert fault.hits == 1 and proxy.settle() == (kind == "stall")  # the client timed out and hung up on the stall
    assert _open_prs(store) == [1] and result.pr_num == 1, "the retry found the PR by its marker"
    assert result.sha == store.get(repo, repo_type="dataset").refs["refs/pr/1"]
    assert sum(1 for m, p in proxy.requests if m == "POST" and "/commit/" in p) == 1, "never repeated blindly"


def test_a_lost_answer_to_a_comment_never_posts_it_twice(localhub_proxy) -> None:
    repo, proxy, store = _dataset(localhub_proxy), localhub_proxy.proxy, localhub_proxy.localhub.store
    client = localhub_proxy.client
    client.commit(repo, operations_factory=_ops({"a.txt": b"a"}), message="[trncat] pr", create_pr=True)
    proxy.fail("drop", path_regex=r"/discussions/1/comment", method="POST")
    client.comment(repo, 1, "Updated with run 42")
    events = store.get(repo, repo_type="dataset").discussions[0]["events"]
    posted = [e for e in events if e["type"] == "comment" and "Updated with run 42" in e["data"]["latest"]["raw"]]
    assert len(posted) == 1


def test_a_lost_answer_to_a_commit_onto_a_branch_is_found_at_its_head(localhub_proxy) -> None:
    """A guard, not a reproduction: huggingface_hub already skips a commit whose files the head holds byte for byte,
    so a blind retry made no second commit. The retry now looks for the files at the head itself, before sending."""
    repo, proxy, store = _dataset(localhub_proxy), localhub_proxy.proxy, localhub_proxy.localhub.store
    before = len(repo_history(store, repo, repo_type="dataset"))
    proxy.fail("drop", path_regex=r"/commit/main$", method="POST")
    result = localhub_proxy.client.commit(repo, operations_factory=_ops({"b.txt": b"b\n"}), message="add b")
    history = repo_history(store, repo, repo_type="dataset")
    assert len(history) == before + 1 and result.created and result.rebases == 0
    assert sum(1 for m, p in proxy.requests if m == "POST" and "/commit/" in p) == 1, "never sent twice"
    assert result.sha == store.get(repo, repo_type="dataset").refs["main"]


def test_a_stalled_answer_times_out_and_is_retried_on_the_budget(localhub_proxy) -> None:
    repo, proxy = _dataset(localhub_proxy), localhub_proxy.proxy
    sleeps = localhub_proxy.localhub.sleeps
    proxy.fail("stall", path_regex=r"/revision/main", method="GET")
    assert len(localhub_proxy.client.head_sha(repo)) == 40
    assert proxy.settle() == 1, "the client hung up after its read timeout, it did not wait for the proxy to"
    assert len(sleeps) >= 1, "a timeout is retried on the call's own budget"


def test_a_hub_that_never_answers_ends_at_the_deadline(localhub_proxy, monkeypatch) -> None:
    repo, proxy = _dataset(localhub_proxy), localhub_proxy.proxy
    monkeypatch.setattr(constants, "TRNCAT_HUB_READ_TIMEOUT_S", 0.2)
    proxy.fail("stall", count=10_000)
    client = localhub_proxy.make_client(max_retries=1_000, base_delay=0.01)
    with pytest.raises(HubDeadlineError, match="deadline"), deadline(1.0):
        client.head_sha(repo)
    assert proxy.settle() >= 2, "tried again after each timeout, until the deadline"


def test_a_disk_that_fills_during_a_download_is_disk_full_never_a_network_error() -> None:
    """Issue 48.6: a download whose write hits ENOSPC while the response stream breaks (the OSError's context a
    transport error) was said "cannot reach the Hub" and recorded ``network_error``, and retried with backoff. A full
    disk is said as itself, is not retried, and the benchmark's classification reads it as ``disk_full``."""
    import errno

    import httpx2

    from pipeline.bench.failures import classify
    from pipeline.hub.translate import is_retryable, translate

    def full_disk_in_a_broken_stream() -> OSError:
        try:
            try:
                raise httpx2.ReadError("peer closed connection")
            except httpx2.ReadError:
                raise OSError(errno.ENOSPC, "No space left on device") from None
        except OSError as exc:
            exc.__context__ = httpx2.ReadError("peer closed connection")
            return exc

    exc = full_disk_in_a_broken_stream()
    assert not is_retryable(exc)
    said = translate(exc, "downloading acme/m", attempts=1)
    assert "No space left on device" in str(said) and "cannot reach" not in str(said)
    verdict = classify(exc_type=type(said).__name__, message=f"download failed: {said}", stage_hint="load")
    assert (verdict.status, verdict.stage, verdict.code) == ("error", "load", "disk_full")
