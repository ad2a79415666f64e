"""ASGI guards in front of every route: the Host header, the bearer key, the body size (and
the time it takes to arrive), then the body's text (UTF-8, no lone surrogates).

Pure ASGI (not Starlette's BaseHTTPMiddleware), so a refused request is answered before its
body is read and a streamed reply is passed through untouched."""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

Scope = dict[str, Any]
SMALL_BODY = 64_000  # bytes of a body whose text is checked on the event loop (well under 50 ms)


async def send_error(
    send: Any,
    status: int,
    message: str,
    type_: str,
    code: str,
    headers: list[tuple[bytes, bytes]] | None = None,
    param: str | None = None,
) -> None:
    body = json.dumps({"error": {"message": message, "type": type_, "code": code, "param": param}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
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
        message = "missing API key: send 'Authorization: Bearer KEY'" if not given else "invalid API key"
        await send_error(
            send, 401, message, "authentication_error", "invalid_api_key", [(b"www-authenticate", b"Bearer")]
        )


# a Host header: a bracketed IPv6 address or a name (letters, digits, '-', '.', '_'), then
# at most an optional ':port'; nothing else (``[::1]evil.com`` was read as ``::1``)
_HOST = re.compile(r"(?:\[(?P<ip6>[0-9a-f:.]+(?:%25[0-9a-z._~-]+)?)\]|(?P<name>[0-9a-z._-]+))(?::[0-9]{1,5})?")


def host_name(header: str) -> str:
    """The name of a Host header, without its port: ``[::1]:8000`` -> ``::1``; ``""`` when
    the header is not one bracketed IPv6 address or name and an optional port."""
    match = _HOST.fullmatch(header.strip().lower())
    if match is None:
        return ""
    return match["ip6"] or match["name"]


def is_loopback_name(name: str) -> bool:
    if name == "localhost" or name.endswith(".localhost"):  # RFC 6761: always this machine
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class HostCheck:
    """Only loopback names (and ``allowed``; ``*``: any) in the Host header: a web page that
    rebinds its own DNS name to 127.0.0.1 still sends its name, and is refused."""

    def __init__(self, app: Any, allowed: list[str]) -> None:
        self.app = app
        self.any = "*" in allowed
        self.allowed = {host_name(a) for a in allowed}

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket") or self.any:
            await self.app(scope, receive, send)
            return
        header = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
        name = host_name(header)
        if name and (is_loopback_name(name) or name in self.allowed):
            await self.app(scope, receive, send)
            return
        await send_error(
            send,
            400,
            f"Host {header!r} is not served here (only loopback names are, so that a web "
            f"page cannot reach this server by DNS rebinding); to serve it, start the server with "
            f"--allowed-host {name or 'NAME'}",
            "invalid_request_error",
            "invalid_host",
        )


class BodyLimit:
    """Request bodies over ``max_bytes`` get 413, whether the size is declared or streamed;
    a body that has not all arrived ``timeout`` seconds after the headers gets 408; a body
    that is not UTF-8, or whose JSON holds a lone surrogate (``"\\ud800"``, which JSON
    allows and no encoder can write back), gets 400 naming the field (:func:`text_problem`),
    before any route (and so any model call) sees it."""

    def __init__(self, app: Any, max_bytes: int, timeout: float | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send, int(declared))
            return
        try:
            async with asyncio.timeout(self.timeout):
                body = await self._read(receive, send)
        except TimeoutError:  # a slow-loris body: the connection is not held open for it
            await send_error(
                send,
                408,
                f"the request body did not arrive within {self.timeout:g} s",
                "invalid_request_error",
                "request_timeout",
                [(b"connection", b"close")],
            )
            return
        if body is None:
            return
        # checked here, where the body is already buffered; a big one in a thread: a body of
        # 900 KB of numbers with an escape in it took 0.7 s to walk, on the event loop
        problem = text_problem(body) if len(body) < SMALL_BODY else await _in_thread(text_problem, body)
        if problem is not None:
            param, text = problem
            await send_error(send, 400, text, "invalid_request_error", "invalid_text", param=param)
            return
        await self.app(scope, _replay(body, receive), send)

    async def _read(self, receive: Any, send: Any) -> bytes | None:
        """The body, read here up to the limit (a length may lie); None once answered."""
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(send, size)
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _refuse(self, send: Any, size: int) -> None:
        await send_error(
            send,
            413,
            f"request body is over the server's limit of {self.max_bytes:,} bytes (got at least {size:,})",
            "invalid_request_error",
            "request_too_large",
        )


# two threads for big bodies' checks: more would only contend for the interpreter with the loop
_CHECKERS = ThreadPoolExecutor(2, thread_name_prefix="selfrefine-body")


async def _in_thread(check: Any, body: bytes) -> Any:
    return await asyncio.get_running_loop().run_in_executor(_CHECKERS, check, body)


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


def text_problem(body: bytes) -> tuple[str | None, str] | None:
    """(the field, the message) if ``body`` is not valid text; None if it is, or is not JSON
    (the route reports that)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, (
            f"the request body is not UTF-8 text (byte 0x{body[exc.start]:02x} at offset {exc.start}); "
            "send JSON encoded as UTF-8"
        )
    if "\\ud" not in text.lower():  # a lone surrogate can only arrive as an escape
        return None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    found = _surrogate_in(data)
    if found is None:
        return None
    path, value = found
    at = next(i for i, c in enumerate(value) if 0xD800 <= ord(c) <= 0xDFFF)
    return path or None, (
        f"{path or 'body'}: a lone surrogate (\\u{ord(value[at]):04x} at character {at}) is "
        "not Unicode text; send valid UTF-8 text"
    )


def _surrogate_in(data: Any) -> tuple[str, str] | None:
    """The dotted path and value of the first string (key or value) with a lone surrogate;
    a walk with a stack, so deep nesting cannot overflow it."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            if not item.isascii() and any(0xD800 <= ord(c) <= 0xDFFF for c in item):
                return path, item
        elif isinstance(item, dict):
            for key, value in reversed(list(item.items())):
                stack.append((f"{path}.{key}" if path else str(key), value))
                stack.append((path, key))
        elif isinstance(item, list):
            stack.extend((f"{path}.{i}" if path else str(i), v) for i, v in reversed(list(enumerate(item))))
    return None
