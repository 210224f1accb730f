"""ModelAPI: apply LiteLLM (with its ConfigMap) or Ollama; the endpoint and served models
go into status for Agents and MemoryStores to read."""

from __future__ import annotations

from kaos_core.crds import ModelAPI

from kaos_operator.desired import ModelAPIContext, desired_modelapi_objects
from kaos_operator.desired.modelapi import model_api_endpoint
from kaos_operator.queue import Result
from kaos_operator.reconcilers.base import BaseReconciler, deployment_state


class ModelAPIReconciler(BaseReconciler):
    kind = "ModelAPI"

    async def reconcile(self, namespace: str, name: str) -> Result:
        raw = self.ctl.resource("ModelAPI", namespace, name)
        if raw is None or raw["metadata"].get("deletionTimestamp"):
            return Result()
        api = ModelAPI.model_validate(raw)
        status = self.builder(raw)
        status.fields["endpoint"] = model_api_endpoint(api)
        status.fields["models"] = api.spec.served_models()
        desired = desired_modelapi_objects(api, ModelAPIContext(images=self.ctl.settings.images))
        if await self.apply_guarded(raw, api, desired, status):
            self.workload_status(status, deployment_state(self.owned_deployment(api)))
        await self.write_status(raw, status)
        return Result()
