"""The operator process itself: the cluster it connects to, what it watches, how it works
through its queue, and where it serves its health and metrics."""

from __future__ import annotations

from typing import ClassVar

from kaos_core.settings import SettingsGroup, setting


class Cluster(SettingsGroup):
    """The cluster the operator connects to and the resources it watches."""

    env_prefix: ClassVar[str | None] = ""
    title: ClassVar[str] = "Cluster"

    kubeconfig: str | None = setting(
        "kubeconfig to connect with",
        env="KUBECONFIG",
        default=None,
        default_doc="the pod's service account, else `~/.kube/config`",
    )
    watch_namespace: str | None = setting(
        "watch only this namespace",
        env="KAOS_OPERATOR_WATCH_NAMESPACE",
        default=None,
        default_doc="all namespaces",
    )


class QueueSettings(SettingsGroup):
    """How many resources are reconciled at once, and how a failing one is retried."""

    title: ClassVar[str] = "Work queue"

    # Backend reads (a store's receipt key, a ModelAPI's capabilities) run beside the
    # workers (``reconcilers.reads``); a worker waits only on the API server.
    workers: int = setting("resources reconciled at once", default=16, ge=1, le=64)
    backoff_base: float = setting(
        "seconds before the first retry of a failed reconcile, doubled per failure",
        default=0.5,
        gt=0,
    )
    backoff_max: float = setting("cap of the retry delay, in seconds", default=60.0, gt=0)


class Serving(SettingsGroup):
    """Where the operator serves ``/healthz``, ``/readyz`` and ``/metrics``."""

    title: ClassVar[str] = "Listening (health and metrics)"

    host: str = setting("listen address", default="0.0.0.0")
    port: int = setting("listen port (0: any free port)", default=8081, ge=0, le=65535)
    log_level: str = setting("log level of the JSON logs on stderr", default="INFO")
