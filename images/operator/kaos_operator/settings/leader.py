"""Lease-based leader election: one operator replica reconciles, the others stand by."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import yaml
from kaos_core.settings import SettingsGroup, setting
from kubernetes_asyncio.config import ConfigException
from kubernetes_asyncio.config.kube_config import list_kube_config_contexts

log = logging.getLogger(__name__)

# Mounted into every pod with a service account: the pod's own namespace.
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


@dataclass(frozen=True)
class LeaderSettings:
    """What the elector runs with: the Lease, this replica's identity, the timings."""

    enabled: bool
    namespace: str
    lease_name: str
    identity: str
    lease_duration: float
    renew_deadline: float
    retry_period: float


class LeaderElection(SettingsGroup):
    """The Lease and its timings (client-go's defaults, scaled by the same ratios)."""

    title: ClassVar[str] = "Leader election"

    enabled: bool = setting(
        "elect one leader among the operator's replicas (the others stand by); off: this"
        " replica reconciles at once",
        env="LEADER_ELECTION",
        default=True,
    )
    namespace: str | None = setting(
        "namespace of the leader Lease",
        default=None,
        default_doc="the operator's own (`POD_NAMESPACE`, the service account's, else the"
        " kubeconfig context's)",
    )
    lease_name: str = setting("name of the leader Lease", default="kaos-operator")
    identity: str | None = setting(
        "this replica's name as the Lease's holder", default=None, default_doc="`<host>-<pid>`"
    )
    lease_duration: float = setting(
        "seconds a Lease is held without renewal before another replica may take it",
        default=15.0,
        gt=0,
    )
    renew_deadline: float = setting(
        "seconds the leader keeps trying to renew before it gives the lead up",
        default=10.0,
        gt=0,
    )
    retry_period: float = setting(
        "seconds between a replica's attempts to acquire or renew", default=2.0, gt=0
    )

    def problems(self, prefix: str) -> list[str]:
        if self.retry_period < self.renew_deadline < self.lease_duration:
            return []
        names = [self.env_name(f, prefix) for f in ("retry_period", "renew_deadline")]
        return [f"need {' < '.join(names)} < {self.env_name('lease_duration', prefix)}"]

    def resolve(self, kubeconfig: str | None) -> LeaderSettings:
        """The settings with the Lease's namespace and this replica's identity filled in."""
        return LeaderSettings(
            enabled=self.enabled,
            namespace=self.namespace or lease_namespace(kubeconfig),
            lease_name=self.lease_name,
            identity=self.identity or f"{socket.gethostname()}-{os.getpid()}",
            lease_duration=self.lease_duration,
            renew_deadline=self.renew_deadline,
            retry_period=self.retry_period,
        )


def lease_namespace(
    kubeconfig: str | None,
    *,
    environ: Mapping[str, str] = os.environ,
    service_account_namespace: Path = SERVICE_ACCOUNT_NAMESPACE,
) -> str:
    """The operator's own namespace, where its Lease lives unless a setting names one.

    In a pod: ``POD_NAMESPACE`` (the downward API) or the service account's namespace
    file, unless a kubeconfig was given explicitly. Outside: the namespace of the
    kubeconfig's current context, else ``default`` (as kubectl resolves it). A fixed
    default such as ``kaos-system`` would leave an operator on a cluster without that
    namespace unable to ever create its Lease.
    """
    if environ.get("POD_NAMESPACE"):
        return environ["POD_NAMESPACE"]
    if not kubeconfig:
        try:
            own = service_account_namespace.read_text().strip()
        except OSError:
            own = ""
        if own:
            return own
    try:
        _, current = list_kube_config_contexts(kubeconfig)
    except (ConfigException, OSError, ValueError, yaml.YAMLError) as exc:
        # Connecting with the same file reports its problem loudly; here it only means
        # there is no context namespace to take.
        log.debug("no kubeconfig context to take a namespace from", extra={"error": str(exc)})
        return "default"
    namespace = ((current or {}).get("context") or {}).get("namespace")
    return str(namespace) if namespace else "default"
