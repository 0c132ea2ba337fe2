"""What a sender is told (target, API, headers, time limits, how TLS certificates are checked) and the message a limit gives when it is hit.

The three limits of a measured request, the same for both senders:
- connect: `CONNECT_TIMEOUT_S` to open a connection (aiohttp's `sock_connect`; `h1.Pool`'s default);
- idle: `ClientConfig.idle_timeout_s`, the longest time without a byte, the wait for the response head
  included (aiohttp's `sock_read`; `h1_sender.Watchdog`);
- total: `ClientConfig.timeout_s`, from the send to the end of the response.
A request that hits one ends with outcome "timeout" and the error `timeout_error(which, limit_s, chunks)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from loadgen.config import TlsConfig
from loadgen.names import Api

CONNECT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ClientConfig:
    """Where and how a sender sends: `base_url` + the API's path, extra `headers`, limits in seconds."""

    base_url: str
    api: Api
    timeout_s: float = 600.0
    idle_timeout_s: float = 120.0
    headers: dict | None = None
    tls: TlsConfig = field(default_factory=TlsConfig)


def timeout_error(which: str, limit_s: float, chunks: int) -> str:
    """`"<which> timeout (<limit_s> s) after <chunks> chunks"`; `which` is "connect", "idle" or "total"."""
    return f"{which} timeout ({limit_s:g} s) after {chunks} chunks"
