"""MemoryStore: resolve the model bindings, apply the service's objects, report Ready
when its Deployment is available, and then the key it signs erasure receipts with."""

from __future__ import annotations

import logging

from kaos_core.crds import Agent, MemoryStore, ModelAPI, reasons

from kaos_operator.context import ReconcileContext, WorkloadReader
from kaos_operator.desired import MemoryStoreContext, desired_memorystore_objects, security
from kaos_operator.desired.memorystore import memory_store_endpoint
from kaos_operator.desired.modelapi import model_api_endpoint
from kaos_operator.receipt_key import ReceiptKeyReader
from kaos_operator.reconcilers.base import Reconciler
from kaos_operator.reconcilers.reads import BackendReads, ReadFailure, ReadPending
from kaos_operator.status import Clock, StatusBuilder, utc_now

log = logging.getLogger(__name__)


class MemoryStoreReconciler(Reconciler[MemoryStore]):
    model = MemoryStore

    def __init__(
        self,
        ctx: ReconcileContext,
        *,
        clock: Clock = utc_now,
        workload_reader: WorkloadReader | None = None,
        receipt_key_reader: ReceiptKeyReader | None = None,
    ) -> None:
        """``receipt_key_reader``: reads the store's receipt key from its Service once it is
        available (``kaos_operator.receipt_key``); without one the status has no key."""
        super().__init__(ctx, clock=clock, workload_reader=workload_reader)
        self._read_key = receipt_key_reader
        self._keys: BackendReads[dict[str, str]] = self.backend_reads()

    async def sync(self, res: MemoryStore, status: StatusBuilder) -> None:
        spec = res.spec
        status.fields["endpoint"] = memory_store_endpoint(res.namespace, res.name)
        status.fields["replicas"] = spec.effective_replicas()

        roles = spec.models
        # Each role may name its own ModelAPI (e.g. local embeddings, a hosted LLM).
        apis: dict[str, ModelAPI] = {}
        for name in dict.fromkeys((roles.summarization.model_api, roles.embedding.model_api)):
            api_raw = self.ctx.resource("ModelAPI", res.namespace, name)
            if api_raw is None:
                message = f"ModelAPI {name} not found"
                status.condition(reasons.READY, False, reasons.MODEL_API_NOT_FOUND, message)
                status.fields.update(phase=reasons.PHASE_WAITING, message=message)
                return
            # A model outage does not make the store unready (recall degrades, writes
            # queue), so the ModelAPI only has to exist, not to be Ready.
            apis[name] = ModelAPI.model_validate(api_raw)
        summarizer = apis[roles.summarization.model_api]
        embedder = apis[roles.embedding.model_api]
        settings, ns = self.ctx.settings, res.namespace
        ctx = MemoryStoreContext(
            images=settings.images,
            posture=settings.posture,
            model_api_url=summarizer.status.endpoint or model_api_endpoint(summarizer),
            embedding_model_api_url=embedder.status.endpoint or model_api_endpoint(embedder),
            summarization_model=roles.summarization.model or _default_model(summarizer),
            embedding_model=roles.embedding.model or _default_model(embedder),
            callers=tuple(security.agents_bound_to(res.name, self.valid_resources(Agent, ns)))
            if settings.posture.security_enabled
            else (),
            telemetry=settings.telemetry,
        )
        if await self.converge(res, desired_memorystore_objects(res, ctx), status):
            dep = await self.workload_status(
                res,
                status,
                self.owned_deployment(res),
                storage_field="spec.storage.storageClassName",
            )
            status.fields["readyReplicas"] = dep.ready_replicas
            if dep.available:
                await self._receipt_key(res, status)

    async def _receipt_key(self, res: MemoryStore, status: StatusBuilder) -> None:
        if self._read_key is None:
            return
        read, endpoint = self._read_key, status.fields["endpoint"]
        key = self._keys.read(res, lambda: read(endpoint))
        if isinstance(key, ReadPending):
            if res.status.receipt_key is not None:
                status.fields["receiptKey"] = res.status.receipt_key.model_dump()
            return
        if isinstance(key, ReadFailure):
            # The class only; read again later (a Service answers a while after its pod
            # turns Ready), keeping the key last read.
            log.info(
                "receipt key not read",
                extra={"store": res.name, "error": type(key.error).__name__},
            )
            status.recheck(key.delay)
            if res.status.receipt_key is not None:
                status.fields["receiptKey"] = res.status.receipt_key.model_dump()
            return
        status.fields["receiptKey"] = key


def _default_model(api: ModelAPI) -> str:
    """The ModelAPI's first served model: the role's model when it names none."""
    served = api.status.models or api.spec.served_models()
    return served[0] if served else ""
