"""Starting the built-in simulator as a child process on a free loopback port."""

from __future__ import annotations

import asyncio
import ctypes
import re
import signal
import sys

READY = re.compile(rb"ready on (http://\S+)")
PR_SET_PDEATHSIG = 1


class SimProcess:
    def __init__(self, proc: asyncio.subprocess.Process, url: str, banner: str):
        self.proc = proc
        self.url = url
        self.banner = banner

    async def stop(self) -> None:
        if self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()


async def start_sim(args: list[str], timeout_s: float = 30.0) -> SimProcess:
    # Its own session: a Ctrl-C at the terminal reaches loadgen only, which drains its requests against a
    # simulator that is still up; the simulator still dies with loadgen, even when loadgen is SIGKILLed.
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "loadgen", "sim", "--port", "0", *args,
        stdout=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL, start_new_session=True,
        preexec_fn=_die_with_parent)
    stdout = proc.stdout
    assert stdout is not None  # stdout=PIPE
    try:
        line = await asyncio.wait_for(stdout.readline(), timeout_s)
    except TimeoutError:
        proc.kill()
        raise RuntimeError("the built-in simulator did not start within 30 s") from None
    m = READY.search(line)
    if not m:
        proc.kill()
        raise RuntimeError(f"the built-in simulator failed to start: {line.decode(errors='replace').strip()}")
    asyncio.get_running_loop().create_task(_drain(stdout))
    return SimProcess(proc, m.group(1).decode(), line.decode().strip())


def _die_with_parent() -> None:
    """In the child before exec: ask Linux for SIGTERM when the parent exits (a no-op elsewhere)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.readline():
        pass
