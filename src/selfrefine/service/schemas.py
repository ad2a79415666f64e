"""The wire formats of ``selfrefine serve``: OpenAI-compatible requests and replies, the native
``/v1/refine`` request, and the options a request may set on the loop.

Requests are validated here (pydantic), so a malformed body is one 400 with the field named,
never a traceback. Replies are built from the engine's typed records."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import annotated_types
from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from ..core.config import Finite, JsonSchema, Offer, RefineConfig, offers, spelled_once
from ..core.errors import ConfigError
from ..core.structured import ANY_OBJECT
from .reasoning import ReasoningFormat

MODEL_PREFIX = "selfrefine/"

# What a request to ``selfrefine serve`` may choose about its run: the RefineConfig options
# declared ``api=True`` (core/config.py ``Offer``), with the same types and bounds
# (LoopOptions below is built from them)
REQUEST_OPTIONS = tuple(name for name, offer in offers().items() if offer.api)


def _request_fields() -> dict[str, Any]:
    """RefineConfig's request options, each optional (None: the server's or task's default)
    with RefineConfig's own type and lower bounds, so the two cannot drift apart. Upper
    bounds are the server's (``Caps``): asking more gets its limit, as for every budget,
    instead of a 400 (``samples`` 17 was refused while 9 to 16 got the server's 8)."""
    fields: dict[str, Any] = {}
    for name in REQUEST_OPTIONS:
        info = RefineConfig.model_fields[name]
        constraints = [m for m in info.metadata if not isinstance(m, (annotated_types.Le, annotated_types.Lt, Offer))]
        annotation = Annotated[info.annotation | None, *constraints] if constraints else info.annotation | None
        fields[name] = (annotation, Field(default=None, description=info.description))
    return fields


class _LoopOptionsBase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # the upstream model to run the loop on (one the server allows); also the model id's
    # '@' suffix, selfrefine/<task>@<model>
    model: str | None = Field(default=None, min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _one_spelling(cls, values: Any) -> Any:
        return spelled_once(values)


LoopOptions = create_model(
    "LoopOptions",
    __base__=_LoopOptionsBase,
    __doc__="""What a request may choose about its run (``extra_body={"selfrefine": {...}}`` on the
    chat endpoint, ``options`` on ``/v1/refine``): RefineConfig's ``REQUEST_OPTIONS``, each
    optional, and ``model``. Budgets are capped by the server's.""",
    **_request_fields(),
)


# the message roles a chat request may use, and the conversation role each becomes
CHAT_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}


class ChatMessageIn(BaseModel):
    """One message of a chat request; content may be a string or OpenAI's list of parts."""

    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list[dict[str, Any]] | None = None

    def text(self) -> str:
        if isinstance(self.content, list):  # [{"type": "text", "text": ...}, ...]
            return "".join(str(p.get("text", "")) for p in self.content if p.get("type") == "text")
        return self.content or ""


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class JsonSchemaFormat(BaseModel):
    """``response_format.json_schema``: the schema (checked as the ``json_schema`` option is:
    core/structured.py), its name, and ``strict`` (accepted: every draft is validated
    against the whole schema whatever it says)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    name: str | None = None
    description: str | None = None
    schema_: JsonSchema | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormat(BaseModel):
    """OpenAI's ``response_format``: ``text`` (the default), ``json_object`` (any JSON object)
    or ``json_schema`` (JSON that validates against the schema given)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None

    @model_validator(mode="after")
    def _schema_given(self) -> ResponseFormat:
        if self.type == "json_schema" and (self.json_schema is None or self.json_schema.schema_ is None):
            raise ValueError("a json_schema response_format needs json_schema.schema: the JSON Schema of the reply")
        return self

    def reply_schema(self) -> dict[str, Any] | None:
        """The JSON Schema the reply must validate against (None: free text)."""
        if self.type == "json_object":
            return dict(ANY_OBJECT)
        return self.json_schema.schema_ if self.type == "json_schema" and self.json_schema is not None else None


class ChatCompletionRequest(BaseModel):
    """The fields of OpenAI's chat request that mean something here; others are ignored, as
    OpenAI-compatible servers do, except ``n`` > 1 and tools, which are refused."""

    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[ChatMessageIn]
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: Finite | None = Field(default=None, ge=0)
    seed: int | None = None
    max_tokens: int | None = Field(default=None, gt=0)
    max_completion_tokens: int | None = Field(default=None, gt=0)
    n: int | None = Field(default=None, ge=1, le=1)
    response_format: ResponseFormat | None = None  # json_object / json_schema: the loop's json_schema
    selfrefine: LoopOptions = Field(default_factory=LoopOptions)
    # where the trace goes (llama-server's per-request field); None: the server's choice
    reasoning_format: ReasoningFormat | None = None

    def loop_options(self) -> LoopOptions:
        """extra_body options, with the standard sampling fields where those are unset, and
        ``response_format``'s schema as ``json_schema`` (beside a different one: a ConfigError)."""
        options = self.selfrefine
        schema = self.response_format.reply_schema() if self.response_format is not None else None
        if schema is not None and options.json_schema not in (None, schema):
            raise ConfigError("response_format and selfrefine.json_schema give different schemas: give one")
        standard = {
            "temperature": self.temperature,
            "seed": self.seed,
            "max_tokens": self.max_completion_tokens or self.max_tokens,
            "json_schema": schema,
        }
        return options.model_copy(
            update={k: v for k, v in standard.items() if v is not None and getattr(options, k) is None}
        )


class RefineRequest(BaseModel):
    """``POST /v1/refine``: the native API."""

    model_config = ConfigDict(extra="forbid")

    task: str
    input: str
    options: LoopOptions = Field(default_factory=LoopOptions)
    stream: bool = False
    deltas: bool = False  # with stream: each piece of each draft and critique as it is written


class ErrorBody(BaseModel):
    message: str
    type: str
    code: str | None = None
    param: str | None = None


class ErrorResponse(BaseModel):
    """OpenAI's error shape: ``{"error": {"message", "type", "code"}}``."""

    error: ErrorBody


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "selfrefine"
    description: str = ""


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class UsageOut(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None
    reasoning_content: str | None = None
    # under a response_format, why the content does not validate (the SDK's parse() then gives
    # parsed None instead of raising)
    refusal: str | None = None


class Choice(BaseModel):
    index: int = 0
    message: AssistantMessage
    finish_reason: Literal["stop", "length"] = "stop"
    logprobs: None = None


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: UsageOut
    selfrefine: dict[str, Any]  # the trajectory (drafts, feedback, decisions, stop reason)


class Delta(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["assistant"] | None = None
    content: str | None = None
    reasoning_content: str | None = None
    refusal: str | None = None


class ChunkChoice(BaseModel):
    index: int = 0
    delta: Delta
    finish_reason: Literal["stop", "length"] | None = None
    logprobs: None = None


class ChatCompletionChunk(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: UsageOut | None = None
    selfrefine: dict[str, Any] | None = None
