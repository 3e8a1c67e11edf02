"""The faulty network in front of a local hub (tests.support.fault_proxy): what each fault does to a request."""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

import pytest

from pipeline.localhub import LocalHub
from tests.support.fault_proxy import FaultProxy

REPO = "org/data"


@pytest.fixture
def proxied(tmp_path):
    with LocalHub(tmp_path / "hub") as hub, FaultProxy(hub.url, hold_s=5.0) as proxy:
        hub.store.create_repo(REPO, repo_type="dataset")
        yield hub, proxy


def _request(proxy: FaultProxy, method: str, path: str, body: bytes = b"", timeout: float = 10.0):
    parts = urlsplit(proxy.url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        connection.request(method, path, body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def _comment(num: int = 1) -> tuple[str, bytes]:
    return f"/api/datasets/{REPO}/discussions/{num}/comment", json.dumps({"comment": "hello"}).encode()


def _comments(hub: LocalHub) -> int:
    events = hub.store.get(REPO, repo_type="dataset").discussions[0]["events"]
    return sum(1 for e in events if e["type"] == "comment" and e["data"]["latest"]["raw"] == "hello")


def test_answers_naming_the_hub_name_the_proxy_and_a_429_never_reaches_the_hub(proxied) -> None:
    hub, proxy = proxied
    hub.store.open_pull_request(hub.store.get(REPO, repo_type="dataset"), title="t", author="a")
    oid = "a" * 64
    body = json.dumps({"operation": "upload", "objects": [{"oid": oid, "size": 3}]}).encode()
    status, answer = _request(proxy, "POST", f"/datasets/{REPO}.git/info/lfs/objects/batch", body)
    assert status == 200
    href = json.loads(answer)["objects"][0]["actions"]["upload"]["href"]
    assert href.startswith(proxy.url + "/lfs-upload/") and hub.url not in answer.decode()

    fault = proxy.fail("429", path_regex=r"/comment$", method="POST")
    assert _request(proxy, "POST", *_comment())[0] == 429 and fault.hits == 1
    assert _comments(hub) == 0, "a 429 is answered by the network: the hub never saw the request"
    assert _request(proxy, "POST", *_comment())[0] == 200 and _comments(hub) == 1
    assert [m for m, _ in proxy.requests] == ["POST", "POST", "POST"]


@pytest.mark.parametrize("kind", ["drop", "stall"])
def test_a_dropped_or_stalled_answer_was_applied_by_the_hub(proxied, kind) -> None:
    hub, proxy = proxied
    hub.store.open_pull_request(hub.store.get(REPO, repo_type="dataset"), title="t", author="a")
    proxy.fail(kind, at=0)
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError, TimeoutError)):
        _request(proxy, "POST", *_comment(), timeout=0.5)
    assert _comments(hub) == 1, "the hub applied it; only the answer was lost"
    assert proxy.settle() == (kind == "stall"), "a stall is held until the client hangs up"
