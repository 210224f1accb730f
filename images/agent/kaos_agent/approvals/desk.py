"""Decisions on paused runs: who may take them, and the run resumed with them.

A decision is an A2A ``SendMessage`` to the paused task (``taskId``) whose data part is
``{"decision": "approve"|"deny", "reason": "..."}`` (``parse_decision``). It is the run's
own principal's to take, or, under verified user identity with ``AGENT_RBAC``, anyone RBAC
lets ``create`` ``agents/approve`` on this Agent (asked with a SubjectAccessReview);
anyone else is refused with 403 and nothing changes. Without verified identity the
task's principal rules as for ``GetTask`` (an anonymous task is anyone's). Taking the
decision is one atomic step of the store (``take_paused``): of two deciders, or a decider
and the timeout, on any replicas, one wins and the other finds the task no longer paused.
The replica that took it resumes the run from the paused checkpoint. The timeout is the
task-runs beat's (``tick``): a task past its deadline is decided per ``onTimeout``. Every
decision is appended to the audit trail (one entry per pending call, with who decided).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable

from a2a.types import a2a_pb2 as pb
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
from kaos_core.auth.invoke import APPROVE_SUBRESOURCE, VERB
from kaos_core.auth.verify import Forbidden, Unauthenticated
from kaos_core.errors import KaosError
from kaos_core.http.jsonrpc import INVALID_PARAMS

from kaos_agent.a2a.checkpoint import encode
from kaos_agent.a2a.decisions import Resume
from kaos_agent.a2a.rpc_errors import TASK_NOT_FOUND, RpcError
from kaos_agent.a2a.run_task import run_task, session_of
from kaos_agent.a2a.tasks import Claim, TaskStore, visible
from kaos_agent.approvals.pending import (
    MAX_REASON_CHARS,
    TIMEOUT,
    Decision,
    Verdict,
    approval_of,
    decided,
    paused,
    results,
    waiting_text,
)
from kaos_agent.audit.log import AuditEntry, AuditLog
from kaos_agent.auth import EdgeAuth
from kaos_agent.context import RunDeps, Verified
from kaos_agent.runner import Paused
from kaos_agent.settings import AgentSettings, ApprovalPolicy

log = logging.getLogger(__name__)

# Whether a verified caller, not the run's own user, may decide (RBAC's answer).
Approver = Callable[[Verified], Awaitable[bool]]


def _bad_decision(text: str) -> RpcError:
    return RpcError(INVALID_PARAMS, text)


class NotPaused(KaosError):
    status = 409
    code = "task_not_paused"


def parse_decision(message: pb.Message) -> tuple[Verdict, str]:
    """The verdict and reason of a decision message; an invalid-params error otherwise."""
    for part in message.parts:
        if not part.HasField("data"):
            continue
        doc = MessageToDict(part.data)
        if not isinstance(doc, dict) or "decision" not in doc:
            continue
        verdict, reason = doc.get("decision"), doc.get("reason", "")
        if verdict not in ("approve", "deny"):
            raise _bad_decision('"decision" must be "approve" or "deny"')
        if not isinstance(reason, str) or len(reason) > MAX_REASON_CHARS:
            raise _bad_decision(f'"reason" must be text of at most {MAX_REASON_CHARS} characters')
        return ("approve" if verdict == "approve" else "deny"), reason
    raise _bad_decision(
        'a message to a paused task carries a data part {"decision": "approve"|"deny"}'
    )


def rbac_approver(auth: EdgeAuth | None) -> Approver | None:
    """RBAC's ``create agents/approve`` for verified users (``None`` without AGENT_RBAC)."""
    users = auth.users if auth is not None else None
    access = users.access if users is not None else None
    if users is None or access is None:
        return None

    async def allowed(verified: Verified) -> bool:
        if verified.user_token is None:
            return False  # a delegation acting for no user: nobody to ask about
        try:
            user = await users.verifier.verify(verified.user_token, users.own_audience)
        except Unauthenticated:
            return False  # a token meant for another agent (a delegation's): not here
        return await access.allowed(user, verb=VERB, subresource=APPROVE_SUBRESOURCE)

    return allowed


def approval_desk(
    settings: AgentSettings,
    store: TaskStore,
    runner: str,
    auth: EdgeAuth | None,
    audit: AuditLog | None,
) -> ApprovalDesk | None:
    """The agent's desk (``None``: it gates no call)."""
    policy = settings.approvals.policy
    if policy is None:
        return None
    return ApprovalDesk(
        store,
        policy,
        runner=runner,
        agent=settings.agent.name,
        approver=rbac_approver(auth),
        audit=audit,
    )


