"""The one template every kind's reconciler follows (the shape of trust-manager's).

Load the resource from the cache, validate it, let the kind compute and apply its
desired objects (``sync``), then write status exactly once, on every path:

- success: whatever ``sync`` put into the status;
- temporary error (``TemporaryError``, or a bug): the previous status with a message
  saying the operator is retrying; the error is re-raised so the queue retries with
  backoff;
- permanent error (``PermanentError``, the API server refused the objects): Ready=False
  with reason ``ApplyFailed`` and the server's message; not retried until the resource
  or what it depends on changes what would be applied;
- invalid object (does not match the model): Ready=False with reason ``InvalidSpec``
  naming the field; not retried, since nothing but a new generation can fix it.

A kind's reconciler only says what its resource needs; everything it touches goes
through ``ReconcileContext``.
"""

from __future__ import annotations

import enum
import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar, cast

from kaos_core.crds import reasons
from kaos_core.crds.common import CustomObject
from kaos_core.crds.gateway import GatewayRoute
from pydantic import ValidationError

from kaos_operator.apply import conflicts, desired_hash
from kaos_operator.context import ReconcileContext, WorkloadReader
from kaos_operator.desired.gateway import route_path
from kaos_operator.desired.overrides import SpecRefused
from kaos_operator.kube import DEPLOYMENTS, PVCS, ApiError, Obj, PermanentError, ResourceType
from kaos_operator.reconcilers.reads import BackendReads
from kaos_operator.status import Clock, StatusBuilder, retrying_status, status_differs, utc_now
from kaos_operator.workload import (
    WorkloadProblem,
    claims_of,
    diagnose,
    diagnosis_due,
    pending_claims,
    pod_selector,
)

log = logging.getLogger(__name__)

R = TypeVar("R", bound=CustomObject)
M = TypeVar("M", bound=CustomObject)


class Outcome(enum.StrEnum):
    """How a reconcile ended without asking for a retry (the metric's ``result``)."""

    OK = "ok"
    GONE = "gone"
    PERMANENT = "permanent"
    INVALID = "invalid"


@dataclass(frozen=True)
class DeploymentState:
    available: bool
    replicas: int
    ready_replicas: int


