"""``selfrefine serve``: Self-Refine behind an OpenAI-compatible HTTP API.

Routes: ``GET /health`` (no key needed), ``GET /`` (the playground page), ``GET /v1/models``
(one id per task: ``selfrefine/<task>``), ``POST /v1/chat/completions`` (plain or streamed;
the loop's drafts and critiques arrive as ``reasoning_content``) and ``POST /v1/refine``
(the native API: a run result, or the typed steps as server-sent events).

Every error is OpenAI's JSON shape, ``{"error": {"message", "type", "code"}}``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import __version__
from ..backends.roles import RoleBackends
from ..core.errors import BackendError, InputError, SelfRefineError
from ..engine.loop import SelfRefine
from ..task.task import Task
from ..tasks import BUILTIN_TASKS, get_task
from ..tasks.chat import ChatMessage, conversation_text
from .engines import Admission, Caps, EnginePool, QueueFullError, Reservation
from .guards import BearerAuth, BodyLimit, HostCheck
from .offload import Offload
from .prechecks import SchemaPrecheck
from .public import BrokenTaskError, public_message, public_steps
from .reasoning import ReasoningFormat
from .refusals import refuse_unsupported
from .runs import (
    ClientGone,
    Completion,
    cancel_on_disconnect,
    collect,
    detached,
    error_event,
    no_answer,
    no_answer_kind,
    step_events,
    until_disconnected,
)
from .schemas import (
    CHAT_ROLES,
    MODEL_PREFIX,
    ChatCompletionRequest,
    ChatMessageIn,
    ErrorBody,
    ErrorResponse,
    LoopOptions,
    ModelCard,
    ModelList,
    RefineRequest,
)
from .tracing import Tracing, end
from .upstream import UPSTREAM_SEPARATOR, Upstream, UpstreamModelError, split_model_id
from .validation import describe, parsed_body

MAX_BODY_BYTES = 1_000_000
KEEP_ALIVE_SECONDS = 5.0


@dataclass
class ServeSettings:
    """Everything ``create_app`` needs; the CLI fills it from its options."""

    backends: RoleBackends  # the roles' backends (RoleBackends.of(model): one for every role)
    extra_tasks: list[Task] = field(default_factory=list)  # loaded task files
    allow_code_tasks: bool = False  # serve tasks that run model-written programs (gsm8k, codeopt)
    api_key: str | None = None
    max_concurrency: int = 4  # runs in flight
    max_queue: int = 64  # runs waiting for a slot before 429
    max_body_bytes: int = MAX_BODY_BYTES
    caps: Caps = field(default_factory=Caps)
    allowed_hosts: list[str] = field(default_factory=list)  # besides loopback names; "*": any
    client_timeout: float = 30.0  # seconds a request body may take to arrive
    tracing: Tracing = field(default_factory=Tracing.from_environment)
    reasoning_format: ReasoningFormat = "reasoning_content"  # where a chat reply puts the trace
    upstream: Upstream | None = None  # upstream models a request may choose (selfrefine/TASK@MODEL)
    keep_alive: float = KEEP_ALIVE_SECONDS  # a stream's longest silence: then an SSE comment is sent


class ApiError(SelfRefineError):
    """An error the API reports with a status, OpenAI type and code."""

    def __init__(
        self,
        status: int,
        message: str,
        type_: str = "invalid_request_error",
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.type, self.code, self.headers = status, type_, code, headers


def error_response(
    status: int,
    message: str,
    type_: str,
    code: str | None = None,
    headers: dict[str, str] | None = None,
    param: str | None = None,
) -> JSONResponse:
    body = ErrorResponse(error=ErrorBody(message=message, type=type_, code=code, param=param))
    return JSONResponse(body.model_dump(), status_code=status, headers=headers)


def as_api_error(exc: Exception) -> ApiError:
    """The status and OpenAI error type of any error a request can meet."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, QueueFullError):
        return ApiError(429, str(exc), "rate_limit_error", "queue_full", {"Retry-After": str(exc.retry_after)})
    if isinstance(exc, UpstreamModelError):
        return ApiError(400, str(exc), code="model_not_allowed")
    if isinstance(exc, InputError):
        return ApiError(400, str(exc), code="invalid_input")
    if isinstance(exc, BackendError):  # the upstream's address stays in the server log
        return ApiError(502, public_message(str(exc)), "backend_error", "backend_failed")
    if isinstance(exc, BrokenTaskError):  # the operator's task failed: the server's fault
        return ApiError(500, str(exc), "server_error", "task_failed")
    if isinstance(exc, SelfRefineError):  # config and task errors: the request asked for it
        return ApiError(400, str(exc), code="invalid_option")
    return ApiError(
        500, public_message(f"internal error: {type(exc).__name__}: {exc}"), "server_error", "internal_error"
    )


