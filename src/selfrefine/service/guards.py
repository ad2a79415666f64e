"""ASGI guards in front of every route: the bearer key, then the body size.

Pure ASGI (not Starlette's BaseHTTPMiddleware), so a refused request is answered before its
body is read and a streamed reply is passed through untouched."""

from __future__ import annotations

import hmac
import json
from typing import Any

Scope = dict[str, Any]


async def send_error(send: Any, status: int, message: str, type_: str, code: str,
                     headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"error": {"message": message, "type": type_, "code": code, "param": None}}).encode()
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                    *(headers or [])],
    })
    await send({"type": "http.response.body", "body": body})


class BearerAuth:
    """With a key set, every path but ``open_paths`` needs ``Authorization: Bearer KEY``."""

    def __init__(self, app: Any, key: str | None, open_paths: set[str]) -> None:
        self.app = app
        self.key = key.encode() if key else None
        self.open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or self.key is None or scope["path"] in self.open_paths:
            await self.app(scope, receive, send)
            return
        given = dict(scope["headers"]).get(b"authorization", b"")
        scheme, _, token = given.partition(b" ")
        if scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self.key):
            await self.app(scope, receive, send)
            return
        message = ("missing API key: send 'Authorization: Bearer KEY'" if not given
                   else "invalid API key")
        await send_error(send, 401, message, "authentication_error", "invalid_api_key",
                         [(b"www-authenticate", b"Bearer")])


class BodyLimit:
    """Request bodies over ``max_bytes`` get 413, whether the size is declared or streamed."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send, int(declared))
            return
        # no (or a lying) length: read the body here, up to the limit, then replay it
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(send, size)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(b"".join(chunks), receive), send)

    async def _refuse(self, send: Any, size: int) -> None:
        await send_error(send, 413, f"request body is over the server's limit of {self.max_bytes:,} bytes "
                         f"(got at least {size:,})", "invalid_request_error", "request_too_large")


def _replay(body: bytes, receive: Any) -> Any:
    """A receive callable that gives the buffered body once, then the real channel (so a
    disconnect is still seen while the run goes on)."""
    sent = False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
