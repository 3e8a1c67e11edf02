import socket

import pytest

from tests.conftest import NetworkBlocked


def test_non_loopback_connect_is_refused() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        with pytest.raises(NetworkBlocked):
            sock.connect(("93.184.216.34", 443))


def test_remote_host_names_never_connect() -> None:
    # Resolution may fail first on a machine without DNS; either way no connection is made.
    with pytest.raises((NetworkBlocked, socket.gaierror)):
        socket.create_connection(("huggingface.co", 443), timeout=0.5)


def test_loopback_is_allowed() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        with socket.create_connection(server.getsockname(), timeout=1):
            pass
