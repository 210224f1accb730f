"""An agent's A2A tasks through a2a-sdk's client: send a message, get, cancel, list.

The agent serves A2A 1.0 JSON-RPC at ``POST /`` with a2a-sdk's own protobuf types, so
the client is the SDK's too: requests are built and answers parsed by the same types
the server prints, and each answer is handed back in protobuf's JSON mapping (what
``-o json`` shows). The agent is addressed directly (no card is fetched first), over
JSON-RPC without streaming: ``SendMessage`` answers the finished task, or the running one
with ``return_immediately``.

Failures are ``TaskCallFailed``: ``TaskCallRefused`` when the agent answered the call
with a JSON-RPC error (its code and message), ``TaskHttpRefused`` when it answered with an
HTTP error status (a refused caller: the status kept), ``TaskUnreachable`` when no answer
came (in plain words, not the HTTP library's), otherwise a one-line reason naming the
agent's URL.
Task states read without the ``TASK_STATE_`` prefix (``COMPLETED``).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx
from a2a.client import Client, ClientConfig, ClientFactory, minimal_agent_card
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskState,
)
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import JSON_RPC_ERROR_CODE_MAP, A2AError
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]

TIMEOUT = 300.0
# An error code the SDK has no class for comes back as text: "JSON-RPC Error <code>: <msg>".
_UNMAPPED = re.compile(r"JSON-RPC Error (?P<code>-?\d+): (?P<message>.*)", re.DOTALL)


class TaskCallFailed(Exception):
    """An A2A call that gave no answer; ``message`` says why in one line."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class TaskUnreachable(TaskCallFailed):
    """No answer from the agent: the connection failed, broke or timed out."""


def _transport(exc: BaseException) -> str:
    """What went wrong with the connection, in plain words (not httpx's text)."""
    if isinstance(exc, httpx.TimeoutException):
        return "timed out"
    if isinstance(exc, httpx.ConnectError):
        return "could not connect"
    if isinstance(exc, httpx.RemoteProtocolError):
        return "the server closed the connection"
    if isinstance(exc, httpx.HTTPError):
        return "the connection failed"
    return "the answer could not be read"


class TaskHttpRefused(TaskCallFailed):
    """The agent answered the call with an HTTP error status (a refused caller)."""

    def __init__(self, url: str, method: str, status: int) -> None:
        super().__init__(f"agent at {url} answered {status} to {method}")
        self.status = status


class TaskCallRefused(TaskCallFailed):
    """The agent answered the call with a JSON-RPC error."""

    def __init__(self, method: str, code: int | None, message: str) -> None:
        super().__init__(f"{method} refused ({code}): {message}")
        self.code = code


def state_of(task: dict[str, Any]) -> str:
    return str((task.get("status") or {}).get("state", "")).removeprefix("TASK_STATE_")


def answer_of(task: dict[str, Any]) -> str:
    """The task's answer: its artifacts' text, else its status message's."""
    texts = [
        part.get("text", "")
        for artifact in task.get("artifacts") or []
        for part in artifact.get("parts") or []
    ]
    if texts:
        return "".join(texts)
    message = (task.get("status") or {}).get("message") or {}
    return "".join(p.get("text", "") for p in message.get("parts") or [])


def failure_of(url: str, method: str, exc: A2AError) -> TaskCallFailed:
    """The SDK's error as one line: the agent's refusal with its code, an HTTP status,
    or the transport's failure."""
    code = JSON_RPC_ERROR_CODE_MAP.get(type(exc))
    if code is not None:
        return TaskCallRefused(method, code, exc.message)
    cause = exc.__cause__
    if isinstance(cause, httpx.HTTPStatusError):
        return TaskHttpRefused(url, method, cause.response.status_code)
    if isinstance(cause, httpx.HTTPError | ValueError):
        return TaskUnreachable(f"agent at {url} failed: {_transport(cause)}")
    unmapped = _UNMAPPED.fullmatch(str(exc))
    if unmapped:
        return TaskCallRefused(method, int(unmapped["code"]), unmapped["message"])
    return TaskCallFailed(f"agent at {url} failed: {type(exc).__name__}: {exc}")


class TaskClient:
    """The A2A tasks of the agent at ``url``, as one caller (its headers) sees them."""

    def __init__(self, client: Client, url: str) -> None:
        self._client = client
        self._url = url

    async def send(self, text: str, *, session: str | None, wait: bool) -> dict[str, Any]:
        """Send ``text`` as a new task (in ``session`` when given); the task."""
        message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text=text)])
        if session:
            message.context_id = session
        return await self.send_message(message, wait=wait)

    async def send_message(self, message: Message, *, wait: bool) -> dict[str, Any]:
        """Send ``message`` (a new task, or to the task it names); the task as answered."""
        request = SendMessageRequest(message=message)
        if not wait:
            request.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
        task: dict[str, Any] = {}
        try:
            async for event in self._client.send_message(request):
                if event.HasField("task"):
                    task = MessageToDict(event.task)
        except A2AError as exc:
            raise failure_of(self._url, "SendMessage", exc) from exc
        return task

    async def get(self, task_id: str, *, history: int = 0) -> dict[str, Any]:
        request = GetTaskRequest(id=task_id)
        if history:
            request.history_length = history
        try:
            task = await self._client.get_task(request)
        except A2AError as exc:
            raise failure_of(self._url, "GetTask", exc) from exc
        found: dict[str, Any] = MessageToDict(task)
        return found

    async def cancel(self, task_id: str) -> dict[str, Any]:
        try:
            task = await self._client.cancel_task(CancelTaskRequest(id=task_id))
        except A2AError as exc:
            raise failure_of(self._url, "CancelTask", exc) from exc
        cancelled: dict[str, Any] = MessageToDict(task)
        return cancelled

    async def list(
        self, *, session: str | None = None, limit: int, state: TaskState | None = None
    ) -> dict[str, Any]:
        """The tasks visible to the caller, newest first (``tasks``, paging fields); only
        those in ``session``, and in ``state``, when given."""
        request = ListTasksRequest(page_size=limit)
        if session:
            request.context_id = session
        if state is not None:
            request.status = state
        try:
            listed = await self._client.list_tasks(request)
        except A2AError as exc:
            raise failure_of(self._url, "ListTasks", exc) from exc
        page: dict[str, Any] = MessageToDict(listed)
        return page


@asynccontextmanager
async def task_client(
    url: str, headers: Mapping[str, str], *, request_timeout: float = TIMEOUT
) -> AsyncIterator[TaskClient]:
    """A ``TaskClient`` for the agent at ``url`` whose requests carry ``headers``."""
    async with httpx.AsyncClient(headers=dict(headers), timeout=request_timeout) as http:
        config = ClientConfig(
            streaming=False,
            httpx_client=http,
            supported_protocol_bindings=[TransportProtocol.JSONRPC],
        )
        card = minimal_agent_card(url + "/", [TransportProtocol.JSONRPC])
        yield TaskClient(ClientFactory(config).create(card), url)
