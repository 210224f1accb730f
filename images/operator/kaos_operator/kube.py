"""A small, typed edge over kubernetes-asyncio's ApiClient for dict-shaped objects.

The operator handles every object as the JSON the API server speaks (that is what
server-side apply takes and what the desired-state functions produce), so it talks to
the REST paths directly through ``ApiClient.call_api`` rather than through the generated
per-kind classes. Every request is counted (the benchmark reports the number), and
client errors are wrapped here so that nothing above sees a kubernetes-asyncio type:
``TemporaryError`` (retry later) versus ``PermanentError`` (the request is wrong).
"""

from __future__ import annotations

import json
import logging
import os
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import aiohttp
import yaml
from kaos_core.crds.common import GROUP, VERSION, KindInfo
from kaos_core.tracing import adopt_session
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config
from prometheus_client import CollectorRegistry, Counter

from kaos_operator.desired.common import FIELD_MANAGER

log = logging.getLogger(__name__)

Obj = dict[str, Any]


@dataclass(frozen=True)
class ResourceType:
    """A REST resource: where objects of one kind live."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, sub: str | None = None
    ) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace is not None:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{name}"
        if sub is not None:
            base += f"/{sub}"
        return base

    @classmethod
    def of_kind(cls, info: KindInfo) -> ResourceType:
        return cls(GROUP, VERSION, info.plural, info.kind)


DEPLOYMENTS = ResourceType("apps", "v1", "deployments", "Deployment")
SERVICES = ResourceType("", "v1", "services", "Service")
CONFIGMAPS = ResourceType("", "v1", "configmaps", "ConfigMap")
PVCS = ResourceType("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim")
PDBS = ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
SERVICEACCOUNTS = ResourceType("", "v1", "serviceaccounts", "ServiceAccount")
NETWORKPOLICIES = ResourceType("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy")
HPAS = ResourceType("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler")
CRONJOBS = ResourceType("batch", "v1", "cronjobs", "CronJob")
# Read, never written: the Jobs an Agent's CronJobs start (labelled by the operator's job
# template, so its watch selects them), for the schedules' last result.
JOBS = ResourceType("batch", "v1", "jobs", "Job")
LEASES = ResourceType("coordination.k8s.io", "v1", "leases", "Lease")
EVENTS = ResourceType("", "v1", "events", "Event")
# Read, never written: a resource's pods and its claims' Events say why its Deployment is
# not available (kaos_operator.workload), listed only while it is not.
PODS = ResourceType("", "v1", "pods", "Pod")
NAMESPACES = ResourceType("", "v1", "namespaces", "Namespace", namespaced=False)
CRDS = ResourceType(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)

# Kinds of the objects the operator creates for its resources.
# ServiceAccounts and NetworkPolicies exist only with security on; they are watched either
# way, so switching security off prunes what an earlier secured run created.
OWNED_TYPES: tuple[ResourceType, ...] = (
    DEPLOYMENTS,
    SERVICES,
    CONFIGMAPS,
    PVCS,
    PDBS,
    SERVICEACCOUNTS,
    NETWORKPOLICIES,
    HPAS,
    CRONJOBS,
)
# Made only with Gateway API on (the chart's gatewayAPI.enabled): its CRDs may be absent
# otherwise, and watching a type that does not exist would never sync.
HTTPROUTES = ResourceType("gateway.networking.k8s.io", "v1", "httproutes", "HTTPRoute")
GATEWAY_TYPES: tuple[ResourceType, ...] = (HTTPROUTES,)
# Made only when the cluster serves it (KEDA installed; ``KubeClient.serves``), found once
# when the controller starts: an Agent's spec.autoscaling then makes one, else an HPA.
SCALEDOBJECTS = ResourceType("keda.sh", "v1alpha1", "scaledobjects", "ScaledObject")
_BY_KIND = {(t.api_version, t.kind): t for t in (*OWNED_TYPES, *GATEWAY_TYPES, SCALEDOBJECTS)}


def owned_types(gateway_api: bool, keda: bool = False) -> tuple[ResourceType, ...]:
    """The kinds the operator creates and so watches (and the Jobs its CronJobs start),
    given Gateway API on or off and whether the cluster serves KEDA's ScaledObjects."""
    return (
        *OWNED_TYPES,
        JOBS,
        *(GATEWAY_TYPES if gateway_api else ()),
        *((SCALEDOBJECTS,) if keda else ()),
    )


def type_of(obj: Obj) -> ResourceType:
    """The resource type of a desired object (one of ``OWNED_TYPES``)."""
    return _BY_KIND[(obj["apiVersion"], obj["kind"])]


