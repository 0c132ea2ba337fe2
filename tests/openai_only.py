"""A server that speaks the OpenAI routes and nothing of its own (`/v1/models`, streamed `/v1/chat/completions`
with a final usage chunk): every other route answers 404. With `--tgi` it adds TGI's `/info` and `/metrics`
(`tgi_queue_size`, `tgi_batch_current_size`), as a TGI router serves them.

    python3 -m tests.openai_only [--tgi]      prints `ready on http://127.0.0.1:PORT`, serves until killed
"""

from __future__ import annotations

import asyncio
import json
import sys

from aiohttp import web

MODEL = "plain-model"
TGI_INFO = {"model_id": MODEL, "model_sha": None, "model_dtype": "torch.float16", "model_device_type": "cuda",
            "model_pipeline_tag": "text-generation", "max_concurrent_requests": 128, "max_best_of": 2,
            "max_stop_sequences": 4, "max_input_tokens": 1024, "max_total_tokens": 2048,
            "waiting_served_ratio": 1.2, "max_batch_total_tokens": 32000, "max_waiting_tokens": 20,
            "max_batch_size": None, "validation_workers": 2, "max_client_batch_size": 4,
            "router": "text-generation-router", "version": "3.0.1", "sha": None, "docker_label": None}
CHARS_PER_TOKEN = 4


class Server:
    def __init__(self) -> None:
        self.running = 0
        self.requests = 0

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "me"}]})

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        text = "".join(m.get("content", "") for m in body.get("messages", []))
        prompt_tokens, max_tokens = max(1, len(text) // CHARS_PER_TOKEN), int(body.get("max_tokens") or 16)
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": max_tokens,
                 "total_tokens": prompt_tokens + max_tokens}
        if not body.get("stream"):
            return web.json_response({"id": "c", "object": "chat.completion", "model": MODEL, "usage": usage,
                                      "choices": [{"index": 0, "finish_reason": "length",
                                                   "message": {"role": "assistant", "content": "w " * max_tokens}}]})
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        self.running += 1
        self.requests += 1
        try:
            for i in range(max_tokens):
                last = i == max_tokens - 1
                await self._event(resp, {"id": "c", "object": "chat.completion.chunk", "model": MODEL, "choices": [
                    {"index": 0, "delta": {"content": "w "}, "finish_reason": "length" if last else None}]})
                await asyncio.sleep(0.001)
            await self._event(resp, {"id": "c", "object": "chat.completion.chunk", "model": MODEL, "choices": [],
                                     "usage": usage})
            await resp.write(b"data: [DONE]\n\n")
        finally:
            self.running -= 1
        return resp

    @staticmethod
    async def _event(resp: web.StreamResponse, obj: dict) -> None:
        await resp.write(b"data: " + json.dumps(obj).encode() + b"\n\n")

    async def info(self, request: web.Request) -> web.Response:
        return web.json_response(TGI_INFO)

    async def metrics(self, request: web.Request) -> web.Response:
        text = (f"# TYPE tgi_queue_size gauge\ntgi_queue_size 0\n# TYPE tgi_batch_current_size gauge\n"
                f"tgi_batch_current_size {self.running}\n# TYPE tgi_request_count counter\n"
                f"tgi_request_count {self.requests}\n")
        return web.Response(text=text, content_type="text/plain")


def app(tgi: bool) -> web.Application:
    server, application = Server(), web.Application()
    application.router.add_get("/v1/models", server.models)
    application.router.add_post("/v1/chat/completions", server.chat)
    if tgi:
        application.router.add_get("/info", server.info)
        application.router.add_get("/metrics", server.metrics)
    return application


async def serve(tgi: bool) -> None:
    runner = web.AppRunner(app(tgi))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    print(f"ready on http://127.0.0.1:{port}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(serve("--tgi" in sys.argv[1:]))
