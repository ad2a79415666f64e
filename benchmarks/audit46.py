"""Issue 46's "Done when", run against a real ``selfrefine serve``: the audit's payloads.

    PYTHONPATH=src .venv/bin/python benchmarks/audit46.py [--out docs/audit46.md] [--stream-seconds 45]

Starts ``selfrefine serve --task hostile.yaml --model fake:replies.json`` on 127.0.0.1 in a
fresh run folder (its working directory, TMPDIR and HOME), polls ``/health`` every 0.25 s
from a process of its own, and sends the issue's payloads one after another: for each, the
HTTP status(es), the seconds it took and the longest ``/health`` answer while it ran. Then a
second server whose fake model takes 20 s for every call serves one streamed request for
``--stream-seconds``: when its first progress came (a reasoning chunk or an SSE comment) and
its longest silence. Last, the repository and the real home are checked for files written
during the run (nothing may be written outside the run folder). Prints a table and writes
it, with the date, the command and the machine's load, to ``--out``.

The bars (issue 46, Done when): /health <= 1 s throughout, no 500, first progress <= 2 s,
no silence > 12 s. The whole run takes 3-5 minutes on a loaded 2-core machine."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx2

ROOT = Path(__file__).resolve().parents[1]
HEALTH_BAR, FIRST_BAR, SILENCE_BAR = 1.0, 2.0, 12.0
TEMPLATES = {"generate": "Write about {{ input }}.", "feedback": "Rate: {{ draft }}", "refine": "Better: {{ draft }}"}
HOSTILE, CHAT = "selfrefine/hostile", "selfrefine/chat"

# -- the payloads' material ---------------------------------------------------------------------

HEAVY = [rf"(?:\w+\W){{0,3}}{chr(ord('A') + i % 26)}{i // 26}" for i in range(32)]  # each within the bound alone
REGEX_DRAFT = "a" * 4999 + " "  # the draft that makes each of them slowest
rng = random.Random(7)
VOCAB = list("abcdefghijklmnopqrstuvwxyz") + "to of in is it on at by an be or".split()
ASKED = ["echoprobe", *(rng.choice(VOCAB) for _ in range(7_999))]
ECHO = " ".join(w if i % 40 else "q" for i, w in enumerate(ASKED)) + " echoprobe"  # one word in 40 changed
LONG_VALUES = json.dumps({"a": "a" * 100_000, "b": "b" * 100_000})
TWO_PATTERNS = {"type": "object", "properties": {"a": {"pattern": "a.*b"}, "b": {"pattern": "b.*c"}}}
LOOP = {"$defs": {"x": {"$ref": "#/$defs/x"}}, "$ref": "#/$defs/x"}
TREE = {
    "$defs": {
        "T": {
            "type": "object",
            "properties": {"v": {"type": "integer"}, "c": {"type": "array", "items": {"$ref": "#/$defs/T"}}},
        }
    },
    "$ref": "#/$defs/T",
}
DERIVED = {
    "0th paragraph": "Write two paragraphs about cats. The 0th paragraph must start with the word hello.",
    "70-char keyword": 'Write a sentence that includes the keyword "' + "k" * 70 + '".',
    "40 instructions": "Write a story. " + " ".join(f"Use the word w{i} at least {i + 1} times." for i in range(40)),
}
BEFORE = {  # the figures on c3793c2 (its audit, or this script's stream there)
    "1.": "77.8 s, /health 9.0 s",
    "2.": "21.6 s, /health 22.9 s",
    "3.": "12-17 s, /health 6.5 s",
    "3b": "/health median 13.7 s, max 113.8 s",
    "4.": "58.3 s, /health 15.7 s",
    "5.": "29 of 30 got nothing in 40 s; /health > 30 s",
    "6.": "36 s of CPU in the next 52 s",
    "7.": "500 task_failed",
    "8.": "500 RecursionError",
    "8b": "500 RecursionError",
    "9.": "accepted (openai: dies later)",
    "10": '502 "no answer: None"',
    "19": "first progress after the 20 s call; silences of 20 s (here: none in 30 s, then a read timeout)",
}
LANGUAGES = ["en", "de", "fr", "es", "it", "nl", "pt", "sv"]


def _deep_tree(depth: int) -> str:
    tree: dict = {"v": 1, "c": []}
    for _ in range(depth):
        tree = {"v": 1, "c": [tree]}
    return json.dumps(tree)


def _long_draft(seed: int) -> str:
    """~95,000 characters in 8,000 capitalised and plain words: each capital_words check reads it all."""
    words = ["Alphabetical", "betatron", "Gammaray", "deltawing", "Epsilonic", "zetaform", "Etalon", "thetaform"]
    r = random.Random(seed)
    return " ".join(r.choice(words) + ("." if r.random() < 0.1 else "") for _ in range(8000))


def wide(n: int, tag: str) -> dict:
    """``n`` properties (5,000: 59 KB, under the 64 KB limit); the title makes each tag's schema its own."""
    return {"title": f"wide-{tag}", "type": "object", "properties": {str(i): {} for i in range(n)}}


