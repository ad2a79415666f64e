"""Benchmark 2: examples/s of `selfrefine eval` vs the engine's saturated throughput.

    .venv/bin/python benchmarks/eval_vs_replay.py [--task commongen] [--limit 6]

`selfrefine eval` runs the examples on llama-server (127.0.0.1, ``-np`` slots) while every
request it sends is recorded. Then the identical request stream is replayed with a plain
``openai.AsyncOpenAI`` client, no loop, no parsing, no dependencies between calls, at
several concurrencies, each on a freshly started server (the eval run left the prompts
cached); the best replay is what the engine can do with that work. The
ratio eval / best replay says how close the loop keeps the engine to saturation.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import openai
from _engines import TASKS, Recording, dump, examples, llama_server, run_eval

from selfrefine.backends.base import CompletionRequest, chat_messages
from selfrefine.backends.openai_compat import OpenAIBackend


def payload(sender: OpenAIBackend, request: CompletionRequest) -> dict:
    """Exactly the body ``sender`` (the backend eval used) sent for this request."""
    body = {"model": sender.model, "messages": chat_messages(request), **sender._sampling(request)}
    response_format = sender._response_format(request)
    if response_format is not None:
        body["response_format"] = response_format
    return body


async def replay(url: str, sender: OpenAIBackend, requests: list[CompletionRequest], concurrency: int) -> float:
    client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="sk-no-key-required", max_retries=0, timeout=600)
    gate = asyncio.Semaphore(concurrency)

    async def one(request: CompletionRequest) -> None:
        async with gate:
            await client.chat.completions.create(**payload(sender, request))

    t0 = time.perf_counter()
    await asyncio.gather(*(one(r) for r in requests))
    seconds = time.perf_counter() - t0
    await client.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=TASKS, default="commongen")
    parser.add_argument("--limit", type=int, default=12)
    parser.add_argument("--max-iters", type=int, default=2)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=12, help="examples in flight for eval")
    parser.add_argument("--replay", default="1,2,4,8", help="replay concurrencies to try")
    parser.add_argument("--json")
    args = parser.parse_args()
    items = examples(args.task, args.limit)

    with llama_server(slots=args.slots) as server:
        recorder = Recording(server.backend())
        ours = run_eval(args.task, recorder, items, concurrency=args.concurrency, max_iterations=args.max_iters)
    replays = {}
    for c in (int(x) for x in args.replay.split(",")):
        # a fresh server each time: the eval run left every one of these prompts cached
        with llama_server(slots=args.slots) as server:
            replays[c] = asyncio.run(replay(server.url, recorder.inner, recorder.requests, c))

    n = len(items)
    print(f"task {args.task}, {n} examples, {len(recorder.requests)} requests, llama-server -np {args.slots}")
    print(ours.line("selfrefine eval"))
    for c, seconds in replays.items():
        print(f"{'plain replay, concurrency ' + str(c):<34} {n / seconds:7.4f} ex/s  {seconds:7.1f} s")
    best_c = min(replays, key=replays.get)
    ratio = replays[best_c] / ours.seconds
    print(f"ratio eval / best replay (concurrency {best_c}): {ratio:.2f}  (target >= 0.9)")
    dump(args.json, {"task": args.task, "eval": vars(ours), "replay_seconds": replays, "ratio": ratio})


if __name__ == "__main__":
    main()
