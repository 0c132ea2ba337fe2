"""Small asyncio helpers."""

from __future__ import annotations

import asyncio
import contextlib


async def cancel_and_wait(task: asyncio.Task | None) -> None:
    """Cancel a background task and wait until it has really stopped."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def install_uvloop() -> None:
    """Run every later event loop on uvloop where it is installed (it is not on every platform)."""
    try:
        import uvloop
    except ImportError:  # optional: the standard loop works, a little slower
        return
    uvloop.install()