# the fake model's replies: a marker in the request text picks the draft (derivation is off
# wherever a marker is used, so the marker never answers a derivation call)
REPLIES = {
    "table": {
        "echoprobe": ECHO,
        "regexprobe": REGEX_DRAFT,
        "patternprobe": LONG_VALUES,
        "treeprobe": _deep_tree(300),
    },
    "default": "{}",
}
SLOW_REPLIES = {"default": "A fine reply.", "latency": 20.0}
CPU_REPLIES = {"generate": [_long_draft(seed) for seed in range(8)], "default": "fine"}  # 8 distinct samples


# -- the server and the /health poller -----------------------------------------------------------

POLLER = """
import sys, time, httpx2
out = open(sys.argv[2], "a", buffering=1)
with httpx2.Client(timeout=60) as client:
    while True:
        started = time.time()
        try:
            ok = client.get(sys.argv[1] + "/health").status_code == 200
        except httpx2.HTTPError:
            ok = False
        took = time.time() - started
        out.write(f"{started:.3f} {took:.3f} {int(ok)}\\n")
        time.sleep(max(0.0, 0.25 - took))
"""


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Server:
    url: str
    proc: subprocess.Popen
    health_log: Path

    def health_max(self, start: float, end: float) -> float:
        """The longest /health answer among the polls that overlapped [start, end] (wall clock)."""
        worst = 0.0
        for line in self.health_log.read_text().splitlines():
            began, took, ok = line.split()
            b, t = float(began), float(took)
            if b <= end and b + t >= start:
                worst = max(worst, t if ok == "1" else 60.0)
        return worst


