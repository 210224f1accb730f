"""The agent's published HTTP API: wire models of its answers and its OpenAPI document.

Chat completions take ``kaos_agent.chat.ChatRequest`` and answer the OpenAI Chat
Completions shapes below (or, with ``stream: true``, server-sent events whose ``data`` is a
``ChatCompletionChunk``, an error object, or ``[DONE]``); A2A is JSON-RPC 2.0 at ``POST /``
whose errors travel in-band with HTTP 200; the agent card is served at both well-known
paths. ``hack/gen-docs`` writes ``agent_document()`` to ``docs/openapi/agent.json``.
"""

from __future__ import annotations

import sys
from typing import Any, Literal

from kaos_core import openapi
from kaos_core.openapi import JSON, REQUEST_ID, REQUEST_ID_ECHO, Header, Operation, Reply
from kaos_core.wire import A2A_VERSION_HEADER, AGENT_TOKEN_HEADER, DELEGATION_DEPTH_HEADER
from pydantic import BaseModel, ConfigDict, RootModel
from typing_extensions import TypedDict

from kaos_agent.audit_trail.openapi import audit_operation
from kaos_agent.chat import ChatRequest
from kaos_agent.context import MAX_DEPTH_VALUE
from kaos_agent.load import LOAD_PATH, AgentLoad
from kaos_agent.tool_listing import ToolList
from kaos_agent.triggers.openapi import trigger_operation
from kaos_agent.usage.openapi import usage_operations

AGENT_API_VERSION = "1.0.0"
EVENT_STREAM = "text/event-stream"


class AssistantMessage(BaseModel):
    role: Literal["assistant"]
    content: str


class ChatChoice(BaseModel):
    index: int
    message: AssistantMessage
    finish_reason: str


class Usage(BaseModel):
    """The tokens the model reported, summed over the run's model requests (zero when the
    model reports none)."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletion(BaseModel):
    """The answer of a non-streaming ``POST /v1/chat/completions``."""

    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[ChatChoice]
    usage: Usage


class ChunkDelta(TypedDict, total=False):
    role: Literal["assistant"]
    content: str


class ChunkChoice(BaseModel):
    index: int
    delta: ChunkDelta
    finish_reason: str | None


class ChatCompletionChunk(BaseModel):
    """One event of a streamed answer (the ``data`` of a server-sent event). With
    ``stream_options.include_usage`` every chunk has ``usage: null`` but the last before
    ``[DONE]``, which has no choices and the run's usage."""

    # ``usage`` is absent unless the request asked for it: not a required property.
    model_config = ConfigDict(json_schema_mode_override="validation")

    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: Usage | None = None


class ModelCard(BaseModel):
    id: str
    object: Literal["model"]
    owned_by: str


class ModelList(BaseModel):
    """``GET /v1/models``: the agent itself, as the one model it serves."""

    object: Literal["list"]
    data: list[ModelCard]


class AgentInterface(BaseModel):
    url: str
    protocolBinding: str
    protocolVersion: str


class AgentCapabilities(BaseModel):
    streaming: bool
    pushNotifications: bool
    extendedAgentCard: bool


class AgentSkill(BaseModel):
    id: str
    name: str
    description: str
    tags: list[str]


class AgentCard(BaseModel):
    """The A2A agent card: 1.0 fields plus the 0.3 top-level ``url`` and transport."""

    name: str
    description: str
    version: str
    supportedInterfaces: list[AgentInterface]
    url: str
    protocolVersion: str
    preferredTransport: str
    capabilities: AgentCapabilities
    defaultInputModes: list[str]
    defaultOutputModes: list[str]
    skills: list[AgentSkill]


class JsonRpcRequest(BaseModel):
    """A JSON-RPC 2.0 request; ``params`` are the A2A method's (protobuf JSON mapping)."""

    model_config = ConfigDict(extra="allow")
    jsonrpc: Literal["2.0"]
    method: str
    id: str | int | None = None
    params: dict[str, Any] = {}


