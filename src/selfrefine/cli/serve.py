"""``selfrefine serve``: the HTTP service from the command line."""

from __future__ import annotations

import ipaddress
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from ..core.errors import ConfigError
from ..engine.spec import BackendPool, ModelSpec
from ..tasks import get_task
from .options import FiniteRange, Flags, ModelFlags, flag, loop_flag, main_model, models_of, part

SWITCH_INTERVAL = 0.001  # seconds a thread holds the interpreter before another may take it


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name other than localhost may resolve anywhere
        return False


def allowed_hosts(host: str, given: tuple[str, ...]) -> list[str]:
    """Host header names served besides loopback ones: --allowed-host's, else --host's own
    (every name, "*", for an all-addresses --host, which needs a key or --insecure)."""
    if given:
        return list(given)
    if is_loopback(host):
        return []
    if host.strip("[]") in ("0.0.0.0", "::", ""):
        return ["*"]
    return [host.strip("[]")]


@dataclass(frozen=True, kw_only=True)
class ServeFlags(Flags):
    """``serve``'s flags (the loop's options come per request; three of them capped here)."""

    host: str = flag(
        "--host",
        default="127.0.0.1",
        show_default=True,
        help="Address to bind; a non-loopback one needs --api-key (or --insecure).",
    )
    port: int = flag(
        "--port",
        type=click.IntRange(0, 65535),
        default=8000,
        show_default=True,
        help="Port to listen on (0: one the system picks; the startup line says which).",
    )
    models: ModelFlags = part(ModelFlags)
    api_key: str | None = flag(
        "--api-key",
        envvar="SELFREFINE_API_KEY",
        metavar="KEY",
        help="Require 'Authorization: Bearer KEY' on every route but /health and the playground page "
        "[env SELFREFINE_API_KEY].",
    )
    allowed_host: tuple[str, ...] = flag(
        "--allowed-host",
        multiple=True,
        metavar="NAME",
        help='Also answer requests whose Host header is NAME ("*": any); repeatable. Default: only '
        "loopback names (against DNS rebinding), plus --host's own name if it is not loopback.",
    )
    client_timeout: float = flag(
        "--client-timeout",
        type=FiniteRange(min=0, min_open=True),
        default=30.0,
        show_default=True,
        help="Seconds a client may take to send a request's headers, or its body, or to read "
        "anything of a reply; then it is dropped.",
    )
    keep_alive: float = flag(
        "--keep-alive",
        type=click.FloatRange(min=0, min_open=True),
        default=5.0,
        show_default=True,
        metavar="SECONDS",
        help="A stream's longest silence: an SSE comment is sent at once and after this long without an event.",
    )
    insecure: bool = flag("--insecure", is_flag=True, help="Allow a non-loopback --host without an API key.")
    max_concurrency: int = flag(
        "--max-concurrency",
        type=click.IntRange(min=1),
        default=4,
        show_default=True,
        help="Runs in flight at once (model calls still queue per backend).",
    )
    max_queue: int = flag(
        "--max-queue",
        type=click.IntRange(min=0),
        default=64,
        show_default=True,
        help="Runs waiting for a slot; beyond this a request gets 429 with Retry-After.",
    )
    max_body_bytes: int = flag(
        "--max-body-bytes",
        type=click.IntRange(min=1),
        default=1_000_000,
        show_default=True,
        help="Larger request bodies get 413.",
    )
    # the loop's own flags (their spellings and types), here the server's caps
    max_iterations: int | None = loop_flag(
        "max_iterations", help="Cap (and default) on the refinements a request may ask for."
    )
    max_total_tokens: int | None = loop_flag("max_total_tokens", help="Cap (and default) on tokens per request.")
    max_seconds: float | None = loop_flag("max_seconds", help="Cap (and default) on seconds per request.")
    task_files: tuple[Path, ...] = flag(
        "--task",
        multiple=True,
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help="Also serve this YAML task file (as selfrefine/NAME); repeatable.",
    )
    allow_code_tasks: bool = flag(
        "--allow-code-tasks",
        is_flag=True,
        help="Also serve the tasks that run model-written Python (gsm8k, codeopt) in the sandbox; "
        "see the README's 'The sandbox'.",
    )
    upstream_models: tuple[str, ...] = flag(
        "--upstream-model",
        multiple=True,
        metavar="NAME",
        help="Let a request run on this model of --model's OpenAI-compatible server, as "
        "selfrefine/TASK@NAME (the server's key is used); repeatable.",
    )
    reasoning_format: str = flag(
        "--reasoning-format",
        type=click.Choice(["reasoning_content", "think", "none"]),
        default="reasoning_content",
        show_default=True,
        help="Where a chat reply puts the drafts and critiques: the reasoning_content field, "
        "<think>...</think> at the start of content (for clients that ignore reasoning_content), "
        'or nowhere; a request may choose with "reasoning_format".',
    )
    log_level: str = flag(
        "--log-level",
        type=click.Choice(["critical", "error", "warning", "info", "debug"]),
        default="info",
        show_default=True,
        help="The server log's level (uvicorn's: each request at info).",
    )


