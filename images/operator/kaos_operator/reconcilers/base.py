"""What every reconciler does the same way: read the deployment's state, apply and prune
the desired objects, and write status (with an Event when the phase changes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kaos_core.crds import reasons
from kaos_core.crds.common import CustomObject

from kaos_operator.apply import apply_all, conflicts, prune
from kaos_operator.kube import DEPLOYMENTS, Obj, PermanentError, ResourceType
from kaos_operator.status import StatusBuilder, status_differs

if TYPE_CHECKING:
    from kaos_operator.controller import Controller


@dataclass(frozen=True)
class DeploymentState:
    exists: bool
    available: bool
    replicas: int
    ready_replicas: int


def deployment_state(dep: Obj | None) -> DeploymentState:
    if dep is None:
        return DeploymentState(False, False, 0, 0)
    status = dep.get("status") or {}
    generation = dep["metadata"].get("generation", 0)
    current = status.get("observedGeneration", 0) >= generation
    available = current and any(
        c.get("type") == "Available" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    return DeploymentState(
        True,
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


class BaseReconciler:
    kind: str

    def __init__(self, ctl: Controller) -> None:
        self.ctl = ctl
        self.rt = ctl.resources[self.kind].rt

    def owned_deployment(self, res: CustomObject) -> Obj | None:
        dep = self.ctl.live(DEPLOYMENTS, res.namespace, res.name)
        if dep is None:
            return None
        refs = dep["metadata"].get("ownerReferences") or []
        return dep if any(r.get("uid") == res.metadata.uid for r in refs) else None

    def builder(self, raw: Obj) -> StatusBuilder:
        return StatusBuilder(raw.get("status"), raw["metadata"].get("generation", 0))

    async def converge(self, res: CustomObject, desired: list[Obj]) -> str | None:
        """Apply ``desired`` and prune the rest; a message when names are taken."""
        taken = conflicts(desired, res.metadata.uid, self.ctl.live)
        if taken:
            return "names already used by another resource: " + ", ".join(taken)
        await apply_all(self.ctl.client, desired, self.ctl.live)
        await prune(self.ctl.client, self.ctl.owned_objects(res.metadata.uid), desired)
        return None

    async def apply_guarded(
        self, raw: Obj, res: CustomObject, desired: list[Obj], status: StatusBuilder
    ) -> bool:
        """``converge``, turning a refusal into status; False when nothing was applied."""
        try:
            conflict = await self.converge(res, desired)
        except PermanentError as exc:
            status.condition(reasons.READY, False, reasons.APPLY_FAILED, exc.message)
            status.fields.update(phase=reasons.PHASE_FAILED, message=exc.message)
            await self.write_status(raw, status)
            raise
        if conflict is not None:
            status.condition(reasons.READY, False, reasons.NAME_CONFLICT, conflict)
            status.fields.update(phase=reasons.PHASE_FAILED, message=conflict)
            return False
        return True

    def workload_status(self, status: StatusBuilder, dep: DeploymentState) -> None:
        if dep.available:
            status.condition(reasons.READY, True, reasons.AVAILABLE, "deployment available")
            status.fields["phase"] = reasons.PHASE_READY
        else:
            status.condition(
                reasons.READY, False, reasons.DEPLOYMENT_PROGRESSING, "waiting for the deployment"
            )
            status.fields["phase"] = reasons.PHASE_PENDING

    async def write_status(self, raw: Obj, status: StatusBuilder) -> None:
        new = status.build()
        old = raw.get("status") or {}
        if not status_differs(old, new):
            return
        meta = raw["metadata"]
        body: dict[str, Any] = {
            "apiVersion": raw["apiVersion"],
            "kind": raw["kind"],
            "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
            "status": new,
        }
        await self.ctl.client.apply(body, rt=self.rt, sub="status")
        phase = new.get("phase")
        if phase and phase != old.get("phase"):
            ready = next((c for c in new["conditions"] if c["type"] == reasons.READY), None)
            reason = ready["reason"] if ready else phase
            message = new.get("message") or (ready or {}).get("message", "") or phase
            kind = "Warning" if phase == reasons.PHASE_FAILED else "Normal"
            await self.ctl.recorder.record(raw, kind, reason, f"{phase}: {message}")


def resource_type(ctl: Controller, kind: str) -> ResourceType:
    return ctl.resources[kind].rt
