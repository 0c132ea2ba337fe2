"""Starting the built-in simulator as a child process on a free loopback port."""

from __future__ import annotations

import asyncio
import re
import sys

READY = re.compile(rb"ready on (http://\S+)")


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
            except asyncio.TimeoutError:
                self.proc.kill()
                await self.proc.wait()


async def start_sim(args: list[str], timeout_s: float = 30.0) -> SimProcess:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "loadgen", "sim", "--port", "0", *args,
        stdout=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL)
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), timeout_s)
    except asyncio.TimeoutError:
        proc.kill()
        raise RuntimeError("the built-in simulator did not start within 30 s") from None
    m = READY.search(line)
    if not m:
        proc.kill()
        raise RuntimeError(f"the built-in simulator failed to start: {line.decode(errors='replace').strip()}")
    asyncio.get_running_loop().create_task(_drain(proc.stdout))
    return SimProcess(proc, m.group(1).decode(), line.decode().strip())


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.readline():
        pass
