"""The HTTP side of the local hub: a threaded stdlib server, a request log and fault injection."""

from __future__ import annotations

import logging
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from pipeline.localhub.api import dispatch
from pipeline.localhub.auth import MAX_BODY_BYTES, Gate
from pipeline.localhub.messages import Request, Response, error, parse_path
from pipeline.localhub.storage import LocalHubStore

logger = logging.getLogger(__name__)

#: Seconds a connection may stay silent (between requests, or inside one) before it is closed, so that idle
#: clients cannot each hold a socket and a thread for ever. huggingface_hub's own timeouts are 10 s
#: (``DEFAULT_REQUEST_TIMEOUT``, ``DEFAULT_DOWNLOAD_TIMEOUT``): six times that never cuts off a live client.
REQUEST_TIMEOUT_S = 60.0


@dataclass
class Fault:
    """Answer matching requests with ``statuses`` (cycled) ``count`` times, then serve them normally.

    ``count=None`` means once per status; ``forever=True`` never stops. ``hits`` counts faulted answers.
    """

    path_regex: str
    method: str
    statuses: tuple[int, ...]
    count: int | None = None
    forever: bool = False
    retry_after: float | None = None
    hits: int = 0

    def take(self, method: str, path: str) -> int | None:
        """The status to answer with, or None when this fault does not apply (any more)."""
        if self.method not in {"*", method} or not re.search(self.path_regex, path):
            return None
        budget = len(self.statuses) if self.count is None else self.count
        if not self.forever and self.hits >= budget:
            return None
        status = self.statuses[self.hits % len(self.statuses)]
        self.hits += 1
        return status


@dataclass
class Hook:
    """Run ``callback(server)`` before serving matching requests, ``count`` times."""

    path_regex: str
    method: str
    callback: Callable[[LocalHubServer], None]
    count: int = 1
    hits: int = 0


