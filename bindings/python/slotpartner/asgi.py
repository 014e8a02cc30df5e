"""An ASGI 3 application around an ``Endpoint`` (uvicorn, hypercorn, daphne)::

    endpoint = slotpartner.Endpoint.from_environment()
    application = slotpartner.asgi.application(endpoint, logic)

HTTP requests only (a lifespan is answered, a WebSocket refused). The body is read in chunks up
to ``max_body_bytes`` + 1 bytes (the rest of a larger one, up to 1 MiB, read and dropped so that
the client gets the 413). ``Endpoint.handle``, the logic inside it, runs on a worker thread
(``asyncio.to_thread``): the library's calls and the logic block (the journal, the ledger), and
the event loop keeps serving meanwhile. So ``logic`` is a plain function, called on that thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from .endpoint import Endpoint, Logic, header_list
from .wsgi import DRAIN_BYTES

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
AsgiApplication = Callable[[Scope, Receive, Send], Awaitable[None]]


async def read_body(receive: Receive, limit: int) -> bytes:
    """At most ``limit`` + 1 bytes of the request body, read in the chunks the server gives."""
    chunks, got, dropped = [], 0, 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # http.disconnect: the client is gone
            break
        chunk = message.get("body", b"")
        if got <= limit:
            chunk = chunk[: limit + 1 - got]
            chunks.append(chunk)
            got += len(chunk)
        else:
            dropped += len(chunk)
        if not message.get("more_body", False) or dropped > DRAIN_BYTES:
            break
    return b"".join(chunks)


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def application(endpoint: Endpoint, logic: Logic) -> AsgiApplication:
    """The ASGI application answering every HTTP request through ``endpoint``, running
    ``logic`` off the event loop (``Endpoint.handle`` says when and how)."""
    limit = endpoint.max_body_bytes

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            return await _lifespan(receive, send)
        if kind == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        if kind != "http":
            raise ValueError(f"slotpartner.asgi: unsupported scope type {kind!r}")
        headers = scope.get("headers") or []
        token = next((value for name, value in headers if name == b"x-service-token"), None)
        forwarded = header_list(value for name, value in headers if name == b"x-forwarded-for")
        client = scope.get("client")
        body = await read_body(receive, limit)
        response = await asyncio.to_thread(
            endpoint.handle, scope["method"], token, client[0] if client else None, forwarded, body, logic
        )
        await send(
            {
                "type": "http.response.start",
                "status": response.status,
                "headers": [(name.lower().encode(), value.encode()) for name, value in response.headers]
                + [(b"content-length", str(len(response.body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": response.body})

    return app


__all__ = ["application", "read_body"]