class Service:
    """The state one app holds: tasks, engines over shared backends, admission, tracing."""

    def __init__(self, settings: ServeSettings) -> None:
        self.settings = settings
        tracing = settings.tracing
        tasks: dict[str, Task] = {name: get_task(name) for name in BUILTIN_TASKS}
        tasks.update({t.name: t for t in settings.extra_tasks})
        # a client picks the input, so the program a code task runs is the client's choice
        self.code_tasks = sorted(n for n, t in tasks.items() if t.capabilities.runs_code)
        if not settings.allow_code_tasks:
            tasks = {n: t for n, t in tasks.items() if not t.capabilities.runs_code}
        self.tasks = tasks
        # the tracer wraps each backend once, the upstream models a request chooses included
        self.pool = EnginePool(settings.backends, tasks, settings.caps, settings.upstream, wrap=tracing.backend)
        self.admission = Admission(settings.max_concurrency, settings.max_queue)
        # the requests' CPU work: off the event loop, in bounded pools (offload.py)
        self.offload = Offload(runs=settings.max_concurrency)
        self.tracing = tracing
        self.started = int(time.time())

    def task_of(self, model: str) -> str:
        model = split_model_id(model)[0]  # selfrefine/TASK@UPSTREAM: see options_of
        name = model.removeprefix(MODEL_PREFIX) if model.startswith(MODEL_PREFIX) else None
        if name in self.code_tasks and name not in self.tasks:
            raise ApiError(
                404,
                f"model {model!r} runs model-written code and is not enabled on this server; "
                "start it with `selfrefine serve --allow-code-tasks`",
                code="model_not_found",
            )
        if name not in self.tasks:
            known = ", ".join(MODEL_PREFIX + t for t in self.tasks)
            raise ApiError(404, f"model {model!r} does not exist; models here: {known}", code="model_not_found")
        return name

    def models(self) -> ModelList:
        """A card per task, and per task and allowed upstream model (selfrefine/TASK@MODEL)."""
        cards = [
            ModelCard(id=MODEL_PREFIX + name, created=self.started, description=task.description)
            for name, task in self.tasks.items()
        ]
        for upstream in self.settings.upstream.allowed if self.settings.upstream else ():
            cards += [
                ModelCard(
                    id=f"{MODEL_PREFIX}{name}{UPSTREAM_SEPARATOR}{upstream}",
                    created=self.started,
                    description=f"{task.description} (on upstream model {upstream})",
                )
                for name, task in self.tasks.items()
            ]
        return ModelList(data=cards)


def options_of(model: str, options: LoopOptions) -> LoopOptions:
    """The options with the model id's upstream model (selfrefine/TASK@MODEL) in them."""
    upstream = split_model_id(model)[1]
    if upstream is None:
        return options
    if options.model is not None and options.model != upstream:
        raise ApiError(
            400,
            f"the model id asks for upstream model {upstream!r} and selfrefine.model for {options.model!r}: give one",
            code="model_not_allowed",
        )
    return options.model_copy(update={"model": upstream})


def chat_input(task: str, messages: list[ChatMessageIn]) -> str:
    """The run's input: the whole conversation for ``chat``, else the last user message."""
    if not messages:
        raise ApiError(
            400,
            "messages is empty: send at least one user message",
            code="empty_messages",
        )
    if task == "chat":
        turns = [ChatMessage(role=CHAT_ROLES[m.role], content=m.text()) for m in messages if m.role in CHAT_ROLES]
        return conversation_text(turns)
    users = [m for m in messages if m.role == "user"]
    if not users:
        raise ApiError(400, "messages has no user message: the last user message is the input", code="no_user_message")
    return users[-1].text()