class JsonRpcErrorObject(BaseModel):
    code: int
    message: str


class JsonRpcSuccess(BaseModel):
    model_config = ConfigDict(extra="forbid")
    jsonrpc: Literal["2.0"]
    id: str | int | None
    result: dict[str, Any]


class JsonRpcFailure(BaseModel):
    model_config = ConfigDict(extra="forbid")
    jsonrpc: Literal["2.0"]
    id: str | int | None
    error: JsonRpcErrorObject


class JsonRpcResponse(RootModel[JsonRpcSuccess | JsonRpcFailure]):
    """A result or an error object; A2A errors use the A2A specification's codes."""


SESSION = openapi.session_header(
    "Conversation id. Absent: a fresh id is minted and returned in the same header. "
    "Malformed: 400 `bad_identity_header`."
)
PRINCIPAL = openapi.principal_header(
    "Verified end-user subject, forwarded to memory and to delegated agents. Malformed: "
    "400 `bad_identity_header`."
)
DEPTH = Header(
    DELEGATION_DEPTH_HEADER,
    "How deep in a delegation chain this call is (set by a delegating agent). Not an "
    f"integer from 0 to {MAX_DEPTH_VALUE}: 400 `bad_delegation_depth`.",
    {"type": "integer", "minimum": 0, "maximum": MAX_DEPTH_VALUE},
)
A2A_DEPTH = Header(
    DELEGATION_DEPTH_HEADER,
    "As for chat completions; an unusable value is a JSON-RPC invalid-params error. "
    "Without it, the message's `kaos.delegationDepth` metadata is read.",
    {"type": "string"},
)
SESSION_ECHO = Header("X-Session-Id", "The run's session id.", openapi.SUBJECT_SCHEMA)
AGENT_TOKEN = Header(
    AGENT_TOKEN_HEADER,
    "A delegating agent's projected service-account token (audience `kaos.dev/agent`). "
    "Read only when `AGENT_AUTH_MODE` is `jwks` or `tokenreview`: a call that claims to be "
    "a delegation (`X-Agent-Identity`, or a delegation depth above 0) must carry it, and "
    "its ServiceAccount must be one of the agents allowed to call this one.",
    {"type": "string"},
)
_AUTH_401 = (
    "Only with agent-token verification on: `missing_token` (a delegation without a "
    "token), `invalid_token` (expired, another audience or issuer, forged). Carries "
    "`WWW-Authenticate`."
)
_AUTH_403 = (
    "Only with agent-token verification on: `caller_not_allowed` (the calling agent is not "
    "granted in `agentNetwork.access`), `identity_mismatch`."
)

# The data of a streamed event: a chunk, an error object, or the end marker.
STREAM_EVENT: openapi.Schema = {
    "type": "object",
    "description": (
        "One server-sent event. `data` is a JSON `ChatCompletionChunk`, a JSON error "
        "object (`{error: {code, message}, request_id}`: a failure after the stream "
        "started), or `[DONE]`, always last."
    ),
    "properties": {
        "event": {"type": "string"},
        "data": {
            "anyOf": [
                {"const": "[DONE]"},
                {
                    "type": "string",
                    "contentMediaType": JSON,
                    "contentSchema": {"$ref": "#/components/schemas/ChatCompletionChunk"},
                },
            ]
        },
    },
    "required": ["data"],
}