@contextmanager
def serving(folder: Path, name: str, replies: dict, *extra: str) -> Iterator[Server]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tmp").mkdir(exist_ok=True)
    (folder / "replies.json").write_text(json.dumps(replies))
    task = folder / "hostile.yaml"
    task.write_text(json.dumps({"name": "hostile", **TEMPLATES, "max_iterations": 1}))
    port = _port()
    command = [sys.executable, "-m", "selfrefine", "serve", "--task", str(task), "--port", str(port)]
    command += ["--model", f"fake:{folder / 'replies.json'}", "--log-level", "warning", *extra]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "SELFREFINE_API_KEY": ""}
    env |= {"TMPDIR": str(folder / "tmp"), "HOME": str(folder)}
    log = open(folder / f"{name}.log", "w")  # noqa: SIM115 - held for the server's life
    proc = subprocess.Popen(command, env=env, cwd=folder, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    health_log = folder / f"{name}-health.txt"
    poller = None
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, (folder / f"{name}.log").read_text()
            try:
                if httpx2.get(f"{url}/health").status_code == 200:
                    break
            except httpx2.TransportError:
                pass
            assert time.monotonic() < deadline, "selfrefine serve did not start in 90 s"
            time.sleep(0.2)
        poller = subprocess.Popen([sys.executable, "-c", POLLER, url, str(health_log)], env=env)
        time.sleep(1.0)
        yield Server(url, proc, health_log)
    finally:
        for p in (poller, proc):
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
        log.close()


# -- sending -------------------------------------------------------------------------------------


@dataclass
class Row:
    payload: str
    statuses: list[int]
    seconds: float
    health: float
    note: str = ""
    extra_bars: list[tuple[str, bool]] = field(default_factory=list)

    @property
    def status(self) -> str:
        counts: dict[int, int] = {}
        for s in self.statuses:
            counts[s] = counts.get(s, 0) + 1
        return ", ".join(f"{n}x {s}" if n > 1 else str(s) for s, n in sorted(counts.items()))

    @property
    def held(self) -> bool:
        no_500 = all(0 < s < 500 for s in self.statuses)  # a budget spent before draft 0: 422
        return no_500 and self.health <= HEALTH_BAR and all(ok for _, ok in self.extra_bars)


def _chat(model: str, text: str, options: dict | None = None, **top: object) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": text}], "selfrefine": options or {}, **top}


def _send(url: str, body: dict | bytes, timeout: float = 180) -> tuple[int, dict]:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()  # NaN stays NaN, as a client may send
    try:
        reply = httpx2.post(
            f"{url}/v1/chat/completions", content=content, headers={"content-type": "application/json"}, timeout=timeout
        )
    except httpx2.HTTPError as error:
        return 0, {"error": {"message": f"no reply: {error!r}"}}
    try:
        return reply.status_code, reply.json()
    except ValueError:
        return reply.status_code, {"text": reply.text[:200]}


def _message(reply: dict) -> str:
    if "error" in reply:
        return str(reply["error"].get("message", ""))[:140]
    sr = reply.get("selfrefine") or {}
    dropped = [d.get("reason", "") for d in sr.get("checks_dropped") or []]
    said = f"stop: {sr.get('stop_reason')}" + (f"; dropped: {'; '.join(dropped)}"[:140] if dropped else "")
    verification = ((sr.get("iterations") or [{}])[-1] or {}).get("verification") or {}
    finding = (verification.get("text") or "").split("\n")[0]
    return said + (f"; finding: {finding[:120]}" if finding else "")


def measure(server: Server, name: str, bodies: list[dict | bytes], timeout: float = 180) -> Row:
    """Each body sent at once (one thread each); the statuses, seconds and /health's worst meanwhile."""
    results: list[tuple[int, dict]] = []
    threads = [threading.Thread(target=lambda b=b: results.append(_send(server.url, b, timeout))) for b in bodies]
    start = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 10)
    end = time.time()
    time.sleep(0.3)  # the poll that overlapped the end is written
    notes = sorted({_message(r) for _, r in results})
    row = Row(name, [s for s, _ in results], end - start, server.health_max(start, end), " | ".join(notes)[:300])
    print(f"{row.payload:42} {row.status:14} {row.seconds:7.1f} s  /health max {row.health:5.2f} s  {row.note[:90]}")
    return row


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def disconnect(server: Server) -> Row:
    """8 samples of a 95,000-character draft, 32 checks each (~2 s of CPU a sample); the client
    leaves after 2 s. The server's CPU in the 5 s after it left, and how soon ``running`` is 0."""
    capitals = [{"type": "capital_words", "relation": "at least", "n": n} for n in range(31)]
    options = {"checks": [{"type": "language", "code": "en"}, *capitals], "derive_checks": False}
    body = _chat(HOSTILE, "rain", {**options, "samples": 8, "max_iterations": 1, "max_tokens": 8192})
    idle = _cpu_seconds(server.proc.pid)
    time.sleep(2.0)
    idle = _cpu_seconds(server.proc.pid) - idle
    start, working = time.time(), _cpu_seconds(server.proc.pid)
    try:
        with httpx2.stream("POST", f"{server.url}/v1/chat/completions", json=body, timeout=2.0) as response:
            for _ in response.iter_lines():
                if time.time() - start > 2.0:
                    break
    except httpx2.TimeoutException:
        pass
    left = time.time()
    before = _cpu_seconds(server.proc.pid)
    working = before - working
    freed = None
    while time.time() - left < 5.0:
        if freed is None and httpx2.get(f"{server.url}/health").json().get("running") == 0:
            freed = time.time() - left
        time.sleep(0.1)
    spent = _cpu_seconds(server.proc.pid) - before
    end = time.time()
    time.sleep(0.3)
    note = (
        f"CPU while the client waited {left - start:.1f} s: {working:.2f} s; in the 5 s after it left: {spent:.2f} s "
    )
    note += f"(idle server: {idle:.2f} s in 2 s); " + (
        f"running 0 after {freed:.1f} s" if freed is not None else "running still > 0 after 5 s"
    )
    row = Row("6. client leaves mid-run (8 x 32 checks)", [499], end - start, server.health_max(start, end), note)
    row.extra_bars.append(("CPU after leaving < 1 s", spent < 1.0))
    print(f"{row.payload:42} {'left':14} {row.seconds:7.1f} s  /health max {row.health:5.2f} s  {note}")
    return row


