"""A TCP proxy that misbehaves on purpose, run as its own process between loadgen and a server.

    python3 -m tests.fault_proxy --upstream 127.0.0.1:PORT [faults] [--tls-cert F --tls-key F]

prints `fault-proxy ready on 127.0.0.1:PORT` and serves until SIGTERM. Faults act on what the server sends
(one response at a time: a response starts at the first server byte after a request's bytes):
  --latency-ms MS --jitter-ms MS   every read delayed by MS ± uniform jitter, order kept
  --bandwidth-bps B                at most B bytes/s towards the client
  --reset-after-bytes N            an event stream past N bytes: the client gets a TCP reset (SO_LINGER 0)
  --half-open-after-bytes N        an event stream past N bytes: nothing more is sent, the socket stays open, no FIN
  --trickle-head                   each response head sent a byte at a time (1 ms apart)
  --close-on-reuse                 the second request on a connection is not forwarded: the connection is
                                   closed as it arrives (the keep-alive race, the server closing an idle one)
With --tls-cert/--tls-key it speaks TLS to the client (plain TCP to the upstream): a self-signed https server.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import signal
import socket
import ssl
import struct
import time


class Faults:
    def __init__(self, a: argparse.Namespace):
        self.a = a
        self.last_due = 0.0

    def delay_s(self) -> float:
        a = self.a
        if not (a.latency_ms or a.jitter_ms):
            return 0.0
        return max(0.0, (a.latency_ms + random.uniform(-a.jitter_ms, a.jitter_ms)) / 1000)


async def to_client(upstream: asyncio.StreamReader, client: asyncio.StreamWriter, state: dict, a) -> None:
    """Copy the server's bytes to the client, with the faults."""
    faults = Faults(a)
    due = 0.0
    while data := await upstream.read(65536):
        if state["new_response"]:
            state["new_response"], state["sent"], state["in_head"] = False, 0, True
            state["stream"] = b"text/event-stream" in data[:4096].lower()
        wait = faults.delay_s()
        if wait:  # order kept: a read is never sent before the one before it
            due = max(due, time.monotonic() + wait)
            await asyncio.sleep(max(0.0, due - time.monotonic()))
        if await cut(data, client, state, a):
            return
        await send(data, client, state, a)


async def cut(data: bytes, client: asyncio.StreamWriter, state: dict, a) -> bool:
    """The reset and half-open faults: True when the rest of the connection is given up."""
    limit = a.reset_after_bytes or a.half_open_after_bytes
    if not limit or not state["stream"] or state["sent"] + len(data) <= limit:
        return False
    client.write(data[:max(limit - state["sent"], 0)])
    await client.drain()
    if a.reset_after_bytes:
        sock = client.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.transport.abort()
    else:
        await asyncio.sleep(3600)  # half-open: never another byte, never a FIN
    return True


async def send(data: bytes, client: asyncio.StreamWriter, state: dict, a) -> None:
    if a.trickle_head and state["in_head"]:
        end = data.find(b"\r\n\r\n")
        head, data = (data, b"") if end < 0 else (data[:end + 4], data[end + 4:])
        for i in range(len(head)):
            client.write(head[i:i + 1])
            await client.drain()
            await asyncio.sleep(0.001)
        state["in_head"] = end < 0
        state["sent"] += len(head)
    if not data:
        return
    client.write(data)
    await client.drain()
    state["sent"] += len(data)
    if a.bandwidth_bps:
        await asyncio.sleep(len(data) / a.bandwidth_bps)


async def to_server(client: asyncio.StreamReader, upstream: asyncio.StreamWriter, cw: asyncio.StreamWriter,
                    state: dict, a) -> None:
    """Copy the client's bytes to the server; a read after a response began starts the next request."""
    requests, responding = 0, False
    while data := await client.read(65536):
        if state["sent"] and not state["new_response"]:
            responding = False  # the server has answered: this read is a new request on a reused connection
        if not responding:
            requests += 1
            responding = True
            state["new_response"] = True
            if a.close_on_reuse and requests > 1:
                cw.transport.abort()
                upstream.close()
                return
        upstream.write(data)
        await upstream.drain()
    upstream.close()


async def serve(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter, a) -> None:
    host, port = a.upstream.rsplit(":", 1)
    try:
        up_r, up_w = await asyncio.open_connection(host, int(port))
    except OSError:
        client_w.transport.abort()
        return
    state = {"new_response": True, "sent": 0, "in_head": True, "stream": False}
    tasks = [asyncio.create_task(to_client(up_r, client_w, state, a)),
             asyncio.create_task(to_server(client_r, up_w, client_w, state, a))]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    except (ConnectionError, OSError):
        pass
    finally:
        for t in tasks:
            t.cancel()
        if not a.half_open_after_bytes:
            client_w.close()
        up_w.close()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--upstream", required=True, metavar="HOST:PORT")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--latency-ms", type=float, default=0.0)
    p.add_argument("--jitter-ms", type=float, default=0.0)
    p.add_argument("--bandwidth-bps", type=float, default=0.0)
    p.add_argument("--reset-after-bytes", type=int, default=0)
    p.add_argument("--half-open-after-bytes", type=int, default=0)
    p.add_argument("--trickle-head", action="store_true")
    p.add_argument("--close-on-reuse", action="store_true")
    p.add_argument("--tls-cert")
    p.add_argument("--tls-key")
    return p


async def main() -> None:
    a = parser().parse_args()
    ctx = None
    if a.tls_cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(a.tls_cert, a.tls_key)
    server = await asyncio.start_server(lambda r, w: serve(r, w, a), "127.0.0.1", a.port, ssl=ctx)
    port = server.sockets[0].getsockname()[1]
    scheme = "https" if ctx else "http"
    print(f"fault-proxy ready on {scheme}://127.0.0.1:{port}", flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with server:
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main())
