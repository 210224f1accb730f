"""How an Agent's A2A tasks outlive its pods: where they are kept (``spec.taskStore``),
and how the pods holding them are replaced and drained.

- memory (also no taskStore): in the pod, each replica its own tasks, lost with the pod.
- local: SQLite on a PersistentVolumeClaim ``<agent>-tasks`` (ReadWriteOnce, the schema
  allows one replica), replaced with the Recreate strategy so two pods never open it.
- external: PostgreSQL shared by every replica; the DSN reaches the pod from the
  referenced Secret through ``secretKeyRef`` (the operator never reads it).

Every pod learns its own name (``POD_NAME``, the downward API: who holds a task's lease),
sleeps in preStop so that its endpoints are removed while it still serves, and is given
its run budget plus a margin to finish before it is killed. More than one replica: a
rolling update adds a pod before it removes one, and a PodDisruptionBudget lets a drain
take one at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

from kaos_core import agent_env as names
from kaos_core.crds.agent import Agent, AgentTaskStore
from kaos_core.crds.reasons import (
    EXTERNAL_TASK_STORE,
    SINGLE_REPLICA,
    TASKS_IN_POD_MEMORY,
)

from kaos_operator.desired.common import PRE_STOP_SECONDS, Obj, claim, disruption_budget

# Where a local store's claim is mounted, and its file.
TASKS_DIR = "/var/lib/kaos/tasks"
TASKS_FILE = "tasks.db"
TASKS_VOLUME = "tasks"

# Beyond the run budget and the preStop sleep: to record the run's outcome and exit.
SHUTDOWN_MARGIN_SECONDS = 10
# Kubernetes' own default, the least a pod gets; and the most, whatever the budget.
GRACE_MIN_SECONDS = 30
GRACE_MAX_SECONDS = 3600


def task_store(agent: Agent) -> AgentTaskStore:
    """The Agent's task store, the schema's defaults (memory) when it names none."""
    return agent.spec.task_store or AgentTaskStore()


def tasks_claim_name(agent: Agent) -> str:
    return f"{agent.name}-tasks"


def task_store_env(agent: Agent, tasks_dir: str = TASKS_DIR) -> dict[str, str]:
    """The runtime's task store variables that are values (the DSN and the pod's name
    are references: ``task_store_refs``). ``tasks_dir``: where a local store's file is."""
    store = task_store(agent)
    env: dict[str, str] = {names.TASK_STORE_TYPE: store.type}
    if store.type == "local":
        env[names.TASK_STORE_PATH] = f"{tasks_dir}/{TASKS_FILE}"
    env[names.TASK_RETENTION_SECONDS] = str(store.retention_seconds)
    env[names.AGENT_SHUTDOWN_GRACE_SECONDS] = str(
        grace_seconds(agent) - PRE_STOP_SECONDS - SHUTDOWN_MARGIN_SECONDS
    )
    return env


def task_store_refs(agent: Agent) -> list[Obj]:
    """Env entries the pod resolves itself: its name, and an external store's DSN."""
    out: list[Obj] = [
        {
            "name": names.POD_NAME,
            "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
        }
    ]
    store = task_store(agent)
    ref = store.connection_secret
    if store.type == "external" and ref is not None:
        out.append(
            {
                "name": names.TASK_STORE_DSN,
                "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}},
            }
        )
    return out


def tasks_claim(agent: Agent) -> Obj | None:
    """A local store's PersistentVolumeClaim, owned by the Agent; None otherwise."""
    store = task_store(agent)
    if store.type != "local":
        return None
    return claim(agent, tasks_claim_name(agent), store.size, store.storage_class_name)


def tasks_volume(agent: Agent) -> Obj | None:
    if task_store(agent).type != "local":
        return None
    return {"name": TASKS_VOLUME, "persistentVolumeClaim": {"claimName": tasks_claim_name(agent)}}


def tasks_mount(tasks_dir: str = TASKS_DIR) -> Obj:
    return {"name": TASKS_VOLUME, "mountPath": tasks_dir}


def rollout_strategy(agent: Agent) -> Obj:
    """Recreate for a local store (its ReadWriteOnce claim cannot be shared by the old and
    the new pod); else a rolling update that never runs fewer pods than asked for."""
    if task_store(agent).type == "local":
        return {"type": "Recreate"}
    return {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}


def grace_seconds(agent: Agent) -> int:
    """terminationGracePeriodSeconds: the run budget (``maxWallTimeSeconds``), the preStop
    sleep and a margin; at least Kubernetes' default, at most an hour."""
    budget = agent.spec.config.task_config
    wall = budget.max_wall_time_seconds if budget is not None else None
    if wall is None:
        return GRACE_MIN_SECONDS
    wanted = wall + PRE_STOP_SECONDS + SHUTDOWN_MARGIN_SECONDS
    return min(GRACE_MAX_SECONDS, max(GRACE_MIN_SECONDS, wanted))


def most_replicas(agent: Agent) -> int:
    """The most pods the Agent may run: its replicas, or its autoscaler's maximum."""
    scaling = agent.spec.autoscaling
    return max(agent.spec.replicas, scaling.max_replicas if scaling is not None else 0)


def agent_disruption_budget(agent: Agent) -> Obj | None:
    """With more than one replica: voluntary disruptions (a drain) take one pod at a time."""
    if most_replicas(agent) <= 1:
        return None
    return disruption_budget(agent, {"maxUnavailable": 1})


@dataclass(frozen=True)
class TasksShared:
    """Condition TasksShared: whether every replica answers for every task."""

    status: bool
    reason: str
    message: str


def tasks_shared(agent: Agent) -> TasksShared:
    store, replicas = task_store(agent), most_replicas(agent)
    if store.type == "external":
        return TasksShared(
            True,
            EXTERNAL_TASK_STORE,
            "tasks in PostgreSQL: every replica answers for every task, and a task outlives"
            " its pod",
        )
    if replicas <= 1:
        where = (
            f"on PersistentVolumeClaim {tasks_claim_name(agent)}: they outlive the pod"
            if store.type == "local"
            else "in the pod's memory: they are lost when it restarts"
        )
        return TasksShared(True, SINGLE_REPLICA, f"one replica holds every task, {where}")
    return TasksShared(
        False,
        TASKS_IN_POD_MEMORY,
        f"{replicas} replicas each keep their own tasks in memory: tasks/get, tasks/list and"
        " tasks/cancel reach whichever replica the Service picks, which may not hold the"
        " task, and a task is lost with its pod; set spec.taskStore.type external to share"
        " them",
    )