class ApiError(Exception):
    """The API server refused a request, or could not be reached."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


class TemporaryError(ApiError):
    """Worth retrying: unreachable, overloaded (429), server error, conflict."""


class PermanentError(ApiError):
    """The request itself is wrong (invalid, forbidden): retrying as-is will not help."""


class Gone(ApiError):
    """410: a watch's resourceVersion is too old; list again."""


def _error(status: int, body: str | bytes | None) -> ApiError:
    text = body.decode(errors="replace") if isinstance(body, bytes) else (body or "")
    reason, message = "", text
    try:
        doc = json.loads(text)
        reason, message = str(doc.get("reason", "")), str(doc.get("message", text))
    except (ValueError, AttributeError):
        pass
    if status == 410:
        return Gone(status, reason or "Gone", message)
    if status in (409, 429) or status >= 500 or status == 0:
        return TemporaryError(status, reason, message)
    return PermanentError(status, reason, message)


@dataclass(frozen=True)
class ApiMetrics:
    requests: Counter

    @classmethod
    def create(cls, registry: CollectorRegistry) -> ApiMetrics:
        return cls(
            requests=Counter(
                "kaos_operator_api_requests",
                "Requests made to the Kubernetes API server, by verb and status code.",
                ["verb", "code"],
                registry=registry,
            )
        )


class ClusterConfigError(Exception):
    """No usable way to reach a cluster: no kubeconfig and not in a pod, or a kubeconfig
    that cannot be read. A configuration mistake: the message says what to set."""


IN_CLUSTER_HINT = "set KUBECONFIG to a kubeconfig file, or run the operator in the cluster"


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


async def load_configuration(kubeconfig: str | None = None) -> k8s.Configuration:
    """The client configuration from ``kubeconfig``, else the pod's service account, else
    ``~/.kube/config``; ``ClusterConfigError`` when none of them is usable."""
    configuration = k8s.Configuration()
    if not kubeconfig:
        try:
            k8s_config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration
            )
            return configuration
        except k8s_config.ConfigException as exc:
            kubeconfig = _default_kubeconfig(exc)
    _check_files(kubeconfig)
    try:
        await k8s_config.load_kube_config(
            config_file=kubeconfig, client_configuration=configuration
        )
    except (k8s_config.ConfigException, yaml.YAMLError, OSError, ValueError) as exc:
        raise ClusterConfigError(
            f"cannot use the kubeconfig {kubeconfig}: {_one_line(exc)}; "
            "fix it, or point KUBECONFIG at another one"
        ) from None
    return configuration


def _default_kubeconfig(in_cluster: Exception) -> str:
    """~/.kube/config, when it exists (the operator is not in a pod: ``in_cluster``)."""
    default = Path("~/.kube/config").expanduser()
    if default.exists():
        return str(default)
    not_in_pod = (
        "KUBERNETES_SERVICE_HOST is not set"
        if not os.environ.get("KUBERNETES_SERVICE_HOST")
        else _one_line(in_cluster)
    )
    raise ClusterConfigError(
        f"no cluster to connect to: not running in a pod ({not_in_pod}) and no kubeconfig"
        f" ({default} does not exist); " + IN_CLUSTER_HINT
    )


def _check_files(kubeconfig: str) -> None:
    """Every file of ``kubeconfig`` (a KUBECONFIG list) exists: checked here, as the library
    would log a warning of its own and go on to a vaguer error."""
    missing = [p for p in kubeconfig.split(os.pathsep) if p and not Path(p).expanduser().exists()]
    if missing:
        raise ClusterConfigError(
            f"KUBECONFIG names {', '.join(missing)}, which does not exist; " + IN_CLUSTER_HINT
        )


def environment_proxy(server: str) -> str | None:
    """The proxy ``HTTPS_PROXY``/``HTTP_PROXY`` name for the API server at ``server``,
    unless ``NO_PROXY`` exempts it (what client-go does with the environment)."""
    url = urllib.parse.urlsplit(server)
    if not url.hostname or urllib.request.proxy_bypass(url.hostname):
        return None
    return urllib.request.getproxies_environment().get(url.scheme or "https")


