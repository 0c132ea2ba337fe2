"""TLS for https:// servers, the same for both senders (the h1 pool and aiohttp), and the proxy variables.

`ssl_context` is the one place that turns `--ca-cert` / `--insecure` into an `ssl.SSLContext`. `TlsPreflight`
makes one TLS handshake before discovery, so that a certificate the client does not trust ends the run with
exit 2 and the reason (rather than every request failing as a connection error). `proxy_notice` says when a
proxy variable (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY) would apply to the server: loadgen connects directly all
the same, since a proxy between them would be measured with the server (docs/wire.md).
"""

from __future__ import annotations

import asyncio
import os
import ssl
import urllib.request
from urllib.parse import urlsplit

from loadgen.config import TlsConfig
from loadgen.console import log
from loadgen.errors import UsageError

HANDSHAKE_TIMEOUT_S = 10.0


def ssl_context(url: str, tls: TlsConfig) -> ssl.SSLContext | None:
    """None for http://; for https:// the system's trust store plus `tls.ca_cert`, or no check at all
    with `tls.insecure`. An unreadable or malformed CA file is a UsageError."""
    if urlsplit(url).scheme != "https":
        return None
    if tls.insecure:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    try:
        return ssl.create_default_context(cafile=tls.ca_cert)
    except (OSError, ssl.SSLError) as exc:
        raise UsageError(f"--ca-cert {tls.ca_cert}: {getattr(exc, 'strerror', None) or exc}; give a PEM file "
                         "of the CA that signed the server's certificate") from None


def insecure_warning() -> str:
    return ("WARNING: --insecure: the server's TLS certificate is NOT checked; anyone on the path can read and "
            "change the traffic")


class TlsPreflight:
    """One TLS handshake with an https:// server before any load: an untrusted certificate is exit 2."""

    def __init__(self, tls: TlsConfig):
        self.tls = tls

    async def check(self, session, url: str) -> None:
        ctx = ssl_context(url, self.tls)
        if ctx is None:
            return
        u = urlsplit(url)
        try:
            _, writer = await asyncio.wait_for(
                asyncio.open_connection(u.hostname, u.port or 443, ssl=ctx), HANDSHAKE_TIMEOUT_S)
        except ssl.SSLCertVerificationError as exc:
            hint = "use --ca-cert FILE or --insecure" if not self.tls.ca_cert else "not signed by --ca-cert"
            raise UsageError(f"{u.netloc}: TLS certificate not trusted ({exc.verify_message}); {hint}") from None
        except ssl.SSLError as exc:
            raise UsageError(f"{url}: TLS handshake failed ({exc.reason or exc}); is it an https:// server?") \
                from None
        except (OSError, TimeoutError):
            return  # not listening (yet): the readiness wait and the records say so
        writer.close()


def proxy_notice(url: str, environ: dict | None = None) -> str | None:
    """A line when a proxy variable would route `url` through a proxy (NO_PROXY honoured); None otherwise."""
    env = os.environ if environ is None else environ
    u = urlsplit(url)
    proxies = {k.lower(): v for k, v in env.items() if k.lower() in ("http_proxy", "https_proxy", "all_proxy") and v}
    name = next((n for n in (f"{u.scheme}_proxy", "all_proxy") if n in proxies), None)
    if name is None or bypassed(u.hostname or "", env):
        return None
    return f"{name.upper()} is set, not used: loadgen connects to {u.hostname} directly (NO_PROXY silences this)"


def bypassed(host: str, env) -> bool:
    no_proxy = env.get("no_proxy", env.get("NO_PROXY", ""))
    if no_proxy.strip() == "*":
        return True
    # proxy_bypass_environment is in CPython's urllib.request (undocumented), not in typeshed's stub
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
    return bool(no_proxy) and bypass(host, {"no": no_proxy})


def say_proxy_notice(url: str) -> None:
    note = proxy_notice(url)
    if note:
        log(note)
