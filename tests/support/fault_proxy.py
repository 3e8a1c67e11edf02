"""A faulty network in front of a local hub: an HTTP proxy that fails chosen requests the way the Internet does.

The local hub's own faults (:meth:`pipeline.localhub.LocalHubServer.inject`) answer a request with an error
*instead of* serving it. A network also loses answers to requests the server did serve: the connection drops
after the commit was applied, or the answer stalls until the client gives up. :class:`FaultProxy` forwards every
request to the local hub and, for the ones a fault picks, answers:

- ``429`` / ``503``: that status, without forwarding (the server never saw it);
- ``drop``: forwarded and applied, then the connection is closed without a byte of the answer;
- ``stall``: forwarded and applied, then the answer is held until the client hangs up (its read timeout), or
  ``hold_s`` at most, and the connection closed; ``gave_up`` counts the clients that hung up first.

Answers that name the local hub's own address (an LFS upload's ``href``, a ``Link`` header) are rewritten to the
proxy's, so every request of a client pointed at the proxy goes through it. Requests are numbered in arrival
order (``requests``), which is how a test fails "each request of one publish in turn".
"""

from __future__ import annotations

import http.client
import json
import re
import select
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal
from urllib.parse import urlsplit

from pipeline.localhub import InBackground

FaultKind = Literal["429", "503", "drop", "stall"]
FAULT_KINDS: tuple[FaultKind, ...] = ("429", "503", "drop", "stall")
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection", "host"}
_TEXT_TYPES = ("application/json", "application/vnd.git-lfs+json", "text/")


@dataclass
class ProxyFault:
    """Fail the request numbered ``at`` (0-based, in arrival order), or (``at`` None) the next ``count`` requests
    matching ``path_regex`` and ``method``, with ``kind``. ``hits`` counts the requests it failed."""

    kind: FaultKind
    at: int | None = None
    path_regex: str = ""
    method: str = "*"
    count: int = 1
    hits: int = 0

    def take(self, index: int, method: str, path: str) -> bool:
        if self.at is not None:
            hit = index == self.at
        else:
            matches = self.method in {"*", method} and re.search(self.path_regex, path) is not None
            hit = matches and self.hits < self.count
        self.hits += hit
        return hit


class FaultProxy(InBackground):
    """A threaded HTTP proxy on a free loopback port in front of ``upstream`` (a local hub's URL).

    Args:
        upstream: Base URL of the server behind (``http://127.0.0.1:PORT``).
        hold_s: The longest a ``stall`` holds an answer when the client never hangs up.
    """

    def __init__(self, upstream: str, *, hold_s: float = 30.0) -> None:
        self.upstream = upstream.rstrip("/")
        parts = urlsplit(self.upstream)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.hold_s = hold_s
        #: (method, path with query) of every request, in arrival order.
        self.requests: list[tuple[str, str]] = []
        #: Stalled answers whose client hung up before ``hold_s``.
        self.gave_up = 0
        self.faults: list[ProxyFault] = []
        self._lock = threading.Lock()
        self._stalling = 0
        self._settled = threading.Condition(self._lock)
        self._server = _ProxyServer(self)
        self._serve(self._server, "localhub-proxy")

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        return f"http://{host}:{port}"

    def fail(
        self, kind: FaultKind, *, at: int | None = None, path_regex: str = "", method: str = "*", count: int = 1
    ) -> ProxyFault:
        """Fail the request numbered ``at``, or the next ``count`` requests matching ``path_regex`` and ``method``."""
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault {kind!r}: one of {', '.join(FAULT_KINDS)}")
        fault = ProxyFault(kind, at, path_regex, method.upper(), count)
        with self._lock:
            self.faults.append(fault)
        return fault

    def settle(self) -> int:
        """Wait until no answer is held any more (each stall ends when its client hangs up, or after ``hold_s``);
        returns ``gave_up``."""
        with self._settled:
            self._settled.wait_for(lambda: self._stalling == 0, timeout=self.hold_s + 5)
            return self.gave_up

    def clear(self) -> None:
        """Remove every fault."""
        with self._lock:
            self.faults = []

    def _arrive(self, method: str, path: str) -> FaultKind | None:
        with self._lock:
            index = len(self.requests)
            self.requests.append((method, path))
            for fault in self.faults:
                if fault.take(index, method, path):
                    self._stalling += fault.kind == "stall"
                    return fault.kind
        return None

    def _stall_ended(self, client_hung_up: bool) -> None:
        with self._settled:
            self.gave_up += client_hung_up
            self._stalling -= 1
            self._settled.notify_all()


class _ProxyServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, proxy: FaultProxy) -> None:
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.proxy = proxy


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _ProxyServer

    def setup(self) -> None:
        super().setup()
        # Nagle's algorithm would hold each small answer until the client's delayed ACK (~40 ms): see the server.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        return

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while size := int(self.rfile.readline(64).split(b";")[0].strip() or b"0", 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline(64)
            while self.rfile.readline(8192).strip():  # trailers
                pass
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _handle(self) -> None:
        proxy = self.server.proxy
        body = self._body()
        fault = proxy._arrive(self.command, self.path)
        if fault in {"429", "503"}:
            payload = json.dumps({"error": f"Injected network fault {fault}"}).encode()
            self.send_response(int(fault or 0))
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        hung_up = False
        try:
            status, reason, headers, answer = self._forward(body)
        except BaseException:
            if fault == "stall":
                proxy._stall_ended(False)
            raise
        if fault == "drop":  # applied upstream; the client never hears of it
            self._hang_up()
            return
        if fault == "stall":
            try:
                hung_up = self._held_until_client_hangs_up(proxy.hold_s)
                self._hang_up()
            finally:
                proxy._stall_ended(hung_up)
            return
        self.send_response(status, reason)
        for key, value in headers:
            self.send_header(key, value)
        if self.command != "HEAD":
            self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(answer)

    def _forward(self, body: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
        proxy = self.server.proxy
        connection = http.client.HTTPConnection(*proxy._target, timeout=60)
        try:
            connection.connect()
            connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
            headers["Host"] = f"{proxy._target[0]}:{proxy._target[1]}"
            headers["Content-Length"] = str(len(body))
            connection.request(self.command, self.path, body=body, headers=headers)
            response = connection.getresponse()
            answer = response.read()
            dropped = _HOP_BY_HOP if self.command == "HEAD" else _HOP_BY_HOP | {"content-length"}
            kept = [(k, v) for k, v in response.getheaders() if k.lower() not in dropped]
        finally:
            connection.close()
        ours = proxy.url
        if response.getheader("Content-Type", "").startswith(_TEXT_TYPES):
            answer = answer.replace(proxy.upstream.encode(), ours.encode())
        kept = [(k, v.replace(proxy.upstream, ours)) for k, v in kept]
        return response.status, response.reason, kept, answer

    def _hang_up(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:  # the client is gone already
            pass

    def _held_until_client_hangs_up(self, hold_s: float) -> bool:
        """Wait until the client closes its end (True) or ``hold_s`` passes (False)."""
        end = time.monotonic() + hold_s
        while (left := end - time.monotonic()) > 0:
            readable, _, _ = select.select([self.connection], [], [], min(left, 0.05))
            if readable:
                try:
                    if self.connection.recv(1, socket.MSG_PEEK) == b"":
                        return True
                except OSError:
                    return True
                time.sleep(0.01)  # the client sent more on this connection: still waiting for the answer
        return False

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = _handle
