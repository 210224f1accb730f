"""The A2A task store: where tasks live, how long finished ones stay, and how a pod stops.

``memory`` keeps a pod's tasks in the process (bounded, lost with it); ``local`` one SQLite
file (one replica, survives a restart); ``external`` PostgreSQL shared by every replica.
The DSN is a secret (it comes from a Secret): it is never logged nor put in an answer.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import ClassVar, Literal

from kaos_core import agent_env as env
from kaos_core.settings import SettingsGroup, setting
from pydantic import SecretStr

TaskStoreType = Literal["memory", "local", "external"]

TASK_LEASE_SECONDS = "TASK_LEASE_SECONDS"


class TaskStoreSettings(SettingsGroup):
    """Where A2A tasks are kept, and how long running ones wait for a stopping pod."""

    env_prefix: ClassVar[str | None] = ""
    title: ClassVar[str] = "A2A task store"

    type: TaskStoreType = setting(
        "`memory` (the pod's own, bounded), `local` (SQLite at `TASK_STORE_PATH`, one"
        " replica) or `external` (PostgreSQL at `TASK_STORE_DSN`, shared by every replica)",
        env=env.TASK_STORE_TYPE,
        default="memory",
    )
    path: Path | None = setting(
        "the SQLite file; required by `local`, refused otherwise",
        env=env.TASK_STORE_PATH,
        default=None,
    )
    dsn: SecretStr | None = setting(
        "PostgreSQL connection string; required by `external`, refused otherwise; never logged",
        env=env.TASK_STORE_DSN,
        default=None,
    )
    retention_seconds: int = setting(
        "how long a finished task (completed, failed, canceled) stays readable",
        env=env.TASK_RETENTION_SECONDS,
        default=86400,
        ge=60,
        le=90 * 86400,
    )
    lease_seconds: float = setting(
        "how long a running task's lease lasts unless its replica renews it (every third of"
        " it); a task whose lease lapsed (its replica died) is resumed from its last"
        " checkpoint by another replica (`external`) or by the restarted pod (`local`), and"
        " failed after 3 resumes; with `memory` it is failed",
        env=TASK_LEASE_SECONDS,
        default=30.0,
        ge=1,
        le=3600,
    )
    pod_name: str | None = setting(
        "this replica's name, the holder of its tasks' leases",
        env=env.POD_NAME,
        default=None,
        default_doc="the host name",
    )
    shutdown_grace_seconds: float = setting(
        "on SIGTERM, how long running tasks may go on before they are stopped: handed over"
        " to another replica with `external` (their leases released, resumed from their"
        " checkpoints), failed otherwise (keep it a few seconds below the pod's"
        " `terminationGracePeriodSeconds`)",
        env=env.AGENT_SHUTDOWN_GRACE_SECONDS,
        default=20.0,
        ge=0,
        le=3600,
    )

    def problems(self, prefix: str) -> list[str]:
        kind = self.env_name("type", prefix)
        path, dsn = self.env_name("path", prefix), self.env_name("dsn", prefix)
        found: list[str] = []
        if self.type == "local" and self.path is None:
            found.append(f"{kind}=local needs {path}")
        if self.type != "local" and self.path is not None:
            found.append(f"{path} is set but {kind}={self.type}")
        if self.type == "external" and self.dsn is None:
            found.append(f"{kind}=external needs {dsn}")
        if self.type != "external" and self.dsn is not None:
            found.append(f"{dsn} is set but {kind}={self.type}")
        return found

    @property
    def runner(self) -> str:
        """Who holds this replica's leases: the pod's name, else the host name."""
        return self.pod_name or socket.gethostname()