def stream(server: Server, seconds: float) -> Row:
    """A streamed selfrefine/chat request while every model call takes 20 s: the first
    progress (a reasoning chunk or an SSE comment) and the longest silence, for ``seconds``."""
    body = _chat(CHAT, "Write a haiku about rain.", {"max_iterations": 1}, stream=True)
    events: list[tuple[float, str]] = []
    start = time.time()
    status = 0
    try:
        with httpx2.stream("POST", f"{server.url}/v1/chat/completions", json=body, timeout=30) as response:
            status = response.status_code
            for line in response.iter_lines():
                now = time.time() - start
                if line.startswith(":"):
                    events.append((now, "comment"))
                elif line.startswith("data: ") and line != "data: [DONE]":
                    delta = (json.loads(line[6:]).get("choices") or [{}])[0].get("delta") or {}
                    kind = (
                        "reasoning" if delta.get("reasoning_content") else "content" if delta.get("content") else "role"
                    )
                    events.append((now, kind))
                if now > seconds:
                    break
    except httpx2.HTTPError as error:
        events.append((time.time() - start, f"error {error!r}"))
    end = time.time()
    progress = [t for t, kind in events if kind in ("comment", "reasoning", "content")]
    first = progress[0] if progress else float("inf")
    marks = [0.0, *(t for t, _ in events), min(end - start, seconds)]
    silence = max(b - a for a, b in zip(marks, marks[1:], strict=False))
    kinds = {k: sum(1 for _, x in events if x == k) for k in ("role", "comment", "reasoning", "content")}
    time.sleep(0.3)
    note = f"first progress {first:.2f} s, longest silence {silence:.2f} s over {end - start:.0f} s; events {kinds}"
    row = Row("19. stream, every model call 20 s", [status], end - start, server.health_max(start, end), note)
    row.extra_bars += [
        (f"first progress <= {FIRST_BAR} s", first <= FIRST_BAR),
        ("silence <= 12 s", silence <= SILENCE_BAR),
    ]
    print(f"{row.payload:42} {status!s:14} {row.seconds:7.1f} s  /health max {row.health:5.2f} s  {note}")
    return row


# -- the audit -----------------------------------------------------------------------------------


def payloads(server: Server) -> list[Row]:
    url, rows = server.url, []
    no_derive = {"derive_checks": False, "max_iterations": 0}
    add: Callable[..., None] = lambda *a, **k: rows.append(measure(server, *a, **k))  # noqa: E731
    checks32 = [{"type": "regex", "pattern": p} for p in HEAVY]
    add("1. 32 regex checks in one request", [_chat(HOSTILE, "regexprobe rain", {**no_derive, "checks": checks32})])
    add("2. 8,000-word echo", [_chat(HOSTILE, " ".join(ASKED), {**no_derive, "max_tokens": 8192})])
    fmt = lambda schema: {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}  # noqa: E731
    add("3. 5,000-property schema", [_chat(CHAT, "JSON.", no_derive, response_format=fmt(wide(5000, "one")))])
    add(
        "3b. 30 distinct 5,000-property schemas at once",
        [_chat(CHAT, "JSON.", no_derive, response_format=fmt(wide(5000, f"t{i}"))) for i in range(30)],
        timeout=240,
    )
    add(
        "4. 2 patterns, 100,000-char values",
        [_chat(CHAT, "patternprobe JSON.", {**no_derive, "max_tokens": 8192}, response_format=fmt(TWO_PATTERNS))],
    )
    hostile = []
    for i in range(30):
        if i % 3 == 0:
            schema = {"title": f"h{i}", "type": "object", "properties": {f"f{i}_{j}": {} for j in range(150)}}
            opts = {"checks": [{"type": "language", "code": LANGUAGES[i % 8]}] * 8, "max_iterations": 1}
            hostile.append(_chat(HOSTILE, "rain", opts, response_format=fmt(schema)))
        elif i % 3 == 1:
            hostile.append(_chat(HOSTILE, "regexprobe rain", {**no_derive, "checks": checks32}))
        else:
            hostile.append(_chat(CHAT, list(DERIVED.values())[i % 3], {"max_iterations": 0}))
    add("5. 30 hostile requests at once", hostile, timeout=240)
    for name, text in DERIVED.items():
        add(f"7. derived check: {name}", [_chat(CHAT, text, {"max_iterations": 0})])
    add("8. recursive $ref (a loop)", [_chat(CHAT, "JSON.", no_derive, response_format=fmt(LOOP))])
    add(
        "8b. recursive schema, 300-deep reply",
        [
            _chat(
                CHAT,
                "treeprobe JSON.",
                {**no_derive, "max_iterations": 1, "max_tokens": 8192},
                response_format=fmt(TREE),
            )
        ],
    )
    nan_top = json.dumps(_chat(CHAT, "rain", {"max_iterations": 0}, temperature=float("nan"))).encode()
    nan_opt = json.dumps(_chat(CHAT, "rain", {"max_iterations": 0, "temperature": float("nan")})).encode()
    add("9. NaN temperature (top level, selfrefine)", [nan_top, nan_opt])
    add("10. max_seconds 1e-320", [_chat(CHAT, "dog, ball", {"max_seconds": 1e-320})])
    del url
    return rows