def _chat_replies() -> dict[int, Reply]:
    err = openapi.error_reply
    return {
        200: Reply(
            "The answer; a stream of chunks with `stream: true`.",
            {JSON: ChatCompletion, EVENT_STREAM: STREAM_EVENT},
            (SESSION_ECHO, REQUEST_ID_ECHO),
        ),
        400: err(
            "`malformed_json`, `invalid_body` (wrong shape, or the last message is not a "
            "user message with text), `bad_identity_header`, `bad_delegation_depth`."
        ),
        401: err(_AUTH_401),
        403: err(_AUTH_403),
        408: err("`request_timeout`: the body did not arrive within `KAOS_HTTP_BODY_TIMEOUT`."),
        413: err("`payload_too_large`: the body exceeds 8 MiB."),
        415: err(
            "`unsupported_media_type`: the content type is not `application/json`; "
            "`unsupported_encoding`: a `Content-Encoding` was sent."
        ),
        429: err(
            "`budget_exhausted`: a token budget of `spec.budgets` has nothing left today "
            "(UTC); no model was called.",
            openapi.RETRY_AFTER,
        ),
        500: err(
            "`memory_write_failed` (the answer's memory write failed under `failureMode: "
            "strict`), `internal_error`."
        ),
        502: err("`model_unavailable`: the model could not answer."),
        503: err("`auth_unavailable`: token verification is on and its issuer is unreachable."),
    }


_USER_MESSAGE = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hello"}]}
A2A_EXAMPLES: dict[str, object] = {
    "sendMessage": {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": _USER_MESSAGE},
    },
    "sendMessageV03": {
        "jsonrpc": "2.0",
        "id": "r-2",
        "method": "message/send",
        "params": {
            "message": {
                "kind": "message",
                "messageId": "m-2",
                "role": "user",
                "parts": [{"kind": "text", "text": "hello"}],
            }
        },
    },
    "listTasks": {"jsonrpc": "2.0", "id": 3, "method": "ListTasks", "params": {}},
    "getUnknownTask": {
        "jsonrpc": "2.0",
        "id": 4,
        "method": "GetTask",
        "params": {"id": "no-such-task"},
    },
}
CHAT_EXAMPLES: dict[str, object] = {
    "answer": {"messages": [{"role": "user", "content": "hello"}]},
    "stream": {
        "model": "agent",
        "stream": True,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "hello"}]},
        ],
    },
}