@click.command()
@ServeFlags.options()
def serve(**params: Any) -> None:
    """Serve Self-Refine over an OpenAI-compatible HTTP API, with a playground at /.

    Each task is a model, selfrefine/TASK (and selfrefine/chat for any conversation):
    POST /v1/chat/completions (plain or stream=true; the drafts and critiques arrive as
    reasoning_content, or see --reasoning-format), GET /v1/models, POST /v1/refine (native),
    GET /health.
    Loop options per request: extra_body={"selfrefine": {"max_iterations": 2, ...}}.
    With --upstream-model NAME, selfrefine/TASK@NAME runs TASK on NAME (GET /v1/models lists them).

    \b
    Examples:
      selfrefine serve
      selfrefine serve --model openai:gpt-4o-mini --api-key "$KEY" --host 0.0.0.0
    """
    opts = ServeFlags.of(params)
    host, api_key = opts.host, opts.api_key
    if not is_loopback(host) and not api_key and not opts.insecure:
        raise ConfigError(
            f"--host {host} is reachable from other machines: set --api-key KEY "
            "(or SELFREFINE_API_KEY), or pass --insecure to serve it without one"
        )
    import uvicorn

    # the event loop shares the interpreter with the threads doing the requests' CPU work
    # (service/offload.py): each of its I/O steps waits for the lock, by default up to 5 ms
    # per thread in line; 1 ms keeps /health's many steps within a second under 30 requests
    sys.setswitchinterval(SWITCH_INTERVAL)
    from ..service import create_app
    from ..service.connections import server_config

    settings = _settings(opts)
    sock = listen_socket(host, opts.port)  # before the banner: a busy port is one error line
    port = sock.getsockname()[1]  # --port 0: the port the system chose
    click.echo(
        f"selfrefine serve: http://{host}:{port}/ (playground), OpenAI base URL http://{host}:{port}/v1"
        f"{', key required' if api_key else ''}",
        err=True,
    )
    config = server_config(create_app(settings), host, port, opts.client_timeout, log_level=opts.log_level)
    uvicorn.Server(config).run(sockets=[sock])


def _settings(opts: ServeFlags) -> Any:
    """The service's settings from serve's flags; every distinct model opened once."""
    from ..service import Caps, ServeSettings

    pool = BackendPool()  # the roles' models and the upstream ones
    model_flags = opts.models
    main = main_model(model_flags.model, model_flags.options, model_flags.base_url)
    return ServeSettings(
        backends=pool.roles(**models_of(model_flags)),
        extra_tasks=[get_task(str(path)) for path in opts.task_files],
        allow_code_tasks=opts.allow_code_tasks,
        api_key=opts.api_key or None,
        max_concurrency=opts.max_concurrency,
        max_queue=opts.max_queue,
        max_body_bytes=opts.max_body_bytes,
        caps=Caps(
            max_iterations=opts.max_iterations, max_total_tokens=opts.max_total_tokens, max_seconds=opts.max_seconds
        ),
        reasoning_format=opts.reasoning_format,
        upstream=_upstream(opts.upstream_models, main, pool),
        allowed_hosts=allowed_hosts(opts.host, opts.allowed_host),
        client_timeout=opts.client_timeout,
        keep_alive=opts.keep_alive,
    )


def listen_socket(host: str, port: int) -> socket.socket:
    """A socket bound to host:port, or a ConfigError saying why not (uvicorn would log
    its own error lines after our banner, and exit)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise ConfigError(f"cannot serve on {host}:{port}: {exc.strerror or exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot serve on {host}:{port}: {(exc.strerror or str(exc)).lower()}") from None
    return sock


def _upstream(names: tuple[str, ...], main: ModelSpec, pool: BackendPool) -> Any:
    """The upstream models a request may choose: on --model's server, with its options."""
    if not names:
        return None
    from ..service import Upstream

    scheme, _, default = main.model.partition(":")
    if scheme != "openai":
        raise ConfigError(
            f"--upstream-model needs --model openai:NAME (an OpenAI-compatible server), not {main.model!r}"
        )
    allowed = tuple(dict.fromkeys([default, *names]))  # --model's own name may be chosen too
    return Upstream(allowed, lambda name: pool.get(ModelSpec(model=f"openai:{name}", options=main.options)))
