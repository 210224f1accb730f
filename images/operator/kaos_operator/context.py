"""What a reconciler may ask of the operator: the narrow side of the controller.

Reconcilers read the caches, apply and prune their objects, write status and record
Events only through ``ReconcileContext``, and read pods and Events (to say why a
Deployment is not available) only through ``WorkloadReader``. The controller implements
both over informers and the API client; unit tests implement them over plain
dictionaries, so a reconciler is exercised without a cluster and without importing the
controller.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from kaos_operator.kube import Obj, ResourceType
from kaos_operator.settings import ReconcileSettings


class ReconcileContext(Protocol):
    @property
    def settings(self) -> ReconcileSettings:
        """Images and posture, the only settings a reconciler reads."""
        ...

    def resource(self, kind: str, namespace: str, name: str) -> Obj | None:
        """A KAOS resource from the cache (``kind`` is its CRD kind)."""
        ...

    def resources_in(self, kind: str, namespace: str) -> list[Obj]:
        """Every cached KAOS resource of ``kind`` in ``namespace`` (security on: who
        refers to a resource decides its callers file and NetworkPolicy)."""
        ...

    def live(self, rt: ResourceType, namespace: str, name: str) -> Obj | None:
        """An object of an owned type (Deployment, Service...) from the cache."""
        ...

    async def apply(self, owner_uid: str, desired: Sequence[Obj]) -> None:
        """Server-side apply what changed in ``desired``; delete what the owner has
        but no longer wants. Raises ``TemporaryError`` or ``PermanentError``."""
        ...

    async def write_status(self, rt: ResourceType, obj: Obj, status: Obj) -> None:
        """Apply ``status`` through the status subresource of ``obj``."""
        ...

    async def record_event(self, obj: Obj, type_: str, reason: str, message: str) -> None:
        """A Kubernetes Event on ``obj``, best effort (never raises)."""
        ...

    def requeue(self, kind: str, namespace: str, name: str) -> None:
        """Reconcile the KAOS resource again (what it waited on beside the queue is done)."""
        ...


class WorkloadReader(Protocol):
    """Reads a reconciler makes only while a Deployment is not available, to say why
    (``kaos_operator.workload``). Both raise ``ApiError``; the caller reports the generic
    state when they do."""

    async def pods(self, namespace: str, selector: str) -> list[Obj]:
        """The pods in ``namespace`` matching the label ``selector``."""
        ...

    async def events_about(self, namespace: str, kind: str, name: str) -> list[Obj]:
        """The Events in ``namespace`` about the object ``kind``/``name``."""
        ...
