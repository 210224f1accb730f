"""``MemoryServiceClient``: the one way agents and the CLI talk to a memory service.

Failure semantics follow the contract: ``recall`` and ``list`` never raise on transport
errors or server failures (they answer an empty, ``degraded`` response, since memory is
augmentation); ``write`` and ``forget`` raise ``MemoryUnavailable`` only in strict mode
and otherwise answer ``degraded``. A 4xx answer is the caller's mistake (bad scope,
posture denial) and always raises ``MemoryRequestRejected``: retrying cannot fix it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import aiohttp
from pydantic import BaseModel, ValidationError

from kaos_core.auth.tokenfile import TokenFile
from kaos_core.http.failures import describe_failure
from kaos_core.memory.contract import (
    ALL_TIERS,
    AuditAction,
    AuditRequest,
    AuditResponse,
    ErrorResponse,
    FailureMode,
    ForgetRequest,
    ForgetResponse,
    Level,
    ListRequest,
    ListResponse,
    RecallPurpose,
    RecallRequest,
    RecallResponse,
    Tier,
    Turn,
    WriteOrigin,
    WriteRequest,
    WriteResponse,
)
from kaos_core.memory.quarantine import (
    QuarantineChangeRequest,
    QuarantineChangeResponse,
    QuarantineListRequest,
    QuarantineListResponse,
)
from kaos_core.tracing import client_session
from kaos_core.wire import (
    AGENT_TOKEN_HEADER,
    AUTHORIZATION_HEADER,
    REQUEST_ID_HEADER,
    USER_TOKEN_HEADER,
    Identity,
    validate_agent_identity,
    validate_subject,
)

log = logging.getLogger(__name__)

R = TypeVar("R", bound=BaseModel)


class MemoryClientError(Exception):
    """Root of the client's errors."""


class MemoryUnavailable(MemoryClientError):
    """Transport failure, timeout or 5xx: temporary, worth a retry later."""


