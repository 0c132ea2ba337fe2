"""The event loop every command runs on: uvloop where it is installed (it is not on every platform)."""

from __future__ import annotations


def install_uvloop() -> None:
    try:
        import uvloop
    except ImportError:  # optional: the standard loop works, a little slower
        return
    uvloop.install()
