"""ModelAPI: apply LiteLLM (with its ConfigMap) or Ollama (with its model store); the
endpoint, the served models and, once it is available, what they can do (read from the
backend) go into status for Agents and MemoryStores to read."""

from __future__ import annotations

import logging
from dataclasses import replace

from kaos_core.crds import Agent, MemoryStore, ModelAPI, reasons

from kaos_operator.capabilities import CapabilityReader, read_capabilities
from kaos_operator.context import ReconcileContext, WorkloadReader
from kaos_operator.desired import ModelAPIContext, desired_modelapi_objects, security
from kaos_operator.desired.modelapi import model_api_endpoint
from kaos_operator.reconcilers.base import DeploymentState, Reconciler
from kaos_operator.reconcilers.reads import BackendReads, ReadFailure, ReadPending, report_reading
from kaos_operator.status import Clock, StatusBuilder, utc_now

log = logging.getLogger(__name__)

CAPABILITIES_FIELD = "modelCapabilities"


class ModelAPIReconciler(Reconciler[ModelAPI]):
    model = ModelAPI

    def __init__(
        self,
        ctx: ReconcileContext,
        *,
        clock: Clock = utc_now,
        capability_reader: CapabilityReader = read_capabilities,
        workload_reader: WorkloadReader | None = None,
    ) -> None:
        super().__init__(ctx, clock=clock, workload_reader=workload_reader)
        self._read_capabilities = capability_reader
        # What a model can do changes only with the spec (or the image): one read per generation.
        self._capabilities: BackendReads[dict[str, list[str]]] = self.backend_reads()

    async def sync(self, res: ModelAPI, status: StatusBuilder) -> None:
        endpoint = model_api_endpoint(res)
        status.fields["endpoint"] = endpoint
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
            dep = await self.workload_status(
                res,
                status,
                self.owned_deployment(res),
                storage_field="spec.serverConfig.storage.storageClassName",
            )
            self.route_status(res, res.spec.gateway_route, status)
            self._pull_status(res, dep, status)
            await self._capability_status(res, endpoint, dep, status)

    def _pull_status(self, res: ModelAPI, dep: DeploymentState, status: StatusBuilder) -> None:
        server = res.spec.server_config
        if server is None:
            return
        # The pod is Ready only once the model is in its store and answered a load (its
        # readiness probe needs the mark the pod's script writes then), so an available
        # Deployment with a ready pod means pulled and answering.
        model, source = server.model, server.pull_source()
        origin = "" if source == model else f" from {source}"
        if dep.available and dep.ready_replicas > 0:
            status.condition(
                reasons.MODEL_PULLED, True, reasons.PULLED, f"{model} pulled{origin} and answering"
            )
        elif res.spec.replicas == 0:
            status.condition(
                reasons.MODEL_PULLED, False, reasons.PULLING, f"{model}: no pod (replicas 0)"
            )
        else:
            status.condition(
                reasons.MODEL_PULLED,
                False,
                reasons.PULLING,
                f"waiting for the pod to pull {model}{origin} (first start only) and load it",
            )

    async def _capability_status(
        self, res: ModelAPI, endpoint: str, dep: DeploymentState, status: StatusBuilder
    ) -> None:
        """``status.modelCapabilities`` read once the backend serves; the last known value
        is kept while it does not (a rollout, a failed read), so a bound Agent's warning
        does not come and go with restarts."""
        known = res.status.model_capabilities
        if not (dep.available and dep.ready_replicas > 0):
            if known:
                status.fields[CAPABILITIES_FIELD] = dict(known)
            status.condition(
                reasons.CAPABILITIES_READ,
                "Unknown",
                reasons.WAITING_FOR_DEPLOYMENT,
                "read from the backend once the Deployment is available",
            )
            return
        capabilities = self._capabilities.read(
            res,
            lambda: self._read_capabilities(endpoint, res.spec.mode, res.spec.served_models()),
        )
        if isinstance(capabilities, ReadPending):
            if known:
                status.fields[CAPABILITIES_FIELD] = dict(known)
            report_reading(
                status,
                reasons.CAPABILITIES_READ,
                res.status.condition(reasons.CAPABILITIES_READ),
                failed=reasons.CAPABILITY_READ_FAILED,
                reading=reasons.CAPABILITIES_READING,
                message=f"reading capabilities at {endpoint}",
            )
            return
        if isinstance(capabilities, ReadFailure):
            # The class only: a transport error's text can carry the backend's answer.
            cause = type(capabilities.error).__name__
            # A Service answers some time after its pod turns Ready (kube-proxy's rules
            # follow the endpoint): read again, sooner at first, without waiting for an
            # event that may never come.
            delay = capabilities.delay
            log.info(
                "capabilities not read",
                extra={"api": res.name, "error": cause, "retry_in_s": delay},
            )
            status.condition(
                reasons.CAPABILITIES_READ,
                False,
                reasons.CAPABILITY_READ_FAILED,
                f"reading capabilities at {endpoint} failed ({cause}); retrying",
            )
            status.recheck(delay)
            if known:
                status.fields[CAPABILITIES_FIELD] = dict(known)
            return
        status.fields[CAPABILITIES_FIELD] = capabilities
        status.condition(
            reasons.CAPABILITIES_READ,
            True,
            reasons.CAPABILITIES_REPORTED,
            f"capabilities of {len(capabilities)} of {len(res.spec.served_models())} served "
            "models read from the backend",
        )
