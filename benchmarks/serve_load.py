"""Throughput of Self-Refine through ``selfrefine serve`` vs the same runs in-process.

    .venv/bin/python benchmarks/serve_load.py [--clients 50] [--requests 4] [--latency 0.2]

Both sides run the same commongen runs on the same backend: the in-package fake model with a
fixed latency per call (I/O-bound, like a remote API), so what differs is only the HTTP path:
uvicorn, FastAPI, JSON, the OpenAI SDK client. The server runs in its own process (as it
would in production); the clients are the official ``openai`` SDK (``AsyncOpenAI``), each
sending its requests one after another. Prints requests/s for each side, their ratio
(server / in-process), and p50/p95 latency per request. One untimed request warms each side
(the first run loads the lemmatiser).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from typing import Any

from selfrefine import FakeBackend, SelfRefine

FEEDBACK = json.dumps({"missing_concepts": ["ball"], "commonsense": "NONE"})


def make_backend(latency: float) -> FakeBackend:
    """Replies depend on the input, so every answer can be checked."""

    def reply(request: Any) -> str:
        if request.role == "feedback":
            return FEEDBACK
        return f"A dog runs past tree {request.prompt.count('tree')}-{len(request.prompt) % 97}."

    return FakeBackend({"generate": [], "feedback": [], "refine": []}, default=reply, latency=latency)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def in_process(args: argparse.Namespace, inputs: list[list[str]]) -> tuple[float, list[float], list[str]]:
    engine = SelfRefine("commongen", make_backend(args.latency), max_iterations=args.iters)
    latencies: list[float] = []
    outputs: list[str] = []

    async def client(mine: list[str]) -> None:
        for text in mine:
            t0 = time.perf_counter()
            result = await engine.arun(text)
            latencies.append(time.perf_counter() - t0)
            outputs.append(result.output or "")

    await engine.arun("warm, up")  # loads the lemmatiser once, as the server's warm-up does
    t0 = time.perf_counter()
    await asyncio.gather(*(client(mine) for mine in inputs))
    return time.perf_counter() - t0, latencies, outputs


async def through_server(
    args: argparse.Namespace, inputs: list[list[str]], port: int
) -> tuple[float, list[float], list[str]]:
    import openai

    # the SDK's default pool (up to 1000 connections) gives each client its own connection
    client = openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="bench", max_retries=0, timeout=600)
    latencies: list[float] = []
    outputs: list[str] = []

    async def one_client(mine: list[str]) -> None:
        for text in mine:
            t0 = time.perf_counter()
            reply = await client.chat.completions.create(
                model="selfrefine/commongen",
                messages=[{"role": "user", "content": text}],
                extra_body={"selfrefine": {"max_iterations": args.iters}},
            )
            latencies.append(time.perf_counter() - t0)
            outputs.append(reply.choices[0].message.content or "")

    await one_client(["warm, up"])  # one untimed request, as on the in-process side
    latencies.clear()
    outputs.clear()
    t0 = time.perf_counter()
    await asyncio.gather(*(one_client(mine) for mine in inputs))
    wall = time.perf_counter() - t0
    await client.close()
    return wall, latencies, outputs


def serve(port: int, latency: float, concurrency: int) -> None:
    """The server process: the same backend and engine options behind uvicorn."""
    import uvicorn

    from selfrefine.backends.roles import RoleBackends
    from selfrefine.service import ServeSettings, create_app
    from selfrefine.service.tracing import Tracing

    settings = ServeSettings(
        backends=RoleBackends.of(make_backend(latency)),
        max_concurrency=concurrency,
        max_queue=concurrency,
        tracing=Tracing.off(),
    )
    uvicorn.run(create_app(settings), host="127.0.0.1", port=port, log_level="warning")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(args: argparse.Namespace) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--serve",
            str(port),
            "--latency",
            str(args.latency),
            "--clients",
            str(args.clients),
        ],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).read()
            return proc, port
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("the server did not start within 60 s")


def report(name: str, wall: float, latencies: list[float], n: int) -> float:
    rate = n / wall
    print(
        f"{name:12s} {rate:8.2f} requests/s   p50 {percentile(latencies, 0.5):6.3f} s   "
        f"p95 {percentile(latencies, 0.95):6.3f} s   mean {statistics.fmean(latencies):6.3f} s   wall {wall:6.1f} s"
    )
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=4, help="requests per client, one after another")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per model call")
    parser.add_argument("--iters", type=int, default=2, help="refinements per run")
    parser.add_argument("--serve", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.latency, args.clients)
        return
    inputs = [[f"dog, ball, park, tree{c}-{r}" for r in range(args.requests)] for c in range(args.clients)]
    n = args.clients * args.requests
    print(
        f"{args.clients} clients x {args.requests} requests, commongen with {args.iters} refinements "
        f"(up to {2 * args.iters + 2} calls each), fake model at {args.latency * 1000:.0f} ms per call"
    )
    local_wall, local_lat, local_out = asyncio.run(in_process(args, inputs))
    proc, port = start_server(args)
    try:
        server_wall, server_lat, server_out = asyncio.run(through_server(args, inputs, port))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    if sorted(local_out) != sorted(server_out):
        raise SystemExit("the server returned other outputs than the in-process runs")
    local = report("in-process", local_wall, local_lat, n)
    remote = report("server", server_wall, server_lat, n)
    print(f"throughput ratio server / in-process: {remote / local:.3f} (target >= 0.9)")


if __name__ == "__main__":
    main()
