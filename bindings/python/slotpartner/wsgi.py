"""A WSGI application around an ``Endpoint`` (gunicorn, uWSGI, mod_wsgi, wsgiref)::

    endpoint = slotpartner.Endpoint.from_environment()
    application = slotpartner.wsgi.application(endpoint, logic)

It reads at most ``max_body_bytes`` + 1 bytes of the body (a larger one is answered 413 and the
rest, up to 1 MiB, read and dropped so that the client gets the answer), and passes
``REQUEST_METHOD``, ``HTTP_X_SERVICE_TOKEN``, ``REMOTE_ADDR`` and ``HTTP_X_FORWARDED_FOR`` (header
values as the bytes received) to ``Endpoint.handle``, which runs ``logic`` and decides the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any

from .endpoint import Endpoint, Logic

#: How much of an oversized body is read and dropped after the 413, at most.
DRAIN_BYTES = 1 << 20

StartResponse = Callable[..., Any]
WsgiApplication = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


def _status_line(status: int) -> str:
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"{status} Status {status}"


#: The status lines made so far, by status: each made once (HTTPStatus's lookup costs several
#: times the rest of a request's work here); a status is a 16-bit number, so this stays small.
_STATUS_LINES: dict[int, str] = {}


def _header(environ: dict[str, Any], name: str) -> bytes | None:
    value = environ.get(name)
    return None if value is None else value.encode("latin-1", "replace")


def read_body(environ: dict[str, Any], limit: int) -> bytes:
    """At most ``limit`` + 1 bytes of the request body (``CONTENT_LENGTH`` of them; when it is
    absent, up to the end of a body the server terminates, ``wsgi.input_terminated``)."""
    stream = environ["wsgi.input"]
    text = environ.get("CONTENT_LENGTH") or ""
    if text.strip().isdigit():
        length: int | None = int(text)
    elif not text and environ.get("wsgi.input_terminated"):
        length = None
    else:
        return b""
    wanted = limit + 1 if length is None else min(length, limit + 1)
    chunks, got = [], 0
    while got < wanted:
        chunk = stream.read(wanted - got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    if length is not None and length > got and got > limit:  # dropped, so that the 413 arrives
        rest = min(length - got, DRAIN_BYTES)
        while rest > 0 and (chunk := stream.read(min(rest, 65536))):
            rest -= len(chunk)
    return b"".join(chunks)


def application(endpoint: Endpoint, logic: Logic) -> WsgiApplication:
    """The WSGI application answering every request through ``endpoint``, running ``logic``
    (``Endpoint.handle`` says when and how)."""
    limit = endpoint.max_body_bytes

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        body = read_body(environ, limit)
        response = endpoint.handle(
            environ.get("REQUEST_METHOD", "GET"),
            _header(environ, "HTTP_X_SERVICE_TOKEN"),
            environ.get("REMOTE_ADDR"),
            _header(environ, "HTTP_X_FORWARDED_FOR"),
            body,
            logic,
        )
        status = response.status
        line = _STATUS_LINES.get(status)
        if line is None:
            line = _STATUS_LINES[status] = _status_line(status)
        start_response(line, [*response.headers, ("Content-Length", str(len(response.body)))])
        return [response.body]

    return app


__all__ = ["application", "read_body"]
