"""Messages to the user: one line each on stderr, flushed at once (stdout carries only the final tables)."""

from __future__ import annotations

import sys


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
