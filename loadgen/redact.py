"""Keeping secrets out of what loadgen writes.

The API key is read from an environment variable or a file (never a command-line flag, which `ps` shows),
sent only in the target's requests, and never stored. One leak is the server itself: SGLang's `/server_info`
returns every server argument, `api_key` included, and the server info is saved with every result. `redact`
blanks fields whose name says they hold a secret and any string that contains the key.
"""

from __future__ import annotations

import re

REDACTED = "[redacted]"
# `api_key`, `admin_api_key`, `hf_token`, `secret`, `password`, …; not `max_total_tokens` (plural, a count)
SECRET_NAME = re.compile(r"(^|_)(api_?key|key|secret|password|passwd|token|auth|authorization|credentials?)$",
                         re.IGNORECASE)


def redact(obj, secret: str | None = None):
    """A copy of `obj` (JSON-like) with secret-named string fields and every string containing `secret`
    replaced by "[redacted]"."""
    if isinstance(obj, dict):
        return {k: REDACTED if _secret_field(k, v) else redact(v, secret) for k, v in obj.items()}
    if isinstance(obj, list):
        return [redact(v, secret) for v in obj]
    if isinstance(obj, str) and secret and secret in obj:
        return REDACTED
    return obj


def _secret_field(name, value) -> bool:
    return isinstance(name, str) and isinstance(value, str) and bool(value) and bool(SECRET_NAME.search(name))