BOMB = (
    "a: &a [x,x,x,x,x,x,x,x,x]\n"
    + "".join(f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True))
    + "enum: *i\n"
)  # 9**9 values from ~400 bytes
NAN_TASK = 'name: nan\ngenerate: "Write {{ input }}."\nfeedback: "Rate {{ draft }}"\nrefine: "Better {{ draft }}"\n'


def cli_checks(folder: Path) -> list[tuple[str, int, float, str, bool]]:
    """The CLI's side of items 8, 9, 11 and 12: (what, exit code, seconds, its one line, held)."""
    folder.mkdir(parents=True)
    (folder / "loop.json").write_text(json.dumps(LOOP))
    (folder / "bomb.yaml").write_text(BOMB)
    (folder / "nan.yaml").write_text(NAN_TASK + "temperature: .nan\n")
    (folder / "inf.yaml").write_text(NAN_TASK + "stop:\n  score_at_least: .inf\n")
    (folder / "d.txt").write_text("rain\nsnow\n")
    (folder / "runs" / "x").mkdir(parents=True)
    target = folder / "target.txt"
    target.write_text("KEEP")
    (folder / "runs" / "x" / "lock").symlink_to(target)
    cases = [
        ("run --json-schema with a $ref loop", ["run", "chat", "JSON.", "--json-schema", "loop.json"]),
        ("run --json-schema with a 400-byte YAML alias bomb", ["run", "chat", "JSON.", "--json-schema", "bomb.yaml"]),
        ("run a task file with temperature: .nan", ["run", "nan.yaml", "rain"]),
        ("run a task file with score_at_least: .inf", ["run", "inf.yaml", "rain"]),
        ("eval into a folder with a planted lock symlink", ["eval", "chat", "--data", "d.txt", "--out", "runs/x"]),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HOME": str(folder), "TMPDIR": str(folder)}
    rows = []
    for what, args in cases:
        started = time.time()
        done = subprocess.run(
            [sys.executable, "-m", "selfrefine", *args, "--model", "fake"],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        output = (done.stdout + done.stderr).strip()
        line = [x for x in output.splitlines() if x.startswith("Error")][-1:] or output.splitlines()[-1:] or [""]
        held = done.returncode != 0 and "Traceback" not in output and target.read_text() == "KEEP"
        rows.append((what, done.returncode, time.time() - started, line[0][:200], held))
        print(f"{what:50} exit {done.returncode} {rows[-1][2]:5.1f} s  {line[0][:100]}")
    return rows


def written_outside(since: float, run_folder: Path) -> list[str]:
    """Files under the repository (but .git) and the real home modified since ``since``, but the run folder's."""
    found = []
    for top, depth in ((ROOT, None), (Path.home(), 3)):
        base_depth = len(top.parts)
        for dirpath, dirnames, filenames in os.walk(top):
            here = Path(dirpath)
            dirnames[:] = [
                d
                for d in dirnames
                if d not in (".git", ".venv", "__pycache__", ".ruff_cache")
                and (depth is None or len(here.parts) - base_depth < depth)
                and here / d != run_folder
            ]
            for name in filenames:
                path = here / name
                try:
                    if path.stat().st_mtime >= since and path != Path(__file__):
                        found.append(str(path))
                except OSError:
                    pass
    return found


def _fmt(row: Row) -> str:
    bars = [f"/health {'<=' if row.health <= HEALTH_BAR else '>'} 1 s"] + [
        f"{b}: {'yes' if ok else 'NO'}" for b, ok in row.extra_bars
    ]
    verdict = ("held" if row.held else "**broke**") + " (" + "; ".join(bars) + ")"
    note = row.note.replace("|", "/")
    before = BEFORE.get(row.payload[:2], "")
    return f"| {row.payload} | {before} | {row.status} | {row.seconds:.1f} | {row.health:.2f} | {verdict} | {note} |"


def report(
    rows: list[Row],
    clis: list[tuple[str, int, float, str, bool]],
    outside: list[str],
    inside: list[str],
    command: str,
    load: str,
    out: Path | None,
) -> None:
    lines = [
        "# Issue 46, Done when: the audit's payloads against main",
        "",
        f"- date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; commit {_commit()}",
        f"- command: `{command}`",
        f"- machine load (`uptime`) before: {load[0]}; after: {load[1]}",
        "- server: `selfrefine serve --task hostile.yaml --model fake:replies.json` on 127.0.0.1, run in a fresh "
        "folder (its cwd, TMPDIR, HOME); /health polled every 0.25 s by a process of its own; the stream on a second "
        "server whose fake model takes 20 s for every call",
        "",
        "| payload | c3793c2 (the issue) | status | seconds | /health max (s) | verdict | what the reply said |",
        "|---|---|---|---|---|---|---|",
        *(_fmt(r) for r in rows),
        "",
        "The CLI (`--model fake`, in the run folder; held: a one-line error, no traceback, the lock's target untouched):",
        "",
        "| command | exit | seconds | what it said | verdict |",
        "|---|---|---|---|---|",
        *(
            f"| {w} | {rc} | {sec:.1f} | {said.replace('|', '/')} | {'held' if ok else '**broke**'} |"
            for w, rc, sec, said, ok in clis
        ),
        "",
        f"Written outside the run folder (repository, home): {', '.join(outside) if outside else 'nothing'}. "
        f"Written by the servers and the CLI inside it (cwd, TMPDIR, HOME): {', '.join(inside) if inside else 'nothing'}.",
        "",
        "Every server and CLI process here runs with its cwd, HOME and TMPDIR in the run folder, so a write through "
        "them lands inside it; the machine is shared, so a file listed as outside may be another process's "
        "(helpers' browser and dataset tests write ~/.config/chromium, ~/.cache/dconf, ~/.cache/huggingface: a process "
        "whose HOME is /root, not one of these).",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if out is not None:
        out.write_text(text)


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        return "?"


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="write the markdown summary here")
    parser.add_argument("--stream-seconds", type=float, default=45.0)
    parser.add_argument("--only-stream", action="store_true", help="run the streamed request only")
    args = parser.parse_args()
    load_before, since = _uptime(), time.time()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="audit46-") as tmp:
        folder = Path(tmp)
        if not args.only_stream:
            with serving(folder / "a", "serve", REPLIES) as server:
                rows += payloads(server)
            with serving(folder / "c", "leaving", CPU_REPLIES) as server:
                rows.insert(6, disconnect(server))
        with serving(folder / "b", "slow", SLOW_REPLIES) as server:
            rows.append(stream(server, args.stream_seconds))
        clis = [] if args.only_stream else cli_checks(folder / "cli")
        outside = written_outside(since, folder)
        ours = {"replies.json", "hostile.yaml", "serve.log", "slow.log", "leaving.log", "target.txt", "lock"}
        ours |= {"loop.json", "bomb.yaml", "nan.yaml", "inf.yaml", "d.txt"}  # the CLI's inputs
        inside = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p.name not in ours)
        inside = [p for p in inside if not p.endswith("-health.txt")]
    command = "PYTHONPATH=src .venv/bin/python benchmarks/audit46.py " + " ".join(sys.argv[1:])
    report(rows, clis, outside, inside, command, (load_before, _uptime()), args.out)


if __name__ == "__main__":
    main()