class ApprovalDesk:
    def __init__(
        self,
        store: TaskStore,
        policy: ApprovalPolicy,
        *,
        runner: str,
        agent: str,
        approver: Approver | None = None,
        audit: AuditLog | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.policy = policy
        self.runner = runner
        self.agent = agent
        self.approver = approver
        self.audit = audit
        self.clock = clock
        # Set by the A2A server: resumes a decided run on this replica.
        self.resume: Resume | None = None

    async def hold(self, task_id: str, pause: Paused) -> bool:
        """Pause the task this replica runs: ``input-required`` with its pending calls and
        the checkpoint to resume from; False when another replica holds it now."""
        decide_by = self.clock() + self.policy.timeout_seconds
        data = encode(pause.messages, facts=pause.facts)
        try:
            held = await self.store.pause(
                task_id, self.runner, paused(pause.requests, decide_by), data, decide_by
            )
        except KaosError:
            # The store logged why. Its lease lapses and a replica resumes the run from its
            # last step: the gated call is then reported interrupted, never made.
            log.warning("a paused run could not be stored", extra={"task": task_id})
            return False
        if not held:
            log.warning("a paused run's task is another replica's now", extra={"task": task_id})
        return held

    async def pause_chat(self, prompt: str, deps: RunDeps, pause: Paused) -> str:
        """A chat run that called a gated tool: kept as a paused A2A task (its message the
        chat's prompt), and the answer naming it."""
        message = pb.Message(
            message_id=uuid.uuid4().hex, role=pb.ROLE_USER, parts=[pb.Part(text=prompt)]
        )
        task = run_task(message, deps)
        await self.store.create(task, principal=deps.principal, runner=self.runner)
        await self.hold(task.id, pause)
        calls = [{"tool": c.tool_name} for c in pause.requests.approvals]
        lead = "This answer stops here: the agent's run"
        done = f" Its outcome is A2A task {task.id}'s (GetTask)."
        return waiting_text(calls, task.id, lead=lead) + done

    async def decide(
        self, message: pb.Message, deps: RunDeps, verified: Verified | None
    ) -> tuple[pb.Task, asyncio.Task[None]]:
        """Take the decision ``message`` carries on its task (``message.task_id``) for the
        caller ``deps``; the task as decided and its resumed run."""
        verdict, reason = parse_decision(message)
        found = await self.store.owned(message.task_id)
        if found is None:
            raise RpcError(TASK_NOT_FOUND, f"task {message.task_id!r} not found")
        task, owner = found
        if not await self._may_decide(owner, deps, verified):
            # Nothing changes; the task's content is not shown.
            raise Forbidden(
                "only the run's own user, or a user RBAC allows to create agents/approve on"
                " this Agent, may decide its approval",
                code="approval_not_granted",
            )
        if task.status.state != pb.TASK_STATE_INPUT_REQUIRED:
            state = pb.TaskState.Name(task.status.state)
            raise NotPaused(f"task {task.id!r} is {state}: it waits for no decision")
        decision = Decision(verdict, deps.principal or "anonymous", reason)
        claim = await self._take(task.id, decision, message)
        if claim is None:
            raise NotPaused(f"task {task.id!r} was decided already")
        return claim.task, self._resume(claim, decision)

    async def _may_decide(
        self, owner: str | None, deps: RunDeps, verified: Verified | None
    ) -> bool:
        if owner is not None and owner == deps.principal:
            return True
        derived = verified is not None and verified.derived
        if not derived:
            return visible(owner, deps.principal)  # as GetTask: an anonymous task is anyone's
        return await self.approves_all(verified)

    async def approves_all(self, verified: Verified | None) -> bool:
        """Whether RBAC lets this verified user decide any user's paused run."""
        if self.approver is None or verified is None or not verified.derived:
            return False
        return await self.approver(verified)

    async def _take(
        self, task_id: str, decision: Decision, message: pb.Message | None
    ) -> Claim | None:
        claim = await self.store.take_paused(task_id, self.runner, decided(decision, message))
        if claim is not None:
            await self._audit(claim, decision)
        return claim

    def _resume(self, claim: Claim, decision: Decision) -> asyncio.Task[None]:
        assert self.resume is not None  # set by the A2A server before any request
        return self.resume(claim, results(claim.task, decision))

    async def _audit(self, claim: Claim, decision: Decision) -> None:
        if self.audit is None:
            return
        now = self.clock()
        for call in approval_of(claim.task).get("calls", []):
            await self.audit.append(
                AuditEntry(
                    at=now,
                    kind="approval",
                    name=str(call.get("tool")),
                    outcome=decision.outcome,
                    task=claim.task.id,
                    session=session_of(claim.task),
                    identity=claim.principal,
                    user=claim.principal,
                    decided_by=decision.by,
                )
            )

    async def tick(self) -> None:
        """Decide the paused tasks past their deadline per ``onTimeout`` (the beat's)."""
        verdict = self.policy.on_timeout
        for task_id in await self.store.paused_due(self.clock()):
            decision = Decision(verdict, TIMEOUT, "")
            claim = await self._take(task_id, decision, None)
            if claim is not None:
                log.info("a paused task timed out", extra={"task": task_id, "decision": verdict})
                self._resume(claim, decision)
