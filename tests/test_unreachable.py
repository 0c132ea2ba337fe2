"""A failed connection in words (`loadgen.target.unreachable`): what the readiness gate's states and
discovery's error say when the server does not answer."""

from __future__ import annotations

import errno
from types import SimpleNamespace

import aiohttp
import pytest

from loadgen.target.unreachable import down_state, host_port

pytestmark = pytest.mark.unit
URL = "http://127.0.0.1:9"


def connector_error(os_error: OSError) -> aiohttp.ClientConnectorError:
    """aiohttp's error for a failed connect, as its connector raises it (the key is what it prints)."""
    return aiohttp.ClientConnectorError(SimpleNamespace(host="127.0.0.1", port=9, ssl=True), os_error)


@pytest.mark.parametrize("exc,state", [
    (connector_error(ConnectionRefusedError(errno.ECONNREFUSED, "Connect call failed")),
     "connection refused: nothing listens on 127.0.0.1:9"),
    (connector_error(OSError(errno.ECONNREFUSED, "Connect call failed")),
     "connection refused: nothing listens on 127.0.0.1:9"),
    (ConnectionRefusedError(), "connection refused: nothing listens on 127.0.0.1:9"),
    (TimeoutError(), "no answer from 127.0.0.1:9 in time"),
    (connector_error(ConnectionResetError(errno.ECONNRESET, "reset")), "connection to 127.0.0.1:9 reset"),
    (aiohttp.ServerDisconnectedError(), "down (ServerDisconnectedError)"),
], ids=["refused", "refused-errno", "refused-bare", "timeout", "reset", "other"])
def test_down_state(exc, state):
    assert down_state(exc, URL) == state


def test_host_port_defaults_by_scheme():
    assert [host_port(u) for u in ("http://gpu-host", "https://gpu-host/v1", "http://[::1]:30000")] == \
        ["gpu-host:80", "gpu-host:443", "[::1]:30000"]
