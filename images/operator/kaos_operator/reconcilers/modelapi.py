"""ModelAPI: apply LiteLLM (with its ConfigMap) or Ollama; the endpoint and served models
go into status for Agents and MemoryStores to read."""

from __future__ import annotations

from kaos_core.crds import ModelAPI

from kaos_operator.desired import ModelAPIContext, desired_modelapi_objects
from kaos_operator.desired.modelapi import model_api_endpoint
from kaos_operator.reconcilers.base import Reconciler, deployment_state
from kaos_operator.status import StatusBuilder


class ModelAPIReconciler(Reconciler[ModelAPI]):
    model = ModelAPI

    async def sync(self, res: ModelAPI, status: StatusBuilder) -> None:
        status.fields["endpoint"] = model_api_endpoint(res)
        status.fields["models"] = res.spec.served_models()
        ctx = ModelAPIContext(images=self.ctx.settings.images)
        if await self.converge(res, desired_modelapi_objects(res, ctx), status):
            self.workload_status(status, deployment_state(self.owned_deployment(res)))
