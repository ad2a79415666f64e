"""How ``selfrefine serve`` runs uvicorn: its HTTP/1.1 protocol (h11) with two deadlines that
uvicorn lacks, so that no client holds a connection (and what it pins) for nothing:

- a request's headers must arrive within ``client_timeout`` seconds of the connection (or of
  the first byte after a reply); an idle or slow-loris connection is dropped. (The body has the
  same deadline in :class:`~selfrefine.service.guards.BodyLimit`; uvicorn's own keep-alive
  timeout closes a connection silent after a reply.)
- a reply that cannot be sent for ``client_timeout`` seconds (the client stopped reading and
  every buffer is full) drops the client: the socket is aborted, not closed, since closing
  waits for the unsent bytes to drain, which they never do.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("uvicorn.error")


class _Deadlines:
    """Mixed into uvicorn's H11Protocol (asyncio protocol callbacks, all on the loop)."""

    client_timeout: float = 30.0
    # set by H11Protocol
    loop: Any
    transport: Any
    cycle: Any
    client: Any

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._awaiting: Any = None
        self._stalled: Any = None
        self._expect_request()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)  # type: ignore[misc]
        if self._between_requests():
            self._expect_request()  # armed once, at the first byte: more bytes do not extend it
        elif self._awaiting is not None:
            self._awaiting.cancel()
            self._awaiting = None

    def pause_writing(self) -> None:
        super().pause_writing()  # type: ignore[misc]
        if self._stalled is None:
            self._stalled = self.loop.call_later(self.client_timeout, self._drop, "reads nothing of its reply")

    def resume_writing(self) -> None:
        super().resume_writing()  # type: ignore[misc]
        if self._stalled is not None:
            self._stalled.cancel()
            self._stalled = None

    def connection_lost(self, exc: Exception | None) -> None:
        for timer in (self._awaiting, self._stalled):
            if timer is not None:
                timer.cancel()
        self._awaiting = self._stalled = None
        super().connection_lost(exc)  # type: ignore[misc]

    def _between_requests(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _expect_request(self) -> None:
        if self._awaiting is None:
            self._awaiting = self.loop.call_later(self.client_timeout, self._drop_if_no_request)

    def _drop_if_no_request(self) -> None:
        self._awaiting = None
        if self._between_requests():
            self._drop("sent no whole request")

    def _drop(self, why: str) -> None:
        self._stalled = None
        log.warning("dropped client %s: it %s for %g s", _address(self.client), why, self.client_timeout)
        self.transport.abort()  # connection_lost follows: the request sees a disconnect


def _address(client: Any) -> str:
    return f"{client[0]}:{client[1]}" if client else "?"


def server_config(app: Any, host: str, port: int, client_timeout: float = 30.0, **kwargs: Any) -> Any:
    """uvicorn's Config for ``app``, with the deadlines above (``client_timeout`` seconds)."""
    import uvicorn
    from uvicorn.protocols.http.h11_impl import H11Protocol

    protocol = type("GuardedH11Protocol", (_Deadlines, H11Protocol), {"client_timeout": client_timeout})
    kwargs.setdefault("timeout_keep_alive", 5)  # uvicorn's default, stated: idle after a reply
    return uvicorn.Config(app, host=host, port=port, http=protocol, **kwargs)