def agent_operations() -> list[Operation]:
    chat = ["chat"]
    a2a = ["a2a"]
    card_reply = {200: Reply("The agent card.", {JSON: AgentCard}, (REQUEST_ID_ECHO,))}
    card_doc = "Who this agent is, where to reach it, and its skills (tools, peers, memory)."
    return [
        Operation(
            "/v1/chat/completions",
            "post",
            "chatCompletions",
            "Run the agent on the last user message (OpenAI Chat Completions)",
            "The last message must be the user's; earlier messages are the caller's "
            "history, replayed only when memory holds nothing for the session. Fields "
            "OpenAI clients send beside these are accepted and ignored.",
            chat,
            _chat_replies(),
            [AGENT_TOKEN, PRINCIPAL, SESSION, DEPTH, REQUEST_ID],
            ChatRequest,
            body_examples=CHAT_EXAMPLES,
            extra_models=(ChatCompletionChunk,),
        ),
        Operation(
            "/v1/models",
            "get",
            "listModels",
            "The one model this agent serves: itself",
            "OpenAI-compatible model listing.",
            chat,
            {200: Reply("The model list.", {JSON: ModelList}, (REQUEST_ID_ECHO,))},
        ),
        Operation(
            "/tools",
            "get",
            "listTools",
            "Every tool the model is offered, with the JSON schema of its arguments",
            "MCP servers' tools (listed over MCP; a server that does not answer within 5 s "
            "is named in `unavailable`), the `delegate_to_<peer>` tools and the memory "
            "tools of the agent's `MEMORY_TOOLS` mode. The same callers as a chat: with "
            "verified identity on, the same credentials.",
            chat,
            {
                200: Reply("The tools.", {JSON: ToolList}, (REQUEST_ID_ECHO,)),
                401: openapi.error_reply(_AUTH_401),
                403: openapi.error_reply(_AUTH_403),
                503: openapi.error_reply(
                    "`auth_unavailable`: token verification is on and its issuer is unreachable."
                ),
            },
            [AGENT_TOKEN, REQUEST_ID],
        ),
        Operation(
            "/",
            "post",
            "a2a",
            "A2A JSON-RPC 2.0 (protocol 1.0 methods, 0.3 names as aliases)",
            "Methods: `SendMessage`, `GetTask`, `CancelTask`, `ListTasks` and the 0.3 "
            "`message/send`, `tasks/get`, `tasks/cancel`. Streaming, push notification and "
            "extended-card methods answer the unsupported-operation error (-32004). Every "
            "answer is a JSON-RPC response; it comes with HTTP 200 except for a refused "
            "caller (401, 403, also a decision on a paused task by someone not allowed to "
            "take it), a body that did not arrive or is too large (408, 413), a token budget "
            "used up (429, with `Retry-After`; no task is made) and an unreachable token "
            "issuer or a stopping replica (503), which carry the error object with that "
            "status.",
            a2a,
            {
                200: Reply("A JSON-RPC response.", {JSON: JsonRpcResponse}, (REQUEST_ID_ECHO,)),
                **{
                    status: Reply(
                        f"A JSON-RPC error ({why}).", {JSON: JsonRpcResponse}, (REQUEST_ID_ECHO,)
                    )
                    for status, why in (
                        (401, "a delegation without a valid agent token"),
                        (403, "a calling agent, or a decider, that is not allowed"),
                        (408, "the body did not arrive in time"),
                        (413, "the body is too large"),
                        (503, "the token issuer is unreachable, or the replica is stopping"),
                    )
                },
                429: Reply(
                    "A JSON-RPC error (a token budget used up: `budget_exhausted`).",
                    {JSON: JsonRpcResponse},
                    (REQUEST_ID_ECHO, openapi.RETRY_AFTER),
                ),
            },
            [
                AGENT_TOKEN,
                PRINCIPAL,
                openapi.session_header(
                    "Conversation id; without it the message's `contextId`, else a fresh id."
                ),
                A2A_DEPTH,
                REQUEST_ID,
                Header(A2A_VERSION_HEADER, "Protocol version; major 0 or 1.", {"type": "string"}),
            ],
            JsonRpcRequest,
            body_examples=A2A_EXAMPLES,
        ),
        Operation(
            "/.well-known/agent-card.json",
            "get",
            "agentCard",
            "The agent card (A2A 0.3 and 1.0 path)",
            card_doc,
            a2a,
            card_reply,
        ),
        Operation(
            "/.well-known/agent.json",
            "get",
            "agentCardLegacy",
            "The agent card (older path)",
            card_doc,
            a2a,
            card_reply,
        ),
        audit_operation(),
        Operation(
            LOAD_PATH,
            "get",
            "agentLoad",
            "The agent's load, for its autoscaler",
            "What KEDA's `metrics-api` scaler reads through the Agent's Service: `load` is "
            "the A2A tasks working in the whole Agent (counted in a shared task store, "
            "`scope: agent`; else this replica's, `scope: replica`) plus this replica's chat "
            "and autonomous runs in flight.",
            ["operations"],
            {200: Reply("The load.", {JSON: AgentLoad}, (REQUEST_ID_ECHO,))},
        ),
        *usage_operations(),
        trigger_operation(),
        *openapi.probe_operations("agent"),
    ]


def agent_document() -> openapi.Schema:
    """The agent's OpenAPI document (``docs/openapi/agent.json``)."""
    return openapi.build_document(
        title="KAOS agent",
        version=AGENT_API_VERSION,
        description=(
            "HTTP API of `kaos-agent`: OpenAI-compatible chat completions, A2A JSON-RPC and "
            "the agent card (both only when `AGENT_A2A_ENABLED`, the default), probes and "
            "metrics. Every non-2xx answer is the error model "
            "`{error: {code, message}, request_id}`."
        ),
        operations=agent_operations(),
        tags={
            "chat": "OpenAI-compatible endpoints.",
            "a2a": "Agent-to-agent protocol and the agent card.",
            "operations": "Probes and metrics.",
            "triggers": "Signed webhook deliveries that start A2A tasks.",
        },
    )


if __name__ == "__main__":
    sys.exit(openapi.write_or_check(sys.argv[1:], "agent.json", agent_document()))
