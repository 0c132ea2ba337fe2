"""The Ray actor of a `--ray` part: the `--workers` worker (`loadgen.parallel.worker.WorkerMain`), the same
code, served over a TCP socket instead of a pipe.

`listen()` starts the worker's own event loop (uvloop where installed) on a thread of the actor process and
returns the address, on the node's IP, that the driver connects to; one connection, one line-delimited
`loadgen.parallel.wire` stream each way, exactly as over the pipes of `--workers`. The actor's other methods
(`node`, `ping`) answer Ray calls on the actor's main thread: who the node is, and whether it is alive
(the driver's health check, `ray_pool.RayWorker`).

Ray is imported only inside the actor's methods: this module is imported by the driver before it connects.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading

from loadgen.parallel.worker import LINE_LIMIT, WorkerMain

LISTEN_TIMEOUT_S = 30.0


def _loop_factory():
    try:
        import uvloop
    except ImportError:  # optional, as for the worker processes
        return asyncio.new_event_loop
    return uvloop.new_event_loop


class WorkerActor:
    """One part of every cell, on one node (`ray.remote(WorkerActor)` makes the actor class)."""

    def __init__(self, index: int):
        self.index = index
        self.address: tuple[str, int] | None = None
        self.listening = threading.Event()
        self.thread: threading.Thread | None = None

    def node(self) -> dict:
        """The node this part runs on: Ray's node id, host name, IP, cores, the process."""
        import ray

        return {"node_id": ray.get_runtime_context().get_node_id(), "host": socket.gethostname(),
                "ip": ray.util.get_node_ip_address(), "cores": os.cpu_count(), "pid": os.getpid()}

    def ping(self) -> bool:
        return True

    def listen(self) -> tuple[str, int]:
        """Start the worker's loop and return the address it accepts the driver's connection on."""
        import ray

        ip = ray.util.get_node_ip_address()
        self.thread = threading.Thread(target=self._run, args=(ip,), name=f"loadgen-worker-{self.index}",
                                       daemon=True)
        self.thread.start()
        if not self.listening.wait(LISTEN_TIMEOUT_S) or self.address is None:
            raise RuntimeError(f"worker {self.index} could not listen on {ip}")
        return self.address

    def _run(self, ip: str) -> None:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            runner.run(self._serve(ip))

    async def _serve(self, ip: str) -> None:
        served = asyncio.Event()

        async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            main = WorkerMain(self.index)
            main.transport = writer.transport
            try:
                await main.serve(reader)
            finally:
                writer.close()
                served.set()

        server = await asyncio.start_server(connected, ip, 0, limit=LINE_LIMIT)
        self.address = server.sockets[0].getsockname()[:2]
        self.listening.set()
        await served.wait()
        server.close()
