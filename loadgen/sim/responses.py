"""The simulator's plain HTTP answers: JSON bodies, SGLang's error object, and the opening of an SSE stream."""

from __future__ import annotations

import orjson
from aiohttp import web

JSON = "application/json"


def json_response(obj, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(obj), status=status, content_type=JSON)


def error_response(message: str, status: int) -> web.Response:
    return json_response({"object": "error", "message": message, "type": "BadRequestError", "code": status},
                         status)


async def read_json_object(request: web.Request) -> dict | web.Response:
    """The request's JSON object body, or the 400 to answer instead."""
    try:
        body = orjson.loads(await request.read())
    except orjson.JSONDecodeError:
        return error_response("request body is not valid JSON", 400)
    if not isinstance(body, dict):
        return error_response("request body must be a JSON object", 400)
    return body


async def open_sse(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await resp.prepare(request)
    return resp
