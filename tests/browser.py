"""A real headless Chromium driven over the DevTools protocol (aiohttp's websocket client, no extra library):
open a page, collect console errors, uncaught exceptions and failed or outside-the-page loads, evaluate
expressions, take screenshots.

Chromium comes from Debian (`scripts/test-deps.sh`). As root it needs --no-sandbox; every flag that would
make it reach the network (component updates, sync, QUIC, first-run pings) is off, and each browser gets a
fresh profile folder."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import shutil
from pathlib import Path

import aiohttp

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--disable-default-apps", "--hide-scrollbars", "--mute-audio",
         "--remote-debugging-port=0", "--remote-allow-origins=*"]
LOCAL_SCHEMES = ("file:", "data:", "about:", "chrome-error:")


class Page:
    """One tab: `call` a DevTools method, `problems` lists what went wrong while it loaded."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse):
        self.ws = ws
        self.next_id = 0
        self.pending: dict[int, asyncio.Future] = {}
        self.waiters: dict[str, list[asyncio.Future]] = {}
        self.problems: list[str] = []
        self.reader = asyncio.create_task(self._read())

    async def call(self, method: str, timeout: float = 60, **params) -> dict:
        self.next_id += 1
        fut = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = fut
        await self.ws.send_str(json.dumps({"id": self.next_id, "method": method, "params": params}))
        return await asyncio.wait_for(fut, timeout)

    def expect(self, event: str) -> asyncio.Future:
        """A future set by the next `event` (create it before the call that causes the event)."""
        fut = asyncio.get_running_loop().create_future()
        self.waiters.setdefault(event, []).append(fut)
        return fut

    async def _read(self) -> None:
        async for msg in self.ws:
            data = json.loads(msg.data)
            if "id" in data:
                fut = self.pending.pop(data["id"])
                if "error" in data:
                    fut.set_exception(RuntimeError(f"{data['error']}"))
                else:
                    fut.set_result(data.get("result", {}))
                continue
            self._note(data["method"], data.get("params", {}))
            for fut in self.waiters.pop(data["method"], []):
                fut.set_result(data.get("params", {}))

    def _note(self, method: str, p: dict) -> None:
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            self.problems.append("console error: " + " ".join(str(a.get("value", a.get("description")))
                                                               for a in p.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            self.problems.append(f"uncaught exception: {p.get('exceptionDetails', {}).get('text')}")
        elif method == "Log.entryAdded" and p["entry"].get("level") == "error":
            self.problems.append(f"log error: {p['entry'].get('text')} {p['entry'].get('url', '')}")
        elif method == "Network.loadingFailed":
            self.problems.append(f"failed load: {p.get('errorText')} (request {p.get('requestId')})")
        elif method == "Network.requestWillBeSent" and not p["request"]["url"].startswith(LOCAL_SCHEMES):
            self.problems.append(f"fetch outside the page: {p['request']['url']}")

    async def open(self, url: str, width: int, height: int) -> None:
        for domain in ("Page", "Runtime", "Log", "Network"):
            await self.call(f"{domain}.enable")
        await self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                        mobile=False)
        loaded = self.expect("Page.loadEventFired")
        await self.call("Page.navigate", url=url)
        await asyncio.wait_for(loaded, 60)

    async def evaluate(self, expression: str):
        res = await self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"evaluate failed: {res['exceptionDetails']}")
        return res["result"].get("value")

    async def screenshot(self, path: Path, full_page: bool) -> None:
        """A PNG of the viewport, or of the whole page (the viewport stretched to the content's height)."""
        if full_page:
            metrics = await self.call("Page.getLayoutMetrics")
            size = metrics.get("cssContentSize") or metrics["contentSize"]
            await self.call("Emulation.setDeviceMetricsOverride", width=int(size["width"]),
                            height=int(size["height"]), deviceScaleFactor=1, mobile=False)
        shot = await self.call("Page.captureScreenshot", format="png", captureBeyondViewport=full_page)
        path.write_bytes(base64.b64decode(shot["data"]))


class Browser:
    """`async with Browser(profile_dir) as b: page = await b.page()`."""

    def __init__(self, profile: Path):
        self.profile = profile
        self.proc: asyncio.subprocess.Process | None = None
        self.session: aiohttp.ClientSession | None = None
        self.port = 0

    async def __aenter__(self) -> Browser:
        self.proc = await asyncio.create_subprocess_exec(
            CHROMIUM, *FLAGS, f"--user-data-dir={self.profile}", "about:blank",
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        self.port = await asyncio.wait_for(self._devtools_port(), 60)
        self.session = aiohttp.ClientSession()
        return self

    async def _devtools_port(self) -> int:
        seen = []
        while line := await self.proc.stderr.readline():
            seen.append(line.decode(errors="replace"))
            m = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", seen[-1])
            if m:
                asyncio.create_task(self._drain())
                return int(m.group(1))
        raise RuntimeError("chromium exited before DevTools listened:\n" + "".join(seen[-20:]))

    async def _drain(self) -> None:
        while await self.proc.stderr.readline():
            pass

    async def page(self) -> Page:
        async with self.session.put(f"http://127.0.0.1:{self.port}/json/new?about:blank") as resp:
            target = await resp.json(content_type=None)
        ws = await self.session.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0)
        return Page(ws)

    async def __aexit__(self, *exc) -> None:
        if self.session:
            await self.session.close()
        if self.proc and self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 15)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
