"""ModelAPI: apply LiteLLM (with its ConfigMap) or Ollama; the endpoint and served models
go into status for Agents and MemoryStores to read."""

from __future__ import annotations

from dataclasses import replace

from kaos_core.crds import Agent, MemoryStore, ModelAPI, reasons

from kaos_operator.desired import ModelAPIContext, desired_modelapi_objects, security
from kaos_operator.desired.modelapi import model_api_endpoint
from kaos_operator.reconcilers.base import Reconciler, deployment_state
from kaos_operator.status import StatusBuilder


class ModelAPIReconciler(Reconciler[ModelAPI]):
    model = ModelAPI

    async def sync(self, res: ModelAPI, status: StatusBuilder) -> None:
        status.fields["endpoint"] = model_api_endpoint(res)
        status.fields["models"] = res.spec.served_models()
        settings, ns = self.ctx.settings, res.namespace
        ctx = ModelAPIContext(
            images=settings.images,
            posture=settings.posture,
            telemetry=settings.telemetry,
            gateway=settings.gateway,
        )
        if settings.posture.security_enabled:
            agents = self.valid_resources(Agent, ns)
            stores = self.valid_resources(MemoryStore, ns)
            ctx = replace(
                ctx,
                agent_clients=tuple(security.agents_using_model_api(res.name, agents)),
                store_clients=tuple(security.stores_using_model_api(res.name, stores)),
            )
        if await self.converge(res, desired_modelapi_objects(res, ctx), status):
            dep = deployment_state(self.owned_deployment(res))
            self.workload_status(status, dep)
            self.route_status(res, res.spec.gateway_route, status)
            if res.spec.server_config is not None:
                # The pod is Ready only once its model is pulled (its readiness probe runs
                # ollama show), so an available Deployment means the pull is done.
                model = res.spec.server_config.model
                if dep.available:
                    status.condition(reasons.MODEL_PULLED, True, reasons.PULLED, f"{model} pulled")
                else:
                    status.condition(
                        reasons.MODEL_PULLED,
                        False,
                        reasons.PULLING,
                        f"pulling {model} on first start",
                    )