def deployment_state(dep: Obj | None) -> DeploymentState:
    if dep is None:
        return DeploymentState(False, 0, 0)
    status = dep.get("status") or {}
    generation = dep["metadata"].get("generation", 0)
    current = status.get("observedGeneration", 0) >= generation
    available = current and any(
        c.get("type") == "Available" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    return DeploymentState(
        available,
        int(dep.get("spec", {}).get("replicas", 0)),
        int(status.get("readyReplicas", 0) or 0),
    )


def is_ready(obj: Obj | None) -> bool:
    """A KAOS resource whose Ready condition is True."""
    if obj is None:
        return False
    return any(
        c.get("type") == reasons.READY and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def invalid_message(exc: ValidationError) -> str:
    """Which field is wrong and how, from pydantic's structured errors (no input values)."""
    parts = []
    for err in exc.errors(include_url=False, include_input=False)[:3]:
        where = ".".join(str(p) for p in err["loc"]) or "object"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


# A Deployment that is not available is looked at again after 5, 10, 20 ... seconds, at
# most a minute apart: its pods change state (pulling, crashing, running) without a
# change of the Deployment that would queue the resource.
WORKLOAD_RECHECK_BASE = 5.0
WORKLOAD_RECHECK_MAX = 60.0


def workload_recheck_delay(checks: int) -> float:
    """The wait before the next look at a Deployment not available ``checks`` times in a row."""
    return float(min(WORKLOAD_RECHECK_BASE * 2 ** max(checks - 1, 0), WORKLOAD_RECHECK_MAX))


def retry_message(exc: BaseException) -> str:
    """A status message for a temporary error: the API's status and reason, no text of ours."""
    if isinstance(exc, ApiError) and exc.status:
        return f"the API server answered {exc.status} {exc.reason}".rstrip() + "; retrying"
    if isinstance(exc, ApiError):
        return "the API server could not be reached; retrying"
    return "reconcile failed (see the operator's log); retrying"


class Reconciler(ABC, Generic[R]):
    """One kind's reconciler; subclasses set ``model`` and implement ``sync``."""

    model: ClassVar[type[CustomObject]]

    def __init__(
        self,
        ctx: ReconcileContext,
        *,
        clock: Clock = utc_now,
        workload_reader: WorkloadReader | None = None,
    ) -> None:
        """``workload_reader``: reads pods and Events to say why a Deployment is not
        available; without one the status says only that it is progressing."""
        self.ctx = ctx
        self.rt = ResourceType.of_kind(self.model.info)
        self._clock = clock
        self._workload_reader = workload_reader
        # (namespace, name) -> looks in a row at its Deployment not being available.
        self._unavailable: dict[tuple[str, str], int] = {}
        # (namespace, name) -> ((uid, generation) of the Deployment, when its pods were
        # read, what they said): reused until the next read is due (``diagnosis_due``).
        self._diagnosed: dict[
            tuple[str, str], tuple[tuple[str, int], float, WorkloadProblem | None]
        ] = {}
        # (namespace, name) -> (uid, generation, hash of desired objects) of the last
        # apply the API server refused, with its error: the same apply is not sent again.
        self._refused: dict[tuple[str, str], tuple[tuple[str, int, str], PermanentError]] = {}
        # (namespace, name) -> seconds: reconcile again after that long (StatusBuilder.recheck).
        self._rechecks: dict[tuple[str, str], float] = {}
        # What ``backend_reads`` made: closed with the reconciler.
        self._backend_reads: list[BackendReads[Any]] = []

    @property
    def kind(self) -> str:
        return self.model.info.kind

    def seconds(self) -> float:
        """The reconciler's clock as seconds (when a failed backend read may be retried)."""
        return self._clock().timestamp()

    def wake(self, res: CustomObject) -> None:
        """Queue ``res`` again: a read of its backend (``reads``) has ended."""
        self.ctx.requeue(self.kind, res.namespace, res.name)

    def backend_reads(self) -> BackendReads[Any]:
        """Reads of this kind's backends beside the queue (``reads``): each wakes its
        resource when it ends, on this reconciler's clock; closed with the reconciler."""
        reads: BackendReads[Any] = BackendReads(self.wake, clock=self.seconds)
        self._backend_reads.append(reads)
        return reads

    async def close(self) -> None:
        """Stop what runs beside the queue (the operator is stopping)."""
        for reads in self._backend_reads:
            await reads.close()

    @abstractmethod
    async def sync(self, res: R, status: StatusBuilder) -> None:
        """Resolve dependencies, apply the desired objects (``converge``), fill ``status``."""

    async def reconcile(self, namespace: str, name: str) -> Outcome:
        raw = self.ctx.resource(self.kind, namespace, name)
        if raw is None or raw["metadata"].get("deletionTimestamp"):
            # Owner references let the garbage collector delete what the resource owned.
            self._refused.pop((namespace, name), None)
            self._unavailable.pop((namespace, name), None)
            self._diagnosed.pop((namespace, name), None)
            return Outcome.GONE
        status = StatusBuilder(raw.get("status"), raw["metadata"].get("generation", 0), self._clock)
        outcome = Outcome.OK
        retry: Exception | None = None
        try:
            res = self.model.model_validate(raw)
        except ValidationError as exc:
            message = invalid_message(exc)
            log.warning(
                "object does not match its model", extra={"key": _key(raw), "error": message}
            )
            status.condition(reasons.READY, False, reasons.INVALID_SPEC, message)
            status.fields.update(phase=reasons.PHASE_FAILED, message=message)
            outcome = Outcome.INVALID
        else:
            try:
                await self.sync(cast(R, res), status)
            except SpecRefused as exc:
                # Nothing applied: what runs keeps running as it was.
                status.condition(reasons.READY, False, exc.reason, exc.message)
                status.fields.update(phase=reasons.PHASE_FAILED, message=exc.message)
                outcome = Outcome.INVALID
            except PermanentError as exc:
                status.condition(reasons.READY, False, reasons.APPLY_FAILED, exc.message)
                status.fields.update(phase=reasons.PHASE_FAILED, message=exc.message)
                outcome = Outcome.PERMANENT
            except ApiError as exc:
                retry = exc  # temporary: re-raised below, after the status
            except Exception as exc:
                # A bug, not the cluster: keep its traceback (the queue logs only its text).
                log.error("reconcile failed", extra={"key": _key(raw)}, exc_info=True)
                retry = exc
        new = (
            status.build()
            if retry is None
            else retrying_status(raw.get("status"), retry_message(retry))
        )
        try:
            await self._write_status(raw, new)
        except ApiError as exc:
            if retry is None:
                raise
            log.warning("status not written", extra={"key": _key(raw), "error": str(exc)})
        if retry is not None:
            raise retry
        if status.recheck_in is not None:
            self._rechecks[(namespace, name)] = status.recheck_in
        return outcome

    def take_recheck(self, namespace: str, name: str) -> float | None:
        """The delay the last reconcile of this object asked for, once."""
        return self._rechecks.pop((namespace, name), None)

    # -- what kinds share ---------------------------------------------------------------

    def valid_resources(self, model: type[M], namespace: str) -> list[M]:
        """The resources of ``model``'s kind in ``namespace`` that match the model (an
        invalid one refers to nothing until it is fixed, and reports that itself)."""
        out = []
        for raw in self.ctx.resources_in(model.info.kind, namespace):
            try:
                out.append(model.model_validate(raw))
            except ValidationError:
                continue
        return out

    def owned_deployment(self, res: CustomObject) -> Obj | None:
        dep = self.ctx.live(DEPLOYMENTS, res.namespace, res.name)
        if dep is None:
            return None
        refs = dep["metadata"].get("ownerReferences") or []
        return dep if any(r.get("uid") == res.metadata.uid for r in refs) else None

    async def converge(self, res: CustomObject, desired: list[Obj], status: StatusBuilder) -> bool:
        """Apply ``desired`` and prune the rest; False (with the status saying why) when
        another resource holds one of the names, so nothing was applied.

        Raises ``PermanentError`` when the API server refuses the objects; the same
        objects for the same generation are then refused again here without a request.
        """
        taken = conflicts(desired, res.metadata.uid, self.ctx.live)
        if taken:
            message = "names already used by another resource: " + ", ".join(taken)
            status.condition(reasons.READY, False, reasons.NAME_CONFLICT, message)
            status.fields.update(phase=reasons.PHASE_FAILED, message=message)
            return False
        key = (res.namespace, res.name)
        attempt = (res.metadata.uid, res.metadata.generation, desired_hash({"items": desired}))
        refused = self._refused.get(key)
        if refused is not None and refused[0] == attempt:
            raise refused[1]
        try:
            await self.ctx.apply(res.metadata.uid, desired)
        except PermanentError as exc:
            self._refused[key] = (attempt, exc)
            raise
        self._refused.pop(key, None)
        return True

    async def workload_status(
        self,
        res: CustomObject,
        status: StatusBuilder,
        live: Obj | None,
        *,
        storage_field: str | None = None,
    ) -> DeploymentState:
        """Ready from the owned Deployment ``live``; while it is not available, why not
        (``kaos_operator.workload``): a stuck cause fails the phase. ``storage_field``
        names where the spec sets the storage class of the Deployment's claim."""
        dep = deployment_state(live)
        key = (res.namespace, res.name)
        if dep.available:
            self._unavailable.pop(key, None)
            self._diagnosed.pop(key, None)
            status.condition(reasons.READY, True, reasons.AVAILABLE, "deployment available")
            status.fields["phase"] = reasons.PHASE_READY
            return dep
        problem = await self._workload_problem(res, live, storage_field)
        if problem is None:
            status.condition(
                reasons.READY, False, reasons.DEPLOYMENT_PROGRESSING, "waiting for the deployment"
            )
            status.fields["phase"] = reasons.PHASE_PENDING
        else:
            status.condition(reasons.READY, False, problem.reason, problem.message)
            phase = reasons.PHASE_FAILED if problem.stuck else reasons.PHASE_PENDING
            status.fields.update(phase=phase, message=problem.message)
        if self._workload_reader is not None and live is not None:
            checks = self._unavailable.get(key, 0) + 1
            self._unavailable[key] = checks
            status.recheck(workload_recheck_delay(checks))
        return dep

    async def _workload_problem(
        self, res: CustomObject, live: Obj | None, storage_field: str | None
    ) -> WorkloadProblem | None:
        """What the Deployment's pods, claims and the claims' Events say (None: nothing
        specific, or they could not be read)."""
        reader = self._workload_reader
        selector = pod_selector(live) if live is not None else None
        if reader is None or live is None or selector is None:
            return None
        key = (res.namespace, res.name)
        meta = live["metadata"]
        version = (str(meta.get("uid", "")), int(meta.get("generation") or 1))
        now = self._clock().timestamp()
        last = self._diagnosed.get(key)
        if last is not None and last[0] != version:
            last = None
        if not diagnosis_due(live, last[1] if last else None, now, WORKLOAD_RECHECK_BASE):
            return last[2] if last else None
        problem = await self._read_workload(res, live, selector, storage_field)
        self._diagnosed[key] = (version, now, problem)
        return problem

    async def _read_workload(
        self, res: CustomObject, live: Obj, selector: str, storage_field: str | None
    ) -> WorkloadProblem | None:
        reader = self._workload_reader
        assert reader is not None
        claims = {name: self.ctx.live(PVCS, res.namespace, name) for name in claims_of(live)}
        try:
            pods = await reader.pods(res.namespace, selector)
            events = {
                name: await reader.events_about(res.namespace, "PersistentVolumeClaim", name)
                for name in pending_claims(claims)
            }
        except ApiError as exc:
            # Without the rights (an older chart's RBAC) or the API server: the generic
            # state, never a failed reconcile.
            log.info(
                "pods not read",
                extra={"key": f"{res.namespace}/{res.name}", "status": exc.status},
            )
            return None
        return diagnose(live, pods, claims, events, storage_field=storage_field)

    def route_status(
        self, res: CustomObject, route: GatewayRoute | None, status: StatusBuilder
    ) -> None:
        """Condition Routed when the resource asks for a route: made, or why not."""
        if route is None:
            return
        gateway = self.ctx.settings.gateway
        if gateway is None:
            status.condition(
                reasons.ROUTED,
                False,
                reasons.GATEWAY_API_DISABLED,
                "spec.gatewayRoute needs the operator's Gateway API (chart: gatewayAPI.enabled)",
            )
            return
        where = f"{gateway.namespace or res.namespace}/{gateway.name}"
        status.condition(
            reasons.ROUTED,
            True,
            reasons.ROUTE_APPLIED,
            f"HTTPRoute {res.name} on Gateway {where}, path prefix {route_path(res, route)}",
        )

    async def _write_status(self, raw: Obj, new: dict[str, Any]) -> None:
        """The one place status is written: skipped when unchanged, an Event on a new phase."""
        old = raw.get("status") or {}
        if not status_differs(old, new):
            return
        await self.ctx.write_status(self.rt, raw, new)
        phase = new.get("phase")
        ready = next((c for c in new.get("conditions") or [] if c["type"] == reasons.READY), None)
        old_ready = next(
            (c for c in old.get("conditions") or [] if c.get("type") == reasons.READY), None
        )
        # An Event on a new phase, and on a new reason to fail (a second refusal).
        new_failure = phase == reasons.PHASE_FAILED and (ready or {}).get("reason") != (
            old_ready or {}
        ).get("reason")
        if phase and (phase != old.get("phase") or new_failure):
            reason = ready["reason"] if ready else phase
            message = new.get("message") or (ready or {}).get("message", "") or phase
            kind = "Warning" if phase == reasons.PHASE_FAILED else "Normal"
            await self.ctx.record_event(raw, kind, reason, f"{phase}: {message}")


def _key(raw: Obj) -> str:
    meta = raw["metadata"]
    return f"{raw.get('kind')}/{meta.get('namespace', '')}/{meta['name']}"