class KubeClient:
    """Requests against one API server; owns its kubernetes-asyncio ApiClient."""

    def __init__(self, api: k8s.ApiClient, metrics: ApiMetrics | None = None) -> None:
        self._api = api
        self._metrics = metrics

    @classmethod
    async def connect(
        cls, kubeconfig: str | None = None, metrics: ApiMetrics | None = None
    ) -> KubeClient:
        """From a kubeconfig file, else the pod's service account, else ~/.kube/config
        (``load_configuration``; ``ClusterConfigError`` when none is usable)."""
        configuration = await load_configuration(kubeconfig)
        # Many watches stay open at once; leave room for the requests beside them.
        configuration.connection_pool_maxsize = 64
        configuration.proxy = configuration.proxy or environment_proxy(configuration.host or "")
        api = k8s.ApiClient(configuration)
        # Our session on the library's pool, so API calls are traced (with its buffer for
        # large watch events). Not trusting the environment: aiohttp would then look in
        # ~/.netrc on every request, in the event loop's default executor, where a backend
        # read's lookup of a name that does not resolve holds a thread for seconds; a few
        # of them stalled every API request. The proxy the environment names is read once,
        # above.
        rest = api.rest_client
        rest.pool_manager = adopt_session(rest.pool_manager, trust_env=False, read_bufsize=2**21)
        return cls(api, metrics)

    async def close(self) -> None:
        await self._api.close()

    def _count(self, verb: str, code: int) -> None:
        if self._metrics is not None:
            self._metrics.requests.labels(verb, str(code)).inc()

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        request_timeout: float = 30.0,
    ) -> Obj:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        try:
            result = await self._api.call_api(
                path,
                method,
                query_params=query or [],
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
                response_types_map={200: "object", 201: "object", 202: "object"},
                _return_http_data_only=True,
                _preload_content=True,
                _request_timeout=request_timeout,
            )
        except k8s.ApiException as exc:
            self._count(method, exc.status or 0)
            raise _error(exc.status or 0, exc.body) from None
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            self._count(method, 0)
            raise TemporaryError(0, type(exc).__name__, str(exc)) from None
        self._count(method, 200)
        return cast(Obj, result or {})

    async def get(self, rt: ResourceType, namespace: str | None, name: str) -> Obj | None:
        try:
            return await self.request("GET", rt.path(namespace, name))
        except PermanentError as exc:
            if exc.status == 404:
                return None
            raise

    async def serves(self, rt: ResourceType) -> bool:
        """Whether the API server serves ``rt`` (its group version lists the resource).
        Raises ``TemporaryError`` when the server cannot say."""
        try:
            doc = await self.request("GET", rt.path().removesuffix(f"/{rt.plural}"))
        except PermanentError as exc:
            if exc.status == 404:
                return False
            raise
        return any(r.get("name") == rt.plural for r in doc.get("resources") or [])

    async def list(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> Obj:
        query = [("labelSelector", label_selector)] if label_selector else []
        if field_selector:
            query.append(("fieldSelector", field_selector))
        return await self.request("GET", rt.path(namespace), query=query)

    async def create(self, rt: ResourceType, namespace: str | None, body: Obj) -> Obj:
        return await self.request("POST", rt.path(namespace), body=body)

    async def replace(self, rt: ResourceType, namespace: str | None, name: str, body: Obj) -> Obj:
        return await self.request("PUT", rt.path(namespace, name), body=body)

    async def delete(self, rt: ResourceType, namespace: str | None, name: str) -> None:
        try:
            await self.request(
                "DELETE",
                rt.path(namespace, name),
                body={"propagationPolicy": "Background"},
            )
        except PermanentError as exc:
            if exc.status != 404:
                raise

    async def apply(
        self, obj: Obj, *, rt: ResourceType | None = None, sub: str | None = None
    ) -> Obj:
        """Server-side apply under the operator's one field manager, taking ownership."""
        rt = rt or type_of(obj)
        meta = obj["metadata"]
        return await self.request(
            "PATCH",
            rt.path(meta.get("namespace"), meta["name"], sub),
            query=[("fieldManager", FIELD_MANAGER), ("force", "true")],
            body=obj,
            # JSON is YAML: the apply content type accepts the dict as it is.
            content_type="application/apply-patch+yaml",
        )

    async def watch(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        resource_version: str,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[Obj]:
        """Events of one watch request, until the server ends it.

        An ERROR event is raised as the error it carries (``Gone`` for 410).
        """
        query = [
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        if label_selector:
            query.append(("labelSelector", label_selector))
        try:
            resp = await self._api.call_api(
                rt.path(namespace),
                "GET",
                query_params=query,
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=aiohttp.ClientTimeout(
                    total=None, sock_connect=10, sock_read=timeout_seconds + 30
                ),
            )
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            self._count("WATCH", 0)
            raise TemporaryError(0, type(exc).__name__, str(exc)) from None
        self._count("WATCH", resp.status)
        try:
            if resp.status != 200:
                raise _error(resp.status, await resp.read())
            while True:
                try:
                    line = await resp.content.readline()
                except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                    raise TemporaryError(0, type(exc).__name__, str(exc)) from None
                if not line:
                    return
                if not line.strip():
                    continue
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    # A watch reports failures (410 Gone above all) as an event.
                    status = event.get("object") or {}
                    raise _error(int(status.get("code", 0)), json.dumps(status))
                yield event
        finally:
            resp.release()