class LocalHubServer(ThreadingHTTPServer):
    """ThreadingHTTPServer bound to a store; records every request and can misbehave on purpose.

    Args:
        store: Where repos live.
        address: (host, port); port 0 picks a free one.
        tokens: Tokens allowed to write (``Authorization: Bearer``); None (default) lets every request write.
        latency_s: Hold each answer this long before sending it, as a round trip to the real Hub takes (tens
            to hundreds of milliseconds): requests made one after another then add up, concurrent ones
            overlap. 0 (default) answers at once, what the tests want.
    """

    daemon_threads = True
    allow_reuse_address = True
    #: The listen backlog: socketserver's 5 timed out connections when a test's 100 clients came at once.
    request_queue_size = 128

    def __init__(
        self,
        store: LocalHubStore,
        address: tuple[str, int] = ("127.0.0.1", 0),
        *,
        tokens: Iterable[str] | None = None,
        latency_s: float = 0.0,
    ) -> None:
        super().__init__(address, _Handler)
        self.latency_s = latency_s
        #: :data:`REQUEST_TIMEOUT_S` (tests shorten it).
        self.timeout_s = REQUEST_TIMEOUT_S
        self.store = store
        self.gate = Gate(tokens)
        #: The largest request body accepted; a larger one is answered 413 and the connection closed (tests
        #: shorten it).
        self.max_body = MAX_BODY_BYTES
        #: (method, path with query) of every request, in arrival order; benchmarks count these.
        self.requests: list[tuple[str, str]] = []
        #: Body bytes sent in answer to each request, in the order answered; benchmarks sum these.
        self.sent_bytes: list[int] = []
        #: Body bytes of each request read (uploads), in the order read; benchmarks sum these.
        self.received_bytes: list[int] = []
        self._faults: list[Fault] = []
        self._hooks: list[Hook] = []
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:41234``."""
        host, port = self.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        return f"http://{host}:{port}"

    def inject(
        self,
        path_regex: str,
        method: str = "*",
        *,
        statuses: list[int] | tuple[int, ...] = (429, 500),
        count: int | None = None,
        forever: bool = False,
        retry_after: float | None = None,
    ) -> Fault:
        """Answer requests matching ``path_regex`` (re.search on the path with query) and ``method``
        with ``statuses`` before serving them normally.

        Args:
            path_regex: Regular expression searched in the request path.
            method: HTTP method, or ``*``.
            statuses: Statuses answered in turn.
            count: Faulted answers in all (default: one per status).
            forever: Never stop (a Hub that is down).
            retry_after: Send ``Retry-After`` (seconds) with each faulted answer.

        Returns:
            The fault; its ``hits`` counts the faulted answers.
        """
        fault = Fault(path_regex, method.upper(), tuple(statuses), count, forever, retry_after)
        with self._lock:
            self._faults.append(fault)
        return fault

    def on_request(
        self, path_regex: str, method: str, callback: Callable[[LocalHubServer], None], *, count: int = 1
    ) -> Hook:
        """Run ``callback(server)`` before serving the next ``count`` matching requests."""
        hook = Hook(path_regex, method.upper(), callback, count)
        with self._lock:
            self._hooks.append(hook)
        return hook

    def move_branch_before_commit(
        self, repo_id: str, *, repo_type: str = "dataset", branch: str = "main", count: int = 1
    ) -> Hook:
        """Simulate a concurrent writer: before each of the next ``count`` commit requests on the repo,
        commit a file to ``branch``, so a commit whose parentCommit was read before gets 412.

        Returns:
            The hook; its ``hits`` counts the moves.
        """
        prefix = "datasets" if repo_type == "dataset" else "models" if repo_type == "model" else "spaces"
        regex = rf"^/api/{prefix}/{re.escape(repo_id)}/commit/"

        def move(server: LocalHubServer) -> None:
            n = hook.hits
            server.store.commit_files(
                repo_id, {f"concurrent/{n}.txt": f"concurrent writer {n}\n".encode()},
                message=f"Concurrent commit {n}", repo_type=repo_type, branch=branch,
            )  # fmt: skip

        hook = self.on_request(regex, "POST", move, count=count)
        return hook

    def clear_faults(self) -> None:
        """Remove every fault and hook."""
        with self._lock:
            self._faults.clear()
            self._hooks.clear()

    def count_requests(self, path_regex: str = "", method: str = "*") -> int:
        """How many logged requests match."""
        return sum(1 for m, p in list(self.requests) if method in {"*", m} and re.search(path_regex, p) is not None)

    def log(self, method: str, path: str) -> None:
        """Record a request that is answered without being served (refused before its body is read)."""
        with self._lock:
            self.requests.append((method, path))

    def _before(self, method: str, path: str) -> Response | None:
        with self._lock:
            self.requests.append((method, path))
            hooks = []
            for hook in self._hooks:
                if hook.hits < hook.count and hook.method in {"*", method} and re.search(hook.path_regex, path):
                    hook.hits += 1
                    hooks.append(hook)
            for fault in self._faults:
                status = fault.take(method, path)
                if status is not None:
                    extra = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after is not None else None
                    return error(status, f"Injected fault {status}", extra=extra)
        for hook in hooks:
            hook.callback(self)
        return None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as huggingface_hub's client expects
    server: LocalHubServer

    def setup(self) -> None:
        super().setup()
        # A silent client is dropped (BaseHTTPRequestHandler answers a timeout by closing the connection).
        self.connection.settimeout(self.server.timeout_s)
        # Without TCP_NODELAY, Nagle's algorithm holds a small answer on a kept-alive connection until the
        # client's delayed ACK (~40 ms on Linux): every figure measured through the local hub would carry it.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        logger.debug("%s %s", self.address_string(), format % args)

    def _body(self) -> bytes | Response:
        """The request body, or the error answer when it is malformed or larger than ``max_body``."""
        cap = self.server.max_body
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            total = 0
            while True:
                try:
                    size = int(self.rfile.readline(64).split(b";")[0].strip() or b"0", 16)
                except ValueError:
                    return error(400, "Malformed chunked body")
                total += size
                if size < 0 or total > cap:
                    return error(413, f"Request body larger than {cap} bytes")
                if size == 0:
                    while self.rfile.readline(8192).strip():  # trailers
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline(64)
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            return error(400, "Malformed Content-Length")
        if length < 0:
            return error(400, "Malformed Content-Length")
        if length > cap:
            return error(413, f"Request body larger than {cap} bytes")
        return self.rfile.read(length) if length else b""

    def _handle(self) -> None:
        method = self.command
        segments, query = parse_path(self.path)
        headers = {k.lower(): v for k, v in self.headers.items()}
        refused = self.server.gate.refuse(method, segments, query, headers)
        if refused is not None:  # before any of the body is read: an unauthenticated client buffers nothing here
            self.server.log(method, self.path)
            self.close_connection = True
            self._send(method, refused)
            return
        body = self._body()
        if isinstance(body, Response):  # the unread rest of the body cannot be skipped safely: close
            self.close_connection = True
            self._send(method, body)
            return
        with self.server._lock:
            self.server.received_bytes.append(len(body))
        response = self.server._before(method, self.path)
        if response is None:
            request = Request(
                method=method,
                segments=segments,
                query=query,
                headers=headers,
                body=body,
                # The bound address, never the client's Host header (it would be echoed into the URLs answered).
                base_url=self.server.url,
                path=self.path,
                sign=self.server.gate.sign if self.server.gate.enabled else None,
            )
            try:
                response = dispatch(self.server.store, request)
            except Exception as exc:  # a bug in the double must look like a 500, not a dropped connection
                logger.exception("local hub failed on %s %s", method, self.path)
                response = error(500, f"Local hub error: {exc}")
        self._send(method, response)

    def _send(self, method: str, response: Response) -> None:
        if self.server.latency_s > 0:
            time.sleep(self.server.latency_s)
        self.send_response(response.status)
        length = response.file[2] if response.file else len(response.body)
        for key, value in response.headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        with self.server._lock:
            self.server.sent_bytes.append(0 if method == "HEAD" else length)
        if method == "HEAD":
            return
        if response.file is None:
            self.wfile.write(response.body)
            return
        path, start, count = response.file
        with Path(path).open("rb") as handle:
            self.connection.sendfile(handle, start, count)

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = _handle
