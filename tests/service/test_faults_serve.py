"""Fault injection on ``selfrefine serve`` (issue 21's fault suite, the service part): 200
streaming clients that disconnect midway (half while queued, half after the first draft) and
20 that stop reading, at once, against a real uvicorn on 127.0.0.1 configured as the command
configures it. Afterwards the server is back to 0 running and 0 queued, every connection is
gone, and nothing is left behind, measured: the event loop's tasks are as many as before, no
queue place or request cycle is alive, and the process's memory has not grown by what the
non-readers' unsent replies weighed. The model is the in-package fake."""

from __future__ import annotations

import asyncio
import ctypes
import gc
import json
import re
import socket
import threading
import time
import tracemalloc
from typing import Any

import httpx2
import uvicorn
from uvicorn.protocols.http.h11_impl import RequestResponseCycle

from selfrefine.backends.base import CompletionRequest
from selfrefine.backends.fake import FakeBackend
from selfrefine.backends.roles import RoleBackends
from selfrefine.service import ServeSettings, create_app
from selfrefine.service.connections import server_config
from selfrefine.service.engines import Reservation
from selfrefine.service.tracing import Tracing

HUGE = 200_000  # characters per draft for the clients that stop reading


def reply(request: CompletionRequest) -> str:
    """Drafts that differ each time (long ones for 'huge' inputs), a critic never satisfied:
    every run goes on to its last refinement unless its client leaves."""
    concepts = re.findall(r"^Concepts: (.*)$", request.prompt, re.MULTILINE)[-1]
    if request.role == "feedback":
        return json.dumps({"missing_concepts": [concepts.split(",")[0].strip()], "commonsense": "NONE"})
    filler = "x" * (HUGE if "huge" in concepts else 50)
    return f"{concepts} {time.monotonic_ns()} {filler}"


class Server:
    def __init__(self, client_timeout: float) -> None:
        self.settings = ServeSettings(
            backends=RoleBackends.of(FakeBackend(default=reply, latency=0.05)),
            max_concurrency=16,
            max_queue=256,
            client_timeout=client_timeout,
            tracing=Tracing.off(),
        )
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = server_config(create_app(self.settings), "127.0.0.1", self.port, client_timeout, log_level="error")
        config.timeout_graceful_shutdown = 3
        self.server = uvicorn.Server(config)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_until_complete, args=(self.server.serve(sockets=[sock]),), daemon=True
        )
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)

    def tasks(self) -> int:
        """Tasks on the server's loop, besides the one that counts them."""

        async def count() -> int:
            return len(asyncio.all_tasks()) - 1

        return asyncio.run_coroutine_threadsafe(count(), self.loop).result(5)

    def health(self) -> dict[str, Any]:
        return httpx2.get(f"{self.url}/health").json()

    def connections(self) -> int:
        return len(self.server.server_state.connections)

    def wait(self, ready: Any, timeout: float) -> float:
        start = time.monotonic()
        while not ready():
            assert time.monotonic() - start < timeout, (self.health(), self.connections())
            time.sleep(0.1)
        return time.monotonic() - start

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)


def rss_mb() -> float:
    """Resident memory after a collection, with glibc's free heap pages given back (else
    memory freed but kept by malloc would read as held)."""
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def alive(cls: type) -> int:
    gc.collect()
    # type(), not isinstance(): that would ask lazy proxies (the openai SDK's) for __class__,
    # which imports their modules, and the count would measure its own imports
    return sum(1 for o in gc.get_objects() if type(o) is cls)


def body(concepts: str) -> dict[str, Any]:
    return {
        "model": "selfrefine/commongen",
        "stream": True,
        "messages": [{"role": "user", "content": concepts}],
        "selfrefine": {"max_iterations": 10},
    }


async def leave_midway(url: str, i: int) -> int:
    """A streaming client that leaves: at once after the headers (often still queued), or
    after the first draft's reasoning. Returns the events it read."""
    events = 0
    async with httpx2.AsyncClient(timeout=60) as client:
        async with client.stream("POST", f"{url}/v1/chat/completions", json=body(f"a{i}, b{i}, c{i}")) as response:
            assert response.status_code == 200
            if i % 2:
                async for line in response.aiter_lines():
                    events += line.startswith("data: ")
                    if "Draft 0" in line:
                        break
    return events


def stop_reading(port: int, i: int) -> socket.socket:
    """A streaming client that sends its request and never reads (a 4 KiB receive window)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    data = json.dumps(body(f"huge{i}, b, c")).encode()
    sock.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(data), data)
    )
    return sock


async def leavers(url: str, n: int) -> list[int]:
    return await asyncio.gather(*[leave_midway(url, i) for i in range(n)])


def test_200_leaving_and_20_non_reading_streams_leave_nothing_behind():
    server = Server(client_timeout=2.0)
    try:
        # warm: imports, the engine, first allocations, and a whole run (the metric's lemma table)
        warm = httpx2.post(
            f"{server.url}/v1/refine",
            timeout=60,
            json={"task": "commongen", "input": "dog, ball", "options": {"max_iterations": 0}},
        )
        assert warm.status_code == 200, warm.text
        asyncio.run(leavers(server.url, 4))
        server.wait(lambda: server.health()["running"] == 0 and server.connections() == 0, 20)
        tasks_before, rss_before = server.tasks(), rss_mb()
        tracemalloc.start()  # what Python allocates from here on, and still holds at the end

        stalled = [stop_reading(server.port, i) for i in range(20)]
        start = time.monotonic()
        events = asyncio.run(leavers(server.url, 200))
        leaving_s = time.monotonic() - start
        assert sum(e > 0 for e in events) == 100  # the odd ones saw the first draft, then left
        idle_s = server.wait(lambda: server.health()["running"] == 0 and server.health()["queued"] == 0, 60)
        dropped_s = server.wait(lambda: server.connections() == 0, 30)  # the non-readers, dropped
        for sock in stalled:
            sock.close()

        # a connection the client reset stays pinned by uvicorn's keep-alive timer until it fires (5 s)
        cycles_s = server.wait(lambda: alive(RequestResponseCycle) == 0, 10)
        fake = server.settings.backends.model
        calls = len(fake.requests)
        fake.requests.clear()  # the fake's own record of every prompt (megabytes): not the server's
        fake.cancelled.clear()
        tasks_after, rss_after = server.tasks(), rss_mb()
        held, peak = tracemalloc.get_traced_memory()
        top = [str(stat) for stat in tracemalloc.take_snapshot().statistics("filename")[:3]]
        tracemalloc.stop()
        print(
            f"\n200 leaving + 20 non-reading streams: leavers done in {leaving_s:.1f}s, idle {idle_s:.1f}s later, "
            f"non-readers dropped {dropped_s:.1f}s after that, request cycles freed {cycles_s:.1f}s later; {calls} model calls; tasks {tasks_before} -> "
            f"{tasks_after}; Python memory held {held / 2**20:.1f} MiB (peak {peak / 2**20:.0f}); "
            f"RSS {rss_before:.0f} -> {rss_after:.0f} MiB"
        )
        assert server.health() | {"version": None} == {"status": "ok", "version": None, "running": 0, "queued": 0}
        assert tasks_after == tasks_before
        assert alive(Reservation) == 0
        # the non-readers' runs wrote 11 drafts of 200 KB each, twice (reasoning, trajectory),
        # that their sockets never took: none of it may stay
        assert held < 4 * 2**20, (held, peak, top)
    finally:
        server.stop()