class MemoryRequestRejected(MemoryClientError):
    """A 4xx answer: the request itself is wrong or not allowed."""

    def __init__(self, status: int, code: str, message: str, request_id: str | None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.request_id = request_id


# How long a write refused at connect waits before its one more try (a rollout's new
# endpoints reach the proxies within about a second).
REFUSED_RETRY_SECONDS = 0.5


class MemoryServiceClient:
    """Async client for one memory service, bound to one calling agent (or none: admin).

    The agent identity is fixed at construction, from the pod's ``AGENT_IDENTITY``;
    principal and session vary per call and come from the request context. With
    ``token_file`` (the pod's projected memory token) every call presents the file's
    current content as ``X-Agent-Token``: it is re-read whenever kubelet rotates it, so a
    long-lived client never sends an expired token.
    """

    def __init__(
        self,
        base_url: str,
        *,
        agent_identity: str | None = None,
        timeout: float = 10.0,
        failure_mode: FailureMode = "soft",
        session: aiohttp.ClientSession | None = None,
        token_file: Path | str | TokenFile | None = None,
        admin_credential: str | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        # An administrator's Kubernetes credential (the CLI, no agent): sent as
        # ``Authorization: Bearer`` for the memory service to review (``kaos_memory.admin``).
        self.admin_credential = admin_credential
        self.token = (
            token_file
            if token_file is None or isinstance(token_file, TokenFile)
            else TokenFile(token_file)
        )
        self.agent_identity = (
            None if agent_identity is None else validate_agent_identity(agent_identity)
        )
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self.failure_mode: FailureMode = failure_mode
        self._session = session
        self._owns_session = session is None

    async def __aenter__(self) -> MemoryServiceClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None and self._owns_session:
            await self._session.close()
            self._session = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = client_session(timeout=self.timeout)
        return self._session

    def _identity(self, session_id: str | None, principal: str | None) -> Identity:
        return Identity(
            agent=self.agent_identity,
            principal=None if principal is None else validate_subject("principal", principal),
            session=None if session_id is None else validate_subject("session", session_id),
        )

    async def _post(
        self,
        path: str,
        body: BaseModel,
        identity: Identity,
        response_model: type[R],
        request_id: str | None,
        user_token: str | None = None,
        *,
        retry_refused: bool = False,
    ) -> R:
        """``retry_refused``: a connection refused (the service's address had no process
        listening: a pod stopping as a rollout replaces it) is tried once more, after
        ``REFUSED_RETRY_SECONDS``: nothing was sent, so nothing can be done twice."""
        if retry_refused:
            try:
                return await self._post(
                    path, body, identity, response_model, request_id, user_token
                )
            except MemoryUnavailable as exc:
                if not isinstance(exc.__cause__, aiohttp.ClientConnectorError):
                    raise
            await asyncio.sleep(REFUSED_RETRY_SECONDS)
        headers = identity.headers()
        token = self.token.read() if self.token is not None else None
        if token is not None:
            headers[AGENT_TOKEN_HEADER] = token
        if user_token is not None:
            headers[USER_TOKEN_HEADER] = user_token
        if self.admin_credential is not None:
            headers[AUTHORIZATION_HEADER] = f"Bearer {self.admin_credential}"
        if request_id is not None:
            headers[REQUEST_ID_HEADER] = request_id
        try:
            async with self._http().post(
                self.base_url + path,
                data=body.model_dump_json(exclude_none=True),
                headers={**headers, "Content-Type": "application/json"},
                timeout=self.timeout,
            ) as resp:
                raw = await resp.read()
                if resp.status < 400:
                    # Straight from the bytes: no intermediate document on every recall.
                    return response_model.model_validate_json(raw)
                payload: Any = json.loads(raw)
                if resp.status >= 500:
                    raise MemoryUnavailable(_describe(resp.status, payload))
                err = ErrorResponse.model_validate(payload)
                raise MemoryRequestRejected(
                    resp.status, err.error.code, err.error.message, err.request_id
                )
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            log.warning("memory call failed", extra={"path": path}, exc_info=True)
            if isinstance(exc, ValidationError):
                raise MemoryUnavailable(f"{path}: unexpected answer") from exc
            raise MemoryUnavailable(f"{path}: {describe_failure(exc)}") from exc

    async def write(
        self,
        turns: Sequence[Turn | tuple[str, str]],
        *,
        session_id: str,
        principal: str | None = None,
        infer: bool = True,
        failure_mode: FailureMode | None = None,
        request_id: str | None = None,
        user_token: str | None = None,
        origin: WriteOrigin = "conversation",
        said_at: str | None = None,
    ) -> WriteResponse:
        mode = failure_mode or self.failure_mode
        body = WriteRequest(
            turns=[t if isinstance(t, Turn) else Turn(role=t[0], content=t[1]) for t in turns],  # type: ignore[arg-type]
            infer=infer,
            failure_mode=mode,
            origin=origin,
            said_at=said_at,
        )
        try:
            return await self._post(
                "/v1/write",
                body,
                self._identity(session_id, principal),
                WriteResponse,
                request_id,
                user_token,
                retry_refused=True,
            )
        except MemoryUnavailable:
            if mode == "strict":
                raise
            log.warning("memory write degraded", exc_info=True)
            return WriteResponse(accepted=0, scheduled=False, degraded=True)

    async def recall(
        self,
        level: Level,
        query: str,
        *,
        session_id: str | None = None,
        principal: str | None = None,
        top_k: int | None = None,
        include: Sequence[Tier] = ALL_TIERS,
        request_id: str | None = None,
        user_token: str | None = None,
        purpose: RecallPurpose = "search",
        as_of: str | None = None,
        history: bool = False,
    ) -> RecallResponse:
        body = RecallRequest(
            level=level,
            query=query,
            top_k=top_k,
            include=list(include),
            purpose=purpose,
            as_of=as_of,
            history=history,
        )
        try:
            return await self._post(
                "/v1/recall",
                body,
                self._identity(session_id, principal),
                RecallResponse,
                request_id,
                user_token,
            )
        except MemoryUnavailable:
            log.warning("memory recall degraded", exc_info=True)
            return RecallResponse(degraded=True)

    async def list(
        self,
        level: Level,
        *,
        session_id: str | None = None,
        principal: str | None = None,
        include: Sequence[Tier] = ALL_TIERS,
        limit: int = 100,
        cursor: str | None = None,
        request_id: str | None = None,
        user_token: str | None = None,
        history: bool = False,
    ) -> ListResponse:
        body = ListRequest(
            level=level, include=list(include), limit=limit, cursor=cursor, history=history
        )
        try:
            return await self._post(
                "/v1/list",
                body,
                self._identity(session_id, principal),
                ListResponse,
                request_id,
                user_token,
            )
        except MemoryUnavailable:
            log.warning("memory list degraded", exc_info=True)
            return ListResponse(degraded=True)

    async def forget(
        self,
        level: Level,
        *,
        session_id: str | None = None,
        principal: str | None = None,
        failure_mode: FailureMode | None = None,
        request_id: str | None = None,
        user_token: str | None = None,
    ) -> ForgetResponse:
        mode = failure_mode or self.failure_mode
        body = ForgetRequest(level=level, failure_mode=mode)
        try:
            return await self._post(
                "/v1/forget",
                body,
                self._identity(session_id, principal),
                ForgetResponse,
                request_id,
                user_token,
            )
        except MemoryUnavailable:
            if mode == "strict":
                raise
            log.warning("memory forget degraded", exc_info=True)
            return ForgetResponse(degraded=True)

    async def audit(
        self,
        *,
        limit: int = 100,
        cursor: str | None = None,
        action: AuditAction | None = None,
        request_id: str | None = None,
    ) -> AuditResponse:
        """One page of the store's audit (erasures, exports, imports; ``action``: only
        those), newest first (an administrator's call). Never degraded: a failure raises
        ``MemoryUnavailable``."""
        body = AuditRequest(limit=limit, cursor=cursor, action=action)
        return await self._post("/v1/audit", body, Identity(), AuditResponse, request_id)

    async def quarantined(
        self,
        level: Level = "store",
        *,
        principal: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
        request_id: str | None = None,
    ) -> QuarantineListResponse:
        """One page of the scope's quarantined facts with their reasons (an administrator's
        call). Never degraded: a failure raises ``MemoryUnavailable``."""
        body = QuarantineListRequest(level=level, limit=limit, cursor=cursor)
        identity = self._identity(None, principal)
        return await self._post(
            "/v1/quarantine/list", body, identity, QuarantineListResponse, request_id
        )

    async def release(
        self,
        ids: Sequence[str],
        level: Level = "store",
        *,
        principal: str | None = None,
        request_id: str | None = None,
    ) -> QuarantineChangeResponse:
        """Release quarantined facts (recalled from then on); all or none (404)."""
        return await self._quarantine("release", ids, level, principal, request_id)

    async def erase_quarantined(
        self,
        ids: Sequence[str],
        level: Level = "store",
        *,
        principal: str | None = None,
        request_id: str | None = None,
    ) -> QuarantineChangeResponse:
        """Erase quarantined facts; all or none (404)."""
        return await self._quarantine("erase", ids, level, principal, request_id)

    async def _quarantine(
        self,
        change: str,
        ids: Sequence[str],
        level: Level,
        principal: str | None,
        request_id: str | None,
    ) -> QuarantineChangeResponse:
        body = QuarantineChangeRequest(level=level, ids=list(ids))
        identity = self._identity(None, principal)
        return await self._post(
            f"/v1/quarantine/{change}", body, identity, QuarantineChangeResponse, request_id
        )

    async def ready(self) -> bool:
        """True when the service answers ``/readyz`` with 200."""
        try:
            async with self._http().get(self.base_url + "/readyz") as resp:
                return resp.status == 200
        except (TimeoutError, aiohttp.ClientError):
            return False


def _describe(status: int, payload: Any) -> str:
    try:
        err = ErrorResponse.model_validate(payload)
    except ValidationError:
        return f"HTTP {status}"
    return f"HTTP {status} {err.error.code}: {err.error.message}"
