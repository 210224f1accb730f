"""A2A JSON-RPC 2.0 at ``POST /``: protocol 1.0 methods, and the 0.3 names as aliases.

Requests and results use a2a-sdk's own protobuf types (parsed and printed with
protobuf's JSON mapping, as the SDK's client expects), so the shapes cannot drift from
the protocol. ``SendMessage`` runs the agent and answers the finished task, unless the
caller asked ``returnImmediately``: then the run continues in the background and the
task can be polled with ``GetTask`` or stopped with ``CancelTask``. With approval gates, a
``SendMessage`` naming a paused task (``taskId``) is a decision on it, and a run that
calls a gated tool ends paused (``kaos_agent.a2a.decisions``). Errors are JSON-RPC
error objects with HTTP 200, the codes of the A2A specification.

Tasks live in the configured store (``kaos_agent.a2a.tasks``): with a store shared by the
Agent's replicas, any replica answers ``GetTask``, ``ListTasks`` and ``CancelTask`` for
any task, and a cancel reaches the replica running it (``kaos_agent.a2a.runs``). A run's
end is written to the store before the task is answered as ended. Each step of a run is
checkpointed (``kaos_agent.a2a.checkpoint``); a task claimed from a replica that died is
resumed here from its checkpoint, with the run context its task's metadata recorded
(session, principal, delegation depth: a verified user's token is a credential, not
stored, so a resumed run goes on without it). A replica that is
stopping refuses ``SendMessage`` with HTTP 503 (the error's ``data.code`` is
``shutting_down``), as it refuses other callers (see below).

The body goes through the shared edge decoding step (``kaos_core.http.body``) before any
method sees it, so a body the memory service or the chat endpoint would refuse (a
``Content-Encoding``, invalid UTF-8, nesting deeper than 32, a number literal longer than
40 characters, a control character or lone surrogate in any string, a duplicate key) is
refused here too, as a JSON-RPC error (``edge_error_code``), and never starts a run.
Client errors raised later (an unusable identity header, a bad delegation depth) stay
client errors: only a server-side ``KaosError`` (5xx) answers ``INTERNAL_ERROR``.

With agent identity verified (``kaos_agent.auth``), a delegating agent's token is checked
once the JSON-RPC envelope is read and before any method runs (the delegation depth may
travel in the message metadata, so the body is needed to see a delegation claim). A
refusal is a JSON-RPC error object (``INVALID_REQUEST``, the KAOS code in
``error.data.code``) with the HTTP status of the refusal (401 with ``WWW-Authenticate``,
403, 503): an A2A client must not take it for a task failure.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from a2a.compat.v0_3 import conversions as v03
from a2a.compat.v0_3 import types as v03_types
from a2a.types import a2a_pb2 as pb
from aiohttp import web
from google.protobuf.json_format import (  # type: ignore[import-untyped]
    MessageToDict,
    ParseDict,
    ParseError,
)
from kaos_core.errors import KaosError
from kaos_core.http.body import decode_json, read_body
from kaos_core.http.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    edge_error_code,
)
from kaos_core.http.middleware import request_id
from kaos_core.wire import A2A_VERSION_HEADER
from pydantic_ai.tools import DeferredToolResults

from kaos_agent.a2a.checkpoint import LeaseLost, Recorder, Save, decode
from kaos_agent.a2a.decisions import Decisions
from kaos_agent.a2a.rpc_errors import (
    TASK_NOT_CANCELABLE,
    TASK_NOT_FOUND,
    UNSUPPORTED_OPERATION,
    VERSION_NOT_SUPPORTED,
    RpcError,
)
from kaos_agent.a2a.run_task import kaos_metadata, resumed_deps, run_task
from kaos_agent.a2a.runs import STOPPED, ShuttingDown, TaskRuns
from kaos_agent.a2a.tasks import (
    Claim,
    Listing,
    TaskStore,
    Transition,
    canceled,
    completed,
    failed,
)
from kaos_agent.auth import EdgeAuth
from kaos_agent.context import RunDeps, Verified, run_context
from kaos_agent.delegation import KAOS_METADATA_KEY
from kaos_agent.runner import AgentRuntime
from kaos_agent.task_usage import with_usage

log = logging.getLogger(__name__)

DEFAULT_PAGE = 50
MAX_PAGE = 1000


def _rpc_error(req_id: object, code: int, message: str) -> web.Response:
    return web.json_response(
        {"jsonrpc": "2.0", "id": req_id, "error": {"code": code, "message": message}}
    )


def _refusal(req_id: object, exc: KaosError) -> web.Response:
    """A refused caller: a JSON-RPC error object (the protocol's shape, so not the error
    middleware's), with the refusal's HTTP status and the headers it carries."""
    error = {"code": INVALID_REQUEST, "message": exc.message, "data": {"code": exc.code}}
    return web.json_response(
        {"jsonrpc": "2.0", "id": req_id, "error": error},
        status=exc.status,
        headers=exc.headers,
    )


def _body_depth(params: object) -> object:
    """``params.message.metadata.kaos.delegationDepth`` of a raw request, if any (both
    protocol versions put the message, and its metadata, there)."""
    step: object = params
    for key in ("message", "metadata", KAOS_METADATA_KEY, "delegationDepth"):
        if not isinstance(step, dict):
            return None
        step = step.get(key)
    return step


def _rpc_result(req_id: object, result: object) -> web.Response:
    return web.json_response({"jsonrpc": "2.0", "id": req_id, "result": result})


def _to_dict(message: Any) -> dict[str, Any]:
    doc: dict[str, Any] = MessageToDict(message, preserving_proto_field_name=False)
    return doc


def _parse(params: object, message: Any) -> Any:
    if not isinstance(params, dict):
        raise RpcError(INVALID_PARAMS, "params must be an object")
    try:
        return ParseDict(params, message, ignore_unknown_fields=True)
    except ParseError as exc:
        log.info("invalid A2A params", extra={"error": str(exc)})
        raise RpcError(INVALID_PARAMS, f"invalid params for {message.DESCRIPTOR.name}") from None


def _invalid_params(exc: Exception) -> RpcError:
    # The validator's text names internals; the caller gets a fixed message, the log the rest.
    log.info("invalid A2A params", extra={"error": str(exc)})
    return RpcError(INVALID_PARAMS, "invalid params")


def _message_text(message: pb.Message) -> str:
    texts: list[str] = []
    for part in message.parts:
        if part.HasField("text"):
            texts.append(part.text)
        elif part.HasField("data"):
            texts.append(json.dumps(MessageToDict(part.data)))
    return "\n".join(t for t in texts if t)


def _metadata_depth(message: pb.Message) -> object:
    """The depth a caller put in the message's ``kaos`` metadata, if any."""
    if not message.HasField("metadata"):
        return None
    return kaos_metadata(message.metadata).get("delegationDepth")


# Where ``A2AServer.handle`` keeps what the edge proved, for the handler's run context.
_VERIFIED = "kaos_agent_a2a_verified"


def _context(request: web.Request, message: pb.Message | None = None) -> RunDeps:
    """The run context of this request; an unusable header is an invalid-params error."""
    try:
        return run_context(
            request.headers,
            request_id=request_id(request),
            session=(message.context_id or None) if message is not None else None,
            depth=_metadata_depth(message) if message is not None else None,
            verified=request.get(_VERIFIED),
        )
    except KaosError as exc:
        raise RpcError(INVALID_PARAMS, exc.message) from None


def _kaos_error_code(exc: KaosError) -> int:
    """A client error (4xx) stays the caller's error; only a 5xx is an internal error."""
    return INTERNAL_ERROR if exc.status >= 500 else edge_error_code(exc)


Handler = Callable[[web.Request, object, bool], Awaitable[object]]


# The methods that start a run: refused while the replica stops.
_STARTS_RUN = frozenset({"SendMessage", "message/send"})


class A2AServer:
    def __init__(
        self,
        runtime: AgentRuntime,
        tasks: TaskStore,
        runs: TaskRuns,
        *,
        auth: EdgeAuth | None = None,
        approvals: Decisions | None = None,
    ) -> None:
        self.runtime = runtime
        self.tasks = tasks
        self.runs = runs
        self.auth = auth
        runs.on_claim = self._resume
        # Approval gates (``kaos_agent.approvals``): paused runs, decided and resumed here.
        self.approvals = approvals
        if approvals is not None:
            approvals.resume = self._continue
            runtime.on_pause = approvals.pause_chat
            runs.upkeep.append(approvals.tick)
        # Method name → (handler, speaks protocol 0.3 shapes).
        self._methods: dict[str, tuple[Handler, bool]] = {
            "SendMessage": (self._send_message, False),
            "GetTask": (self._get_task, False),
            "CancelTask": (self._cancel_task, False),
            "ListTasks": (self._list_tasks, False),
            "message/send": (self._send_message, True),
            "tasks/get": (self._get_task, True),
            "tasks/cancel": (self._cancel_task, True),
        }
        self._unsupported = {
            "SendStreamingMessage",
            "SubscribeToTask",
            "message/stream",
            "tasks/resubscribe",
            "GetExtendedAgentCard",
            "CreateTaskPushNotificationConfig",
            "GetTaskPushNotificationConfig",
            "ListTaskPushNotificationConfigs",
            "DeleteTaskPushNotificationConfig",
        }

    async def handle(self, request: web.Request) -> web.Response:
        try:
            body = decode_json(await read_body(request))
        except KaosError as exc:
            # Refused at the edge: the message names what is wrong, the id is unknown.
            refusal = _rpc_error(None, edge_error_code(exc), exc.message)
            if exc.closes_connection:
                # A body that did not arrive, or is too large to read: the transport's
                # status (408, 413), and the connection closed, as on every other route.
                refusal.set_status(exc.status)
                refusal.force_close()
            return refusal
        if isinstance(body, list):
            return _rpc_error(None, INVALID_REQUEST, "batch requests are not supported")
        if not isinstance(body, dict):
            return _rpc_error(None, INVALID_REQUEST, "the request must be a JSON object")
        req_id = body.get("id")
        if isinstance(req_id, bool) or not (req_id is None or isinstance(req_id, str | int)):
            return _rpc_error(None, INVALID_REQUEST, "id must be a string, an integer or null")
        if self.auth is not None:
            try:
                verified: Verified = await self.auth.check(
                    request.headers, body_depth=_body_depth(body.get("params"))
                )
                request[_VERIFIED] = verified
            except KaosError as exc:
                if exc.status in (401, 403, 503):
                    return _refusal(req_id, exc)
                # An unusable identity header: the caller's error, as elsewhere.
                return _rpc_error(req_id, _kaos_error_code(exc), exc.message)
        method = body.get("method")
        if body.get("jsonrpc") != "2.0" or not isinstance(method, str) or not method:
            return _rpc_error(req_id, INVALID_REQUEST, "not a JSON-RPC 2.0 request")
        version = request.headers.get(A2A_VERSION_HEADER, "")
        if version and version.split(".")[0] not in ("0", "1"):
            # Echoed with repr and cut short: the header is the caller's, not ours to trust.
            return _rpc_error(
                req_id, VERSION_NOT_SUPPORTED, f"A2A version {version[:16]!r} is not supported"
            )
        if method in self._unsupported:
            return _rpc_error(req_id, UNSUPPORTED_OPERATION, f"{method} is not supported")
        entry = self._methods.get(method)
        if entry is None:
            return _rpc_error(req_id, METHOD_NOT_FOUND, f"method {method!r} not found")
        handler, legacy = entry
        if method in _STARTS_RUN and self.runs.draining:
            refused = _refusal(req_id, ShuttingDown())
            # The connection closes with it: the caller's next one goes through the Service
            # to another replica (a kept-alive one would come back here).
            refused.force_close()
            return refused
        try:
            result = await handler(request, body.get("params", {}), legacy)
        except RpcError as exc:
            return _rpc_error(req_id, exc.code, exc.message)
        except KaosError as exc:
            if exc.status in (403, 429):
                # A refused decision, a used-up budget: the caller's status (and Retry-After),
                # as at the edge.
                return _refusal(req_id, exc)
            return _rpc_error(req_id, _kaos_error_code(exc), exc.message)
        return _rpc_result(req_id, result)

    def _task_result(self, stored: pb.Task, legacy: bool, history_length: int = 0) -> object:
        task = pb.Task()
        task.CopyFrom(stored)
        if history_length > 0 and len(task.history) > history_length:
            keep = list(task.history)[-history_length:]
            del task.history[:]
            task.history.extend(keep)
        if legacy:
            return v03.to_compat_task(task).model_dump(mode="json", exclude_none=True)
        return _to_dict(task)

    async def _send_message(self, request: web.Request, params: object, legacy: bool) -> object:
        if legacy:
            try:
                compat = v03_types.MessageSendParams.model_validate(params)
            except ValueError as exc:
                raise _invalid_params(exc) from None
            message = v03.to_core_message(compat.message)
            background = bool(compat.configuration and compat.configuration.blocking is False)
        else:
            send = _parse(params, pb.SendMessageRequest())
            message = send.message
            background = send.configuration.return_immediately
        if not _message_text(message).strip():
            raise RpcError(INVALID_PARAMS, "the message has no text part")
        deps = _context(request, message)
        if message.task_id and self.approvals is not None:
            # A decision on a paused task (its run resumes), not a new task.
            task, run = await self.approvals.decide(message, deps, request.get(_VERIFIED))
        else:
            accounting = self.runtime.accounting
            if accounting is not None:
                # A budget used up refuses the task (429, Retry-After) before it exists.
                await accounting.admit(deps)
            task, run = await self.start(message, deps)
        if not background:
            try:
                await run
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise  # this request was cancelled (the run with it)
                # The run was stopped (a cancel request, a shutdown): its state is stored.
            found = await self.tasks.owned(task.id)
            task = found[0] if found is not None else task
        result = self._task_result(task, legacy)
        return result if legacy else {"task": result}

    async def start(self, message: pb.Message, deps: RunDeps) -> tuple[pb.Task, asyncio.Task[None]]:
        """Store the task of ``message`` (its text is the prompt) and start its run: the
        task as stored, and the run (awaited by a blocking send, left to run otherwise).
        What a resumed run reads back is in the task's metadata. Raises
        ``TaskStoreUnavailable`` when the task cannot be stored: nothing runs then."""
        task = run_task(message, deps)
        await self.tasks.create(task, principal=deps.principal, runner=self.runs.runner)
        recorder = Recorder(self._saver(task.id))
        text = _message_text(message)
        return task, self.runs.begin(task.id, self._run(task.id, text, deps, recorder))

    def _saver(self, task_id: str) -> Save:
        async def save(data: bytes) -> bool:
            return await self.tasks.checkpoint(task_id, self.runs.runner, data)

        return save

    def _resume(self, claim: Claim) -> None:
        """Run a task claimed from a replica that stopped, from its last checkpoint (from its
        message when it has none)."""
        self._continue(claim)

    def _continue(
        self, claim: Claim, approvals: DeferredToolResults | None = None
    ) -> asyncio.Task[None]:
        """Run a claimed task here from its checkpoint; with ``approvals``, a paused run
        resumed with the decisions on its calls."""
        task = claim.task
        text = _message_text(task.history[0]) if task.history else ""
        try:
            resume = None
            if claim.checkpoint is not None or approvals is not None:
                resume = decode(claim.checkpoint or b"", approvals=approvals)
            deps = resumed_deps(task, claim.principal)
        except (ValueError, KaosError):
            log.warning("a claimed task cannot be resumed", extra={"task": task.id})
            run = self._end(task.id, failed("the run could not be resumed from its checkpoint"))
            return self.runs.begin(task.id, run)
        recorder = Recorder(self._saver(task.id), resume)
        return self.runs.begin(task.id, self._run(task.id, text, deps, recorder))

    async def _run(self, task_id: str, text: str, deps: RunDeps, recorder: Recorder) -> None:
        """One run; its end is written to the store before the task reads as ended."""
        deps = deps.with_task(task_id)
        try:
            outcome = await self.runtime.run(text, deps, entry="a2a", recorder=recorder)
        except LeaseLost:
            # Another replica claimed the task (this one's lease lapsed): its run is theirs.
            log.warning("a run stopped: another replica took its task", extra={"task": task_id})
            return
        except asyncio.CancelledError:
            # Stopped: by a cancel (already stored: no change), or by the pod stopping (the
            # task failed, or handed over: left working for another replica to resume).
            if not self.runs.handing_over:
                await self._end(task_id, failed(STOPPED) if self.runs.stopping else canceled)
            raise
        except KaosError as exc:
            await self._end(task_id, failed(exc.message))
            return
        except Exception:  # a task fails; the server goes on
            log.exception("a2a run failed")
            await self._end(task_id, failed("internal error"))
            return
        if outcome.paused is not None and self.approvals is not None:
            await self.approvals.hold(task_id, outcome.paused)  # waits for a decision
            return
        await self._end(task_id, with_usage(completed(outcome.text), outcome))

    async def _end(self, task_id: str, change: Transition) -> None:
        try:
            await self.tasks.finish(task_id, change)
        except KaosError:
            # The store logged why. The lease is no longer renewed: once it lapses, a
            # replica claims the task and resumes it from its last checkpoint (the final
            # answer's, when the model gave one), so it is not left working.
            log.warning("the end of a task could not be stored", extra={"task": task_id})

    async def _get_task(self, request: web.Request, params: object, legacy: bool) -> object:
        if legacy:
            try:
                query = v03_types.TaskQueryParams.model_validate(params)
            except ValueError as exc:
                raise _invalid_params(exc) from None
            task_id, history = query.id, query.history_length or 0
        else:
            get = _parse(params, pb.GetTaskRequest())
            task_id, history = get.id, get.history_length
        task = await self.tasks.get(task_id, _context(request).principal)
        if task is None:
            raise RpcError(TASK_NOT_FOUND, f"task {task_id!r} not found")
        return self._task_result(task, legacy, history)

    async def _cancel_task(self, request: web.Request, params: object, legacy: bool) -> object:
        if legacy:
            try:
                task_id = v03_types.TaskIdParams.model_validate(params).id
            except ValueError as exc:
                raise _invalid_params(exc) from None
        else:
            task_id = _parse(params, pb.CancelTaskRequest()).id
        found = await self.tasks.cancel(task_id, _context(request).principal)
        if found.task is None:
            raise RpcError(TASK_NOT_FOUND, f"task {task_id!r} not found")
        if not found.canceled:
            state = pb.TaskState.Name(found.task.status.state)
            raise RpcError(TASK_NOT_CANCELABLE, f"task {task_id!r} is {state}: not cancelable")
        # Stopped here if it runs here; another replica hears of it through the store.
        self.runs.cancel_local(task_id)
        return self._task_result(found.task, legacy)

    async def _list_tasks(self, request: web.Request, params: object, legacy: bool) -> object:
        query = _parse(params, pb.ListTasksRequest())
        size = min(query.page_size, MAX_PAGE) if query.page_size > 0 else DEFAULT_PAGE
        # An approver lists every user's paused runs: the ones they may decide.
        every_owner = (
            query.status == pb.TASK_STATE_INPUT_REQUIRED
            and self.approvals is not None
            and await self.approvals.approves_all(request.get(_VERIFIED))
        )
        listing = Listing(
            _context(request).principal,
            query.context_id or None,
            size,
            query.status,
            every_owner=every_owner,
        )
        page, total = await self.tasks.list_tasks(listing)
        response = pb.ListTasksResponse(tasks=page, page_size=size, total_size=total)
        return _to_dict(response)
