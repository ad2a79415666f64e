"""A request's JSON Schemas checked off the event loop. ``check_schema`` on a large schema
(5,000 properties, under the size limit) takes seconds of pure Python, and the route's body
validation runs on the event loop: every other client, ``/health`` included, waited for it.
This middleware checks each schema a body carries in a worker thread before the route sees
the body; :func:`~selfrefine.core.structured.checked_schema` keeps its verdict, so the route's
own validation (and the run's, and its record's) finds it already made and refuses a bad
schema with the same 400 as before."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..core.structured import checked_schema
from .guards import Scope, _replay

# where a request body carries a JSON Schema: the chat request's response_format and
# options (extra_body), the native request's options
SCHEMA_PATHS = (
    ("response_format", "json_schema", "schema"),
    ("selfrefine", "json_schema"),
    ("options", "json_schema"),
)
ROUTES = ("/v1/chat/completions", "/v1/refine")
# schema checks at once: a burst of large schemas queues here instead of taking every
# worker thread the runs need (drafts are checked in threads too)
_CHECKS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="selfrefine-schema")


class SchemaPrecheck:
    """Checks the JSON Schemas of a POST body to :data:`ROUTES` in a worker thread, then
    hands the body on unchanged (inside :class:`~.guards.BodyLimit`: it is whole, and
    bounded, when it arrives here)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] not in ROUTES:
            await self.app(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            if message["type"] != "http.request":  # gone before the body arrived
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        await asyncio.get_running_loop().run_in_executor(_CHECKS, check_schemas, body)
        await self.app(scope, _replay(body, receive), send)


def check_schemas(body: bytes) -> None:
    """Checks each schema of a request body, so its verdict is kept; what is wrong with the
    body or a schema is left for the route to report."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return
    for path in SCHEMA_PATHS:
        node: Any = data
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict):
            try:
                checked_schema(node)
            except ValueError:
                pass  # refused, and the verdict kept: the route's validation gives the 400
