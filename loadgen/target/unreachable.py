"""What a failed connection to the server says, in words: "connection refused: nothing listens on
127.0.0.1:9" rather than an exception's class name. Shared by the readiness gate's states and discovery's
error, so a wrong port reads the same wherever it is met."""

from __future__ import annotations

import errno
from urllib.parse import urlsplit


def host_port(url: str) -> str:
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    host = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else parts.hostname
    return f"{host}:{port}"


def _os_error(exc: BaseException) -> BaseException:
    """The OS error under aiohttp's connector error (its `os_error`), else the exception itself."""
    return getattr(exc, "os_error", None) or exc


def refused(exc: BaseException) -> bool:
    """The connection was refused: nothing listens on that port (or a firewall rejects it)."""
    err = _os_error(exc)
    return isinstance(err, ConnectionRefusedError) or getattr(err, "errno", None) == errno.ECONNREFUSED


def down_state(exc: BaseException, url: str) -> str:
    """One line for a request to `url` that failed before an answer: refused, timed out, reset, else the
    exception's class (a state of the readiness gate: "down (…)")."""
    if refused(exc):
        return f"connection refused: nothing listens on {host_port(url)}"
    if isinstance(exc, TimeoutError):
        return f"no answer from {host_port(url)} in time"
    if isinstance(_os_error(exc), ConnectionResetError):
        return f"connection to {host_port(url)} reset"
    return f"down ({type(exc).__name__})"
