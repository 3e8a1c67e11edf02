"""The HTTP side of the local hub: a threaded stdlib server and a request log (the tests' server injects faults
through :meth:`LocalHubServer.intercept`)."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterable
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


class LocalHubServer(ThreadingHTTPServer):
    """ThreadingHTTPServer bound to a store; records every request.

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
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:41234``."""
        host, port = self.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        return f"http://{host}:{port}"

    def log(self, method: str, path: str) -> None:
        """Record a request in :attr:`requests`."""
        with self._lock:
            self.requests.append((method, path))

    def intercept(self, method: str, path: str) -> Response | None:
        """An answer given in place of serving a logged request, or None to serve it: a test's server injects
        faults and hooks here (``tests/support/faulty_hub.py``)."""
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
            length = -1
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
        self.server.log(method, self.path)
        response = self.server.intercept(method, self.path)
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
