"""MemoryStore: resolve the model bindings, apply the service's objects, report Ready
when its Deployment is available."""

from __future__ import annotations

from kaos_core.crds import MemoryStore, ModelAPI, reasons

from kaos_operator.desired import MemoryStoreContext, desired_memorystore_objects
from kaos_operator.desired.memorystore import memory_store_endpoint
from kaos_operator.desired.modelapi import model_api_endpoint
from kaos_operator.queue import Result
from kaos_operator.reconcilers.base import BaseReconciler, deployment_state


class MemoryStoreReconciler(BaseReconciler):
    kind = "MemoryStore"

    async def reconcile(self, namespace: str, name: str) -> Result:
        raw = self.ctl.resource("MemoryStore", namespace, name)
        if raw is None or raw["metadata"].get("deletionTimestamp"):
            return Result()
        store = MemoryStore.model_validate(raw)
        spec = store.spec
        status = self.builder(raw)
        status.fields["endpoint"] = memory_store_endpoint(namespace, name)
        status.fields["replicas"] = spec.effective_replicas()

        roles = spec.models
        api_raw = self.ctl.resource("ModelAPI", namespace, roles.summarization.model_api)
        if api_raw is None:
            message = f"ModelAPI {roles.summarization.model_api} not found"
            status.condition(reasons.READY, False, reasons.MODEL_API_NOT_FOUND, message)
            status.fields.update(phase=reasons.PHASE_WAITING, message=message)
            await self.write_status(raw, status)
            return Result()
        # A model outage does not make the store unready (recall degrades, writes queue),
        # so the ModelAPI only has to exist, not to be Ready.
        api = ModelAPI.model_validate(api_raw)
        served = api.status.models or api.spec.served_models()
        default_model = served[0] if served else ""
        ctx = MemoryStoreContext(
            images=self.ctl.settings.images,
            posture=self.ctl.settings.posture,
            model_api_url=api.status.endpoint or model_api_endpoint(api),
            summarization_model=roles.summarization.model or default_model,
            embedding_model=roles.embedding.model or default_model,
        )
        desired = desired_memorystore_objects(store, ctx)
        if await self.apply_guarded(raw, store, desired, status):
            dep = deployment_state(self.owned_deployment(store))
            status.fields["readyReplicas"] = dep.ready_replicas
            self.workload_status(status, dep)
        await self.write_status(raw, status)
        return Result()