def reply_format(body: ChatCompletionRequest, default: ReasoningFormat, structured: bool) -> ReasoningFormat:
    """Where the reply puts the trace: the request's choice, else the server's; under a JSON
    Schema (``response_format``) never inside the content ("think"), which must be the JSON alone."""
    chosen = body.reasoning_format or default
    return "reasoning_content" if structured and chosen == "think" else chosen


def create_app(settings: ServeSettings) -> FastAPI:
    service = Service(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        await service.offload.aclose(service.pool.aclose)  # the backends (connections, model files), then the runs loop

    app = FastAPI(
        title="selfrefine", version=__version__, docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan
    )
    app.state.service = service
    # innermost first: the Host and the key are checked before the body is read, the size
    # before the text (BodyLimit), the text before parsing; a body's JSON Schemas are checked
    # in a worker thread before the route validates it on the event loop (SchemaPrecheck)
    app.add_middleware(SchemaPrecheck)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes, timeout=settings.client_timeout)
    app.add_middleware(BearerAuth, key=settings.api_key, open_paths={"/health", "/"})
    app.add_middleware(HostCheck, allowed=settings.allowed_hosts)
    _add_error_handlers(app)
    _add_routes(app, service)
    return app


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(SelfRefineError)
    async def known(request: Request, exc: SelfRefineError) -> JSONResponse:
        err = as_api_error(exc)
        return error_response(err.status, str(err), err.type, err.code, err.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        refusal = describe(exc.errors(), exc.body)
        return error_response(400, refusal.message, "invalid_request_error", refusal.code, param=refusal.param)

    @app.exception_handler(StarletteHTTPException)
    async def http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
        return error_response(exc.status_code, str(exc.detail), "invalid_request_error", code)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        err = as_api_error(exc)  # a message, never a traceback
        return error_response(err.status, str(err), err.type, err.code)


def _add_routes(app: FastAPI, service: Service) -> None:
    @app.get("/health")
    async def health() -> dict[str, Any]:
        a = service.admission
        return {"status": "ok", "version": __version__, "running": a.active, "queued": a.waiting}

    @app.get("/", response_class=HTMLResponse)
    async def playground() -> HTMLResponse:
        page = resources.files("selfrefine.service").joinpath("playground.html").read_text(encoding="utf-8")
        return HTMLResponse(page)

    @app.get("/v1/models")
    async def models() -> ModelList:
        return service.models()

    @app.post("/v1/chat/completions", response_model=None)
    async def chat_completions(request: Request) -> Any:
        chat = await _prepared(service, request, _chat_request)
        body, engine, text, completion = chat.work
        span = service.tracing.request("/v1/chat/completions", model=body.model, stream=body.stream)
        if body.stream:
            include_usage = bool(body.stream_options and body.stream_options.include_usage)
            deltas = completion.reasoning_format != "none"  # the trace token by token

            def events() -> AsyncIterator[str]:
                steps = _public_run(service, span, engine, text, deltas=deltas)
                return completion.stream(steps, include_usage)

            return _stream_response(
                service, _guarded(service, chat.reservation, span, request, events), chat.reservation, span
            )

        async def whole() -> str:
            result, decisions = await collect(_public_run(service, span, engine, text))
            if result.output is None:  # not even a first draft: nothing to return
                status, kind, code = no_answer_kind(result)
                raise ApiError(status, no_answer(result, decisions), kind, code)
            return completion.whole(result, decisions).model_dump_json(exclude_none=True)

        return _json(await _run(service, chat.reservation, span, request, whole))

    @app.post("/v1/refine", response_model=None)
    async def refine(request: Request) -> Any:
        asked = await _prepared(service, request, _refine_request)
        body, engine = asked.work
        span = service.tracing.request("/v1/refine", task=engine.task.name, stream=body.stream)
        if body.stream:

            def events() -> AsyncIterator[str]:
                return step_events(_public_run(service, span, engine, body.input, deltas=body.deltas))

            return _stream_response(
                service, _guarded(service, asked.reservation, span, request, events), asked.reservation, span
            )

        async def whole() -> str:
            result, _ = await collect(_public_run(service, span, engine, body.input))
            return result.model_dump_json()

        return _json(await _run(service, asked.reservation, span, request, whole))


@dataclass
class _Prepared:
    reservation: Reservation
    work: Any


async def _prepared(service: Service, request: Request, prepare: Any) -> _Prepared:
    """A queue place, then the request read, checked and its engine built in a thread
    (offload.py): every refusal (400, 404) before a run slot is taken or a model called."""
    raw = await request.body()
    reservation = _reserve(service)
    try:
        return _Prepared(reservation, await service.offload.prepare(prepare, service, raw))
    except BaseException:
        reservation.release_if_unused()
        raise


def _chat_request(service: Service, raw: bytes) -> tuple[ChatCompletionRequest, SelfRefine, str, Completion]:
    body = parsed_body(ChatCompletionRequest, raw)
    refuse_unsupported(body)  # tools, other roles, images: 400, not silently dropped
    task = service.task_of(body.model)
    text = chat_input(task, body.messages)
    engine = service.pool.get(task, options_of(body.model, body.loop_options()))
    engine.task.prepare_input(text)  # too long or empty: 400 before a slot is taken
    structured = engine.settings.checks.schema is not None
    return body, engine, text, Completion(body.model, reply_format(body, service.settings.reasoning_format, structured))


def _refine_request(service: Service, raw: bytes) -> tuple[RefineRequest, SelfRefine]:
    body = parsed_body(RefineRequest, raw)
    task = service.task_of(MODEL_PREFIX + body.task)
    engine = service.pool.get(task, options_of(MODEL_PREFIX + body.task, body.options))
    engine.task.prepare_input(body.input)
    return body, engine


def _public_run(service: Service, span: Any, engine: SelfRefine, text: str, *, deltas: bool = False) -> Any:
    """A run's steps as a client may see them (run on the runs loop: offload.py)."""
    traced = service.tracing.steps(engine.astream(text, deltas=deltas), engine.task.name, span)
    return public_steps(traced, engine.task.name)


def _json(text: str) -> Response:
    """Pydantic's own JSON: FastAPI's jsonable_encoder walk over a run result costs more."""
    return Response(content=text, media_type="application/json")


def _reserve(service: Service) -> Reservation:
    return service.admission.reserve()  # full: QueueFullError, a 429


async def _run(
    service: Service, reservation: Reservation, span: Any, request: Request, work: Callable[[], Awaitable[str]]
) -> str:
    """``work()`` (a run and its reply's JSON) on the runs loop, under a run slot; cancelled,
    and its slot held until it has stopped, when the client leaves."""
    error = None

    async def run() -> str:
        async with service.admission.slot(reservation):
            return await service.offload.run(work)

    try:  # the wait for a slot is watched too: a client gone from the queue frees its place
        return await cancel_on_disconnect(request, run)
    except ClientGone as exc:
        error = str(exc)
        raise ApiError(499, error, "client_closed_request", "client_closed") from None
    finally:
        end(span, error)


async def _guarded(
    service: Service,
    reservation: Reservation,
    span: Any,
    request: Request,
    events: Callable[[], AsyncIterator[str]],
) -> AsyncIterator[str]:
    """A streamed run: ``events()`` (the run's steps as server-sent events) computed on the
    runs loop under a slot, cancelled when the client leaves; an error after the first byte
    is sent as an error event (the status line has gone already)."""
    error = None
    try:
        async with service.admission.slot(reservation):
            async for event in until_disconnected(request, service.offload.stream(events)):
                yield event
    except ClientGone as exc:
        error = str(exc)
    except (asyncio.CancelledError, GeneratorExit):  # Starlette saw the client leave first
        error = "the client disconnected; the run was cancelled"
        raise
    except Exception as exc:  # noqa: BLE001 - the stream has started: report in-band, no traceback
        err = as_api_error(exc)
        error = str(err)
        yield error_event(error, err.type, err.code or "error")
    finally:
        end(span, error)


def _stream_response(
    service: Service, events: AsyncIterator[str], reservation: Reservation, span: Any
) -> StreamingResponse:
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    # the run apart from the socket: a client that stops reading cannot hold its slot
    sent = detached(events, service.settings.keep_alive)
    return _ReservedStream(sent, reservation, span, media_type="text/event-stream", headers=headers)


class _ReservedStream(StreamingResponse):
    """Gives the queue place back if the stream never started (the client left first)."""

    def __init__(self, content: AsyncIterator[str], reservation: Reservation, span: Any, **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self.reservation, self.span = reservation, span

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            if self.reservation.release_if_unused():
                end(self.span, "the client left before the run started")
