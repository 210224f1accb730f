"""An Agent's task store, rollout and drain as its desired objects say: the claim, the
environment (values and references), the strategy, the grace period, the PDB."""

from __future__ import annotations

from typing import Any

import pytest
from kaos_agent.settings import AgentSettings
from kaos_operator.desired import AgentContext, agent_env, desired_agent_objects
from kaos_operator.desired.agent_tasks import (
    TASKS_IN_POD_MEMORY,
    grace_seconds,
    tasks_shared,
)
from kaos_operator.desired.overrides import OverrideRefused

from tests.support.operator_objects import IMAGES, OPEN, SECURED, agent, by_kind, env_of

EXTERNAL = {"type": "external", "connectionSecret": {"name": "pg", "key": "url"}}
POD_NAME_REF = {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}
ROLLING = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}


def ctx(**kw: Any) -> AgentContext:
    base: dict[str, Any] = {
        "images": IMAGES,
        "posture": OPEN,
        "model_api_url": "http://llm.ns.svc:4000",
        "model_name": "m",
    }
    return AgentContext(**{**base, **kw})


def pod_of(dep: dict[str, Any]) -> dict[str, Any]:
    return dict(dep["spec"]["template"]["spec"])


def test_no_task_store_is_memory_with_the_schema_defaults() -> None:
    objs = by_kind(desired_agent_objects(agent("a1"), ctx()))
    assert set(objs) == {"Deployment", "Service"}
    env = env_of(objs["Deployment"])
    assert env["TASK_STORE_TYPE"] == "memory"
    assert env["TASK_RETENTION_SECONDS"] == "86400"
    assert env["POD_NAME"] == POD_NAME_REF
    assert "TASK_STORE_PATH" not in env and "TASK_STORE_DSN" not in env
    # An explicit memory store is the same Deployment.
    explicit = agent("a1", taskStore={"type": "memory"})
    assert desired_agent_objects(explicit, ctx()) == desired_agent_objects(agent("a1"), ctx())


def test_external_store_shares_tasks_across_replicas() -> None:
    a = agent("a1", replicas=3, taskStore={**EXTERNAL, "retentionSeconds": 3600})
    objs = by_kind(desired_agent_objects(a, ctx()))
    assert set(objs) == {"Deployment", "Service", "PodDisruptionBudget"}
    dep = objs["Deployment"]
    env = env_of(dep)
    assert env["TASK_STORE_TYPE"] == "external"
    # The DSN is a reference the kubelet resolves; the operator never holds its value.
    assert env["TASK_STORE_DSN"] == {"secretKeyRef": {"name": "pg", "key": "url"}}
    assert env["TASK_RETENTION_SECONDS"] == "3600"
    assert env["POD_NAME"] == POD_NAME_REF
    assert dep["spec"]["replicas"] == 3
    assert dep["spec"]["strategy"] == ROLLING
    assert "volumes" not in pod_of(dep)
    pdb = objs["PodDisruptionBudget"]
    assert pdb["metadata"]["name"] == "a1"
    assert pdb["metadata"]["ownerReferences"][0]["uid"] == "uid-a1"
    assert pdb["spec"] == {
        "maxUnavailable": 1,
        "selector": {"matchLabels": dep["spec"]["selector"]["matchLabels"]},
    }
    assert tasks_shared(a).status is True


def test_local_store_gets_its_claim_mount_and_recreate() -> None:
    a = agent("a1", taskStore={"type": "local", "size": "2Gi", "storageClassName": "fast"})
    objects = desired_agent_objects(a, ctx())
    # The claim first: a pod created before it is unschedulable until it appears.
    assert [o["kind"] for o in objects] == ["PersistentVolumeClaim", "Deployment", "Service"]
    claim, dep = objects[0], objects[1]
    assert claim["metadata"]["name"] == "a1-tasks"
    assert claim["metadata"]["ownerReferences"][0]["uid"] == "uid-a1"
    assert claim["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "2Gi"}},
        "storageClassName": "fast",
    }
    assert dep["spec"]["strategy"] == {"type": "Recreate"}
    pod = pod_of(dep)
    assert pod["volumes"] == [{"name": "tasks", "persistentVolumeClaim": {"claimName": "a1-tasks"}}]
    assert pod["containers"][0]["volumeMounts"] == [
        {"name": "tasks", "mountPath": "/var/lib/kaos/tasks"}
    ]
    assert pod["securityContext"]["fsGroup"] == 65532
    env = env_of(dep)
    assert env["TASK_STORE_TYPE"] == "local"
    assert env["TASK_STORE_PATH"] == "/var/lib/kaos/tasks/tasks.db"
    assert "TASK_STORE_DSN" not in env


def test_local_store_without_a_class_takes_the_default_one() -> None:
    claim = desired_agent_objects(agent("a1", taskStore={"type": "local"}), ctx())[0]
    assert claim["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "256Mi"}},
    }


def test_local_store_path_follows_the_context() -> None:
    """A local stack runs the runtime with a temporary directory instead of the mount."""
    a = agent("a1", taskStore={"type": "local"})
    env = agent_env(a, ctx(tasks_dir="/tmp/stack/a1"))
    assert env["TASK_STORE_PATH"] == "/tmp/stack/a1/tasks.db"


def test_local_store_mount_joins_the_secured_mounts() -> None:
    a = agent("a1", taskStore={"type": "local"})
    dep = by_kind(desired_agent_objects(a, ctx(posture=SECURED)))["Deployment"]
    pod = pod_of(dep)
    assert [v["name"] for v in pod["volumes"]][-1] == "tasks"
    mounts = pod["containers"][0]["volumeMounts"]
    assert mounts[-1] == {"name": "tasks", "mountPath": "/var/lib/kaos/tasks"}
    assert len(mounts) == len(pod["volumes"])


@pytest.mark.parametrize(
    ("replicas", "budget"),
    [(0, False), (1, False), (2, True), (5, True)],
)
def test_a_budget_with_more_than_one_replica(replicas: int, budget: bool) -> None:
    objs = by_kind(desired_agent_objects(agent("a1", replicas=replicas), ctx()))
    assert ("PodDisruptionBudget" in objs) is budget


def test_memory_replicas_roll_without_losing_capacity() -> None:
    dep = by_kind(desired_agent_objects(agent("a1", replicas=3), ctx()))["Deployment"]
    assert dep["spec"]["strategy"] == ROLLING


@pytest.mark.parametrize(
    ("wall", "grace"),
    [
        (None, 30),  # no budget: Kubernetes' default
        (1, 30),  # a short budget never lowers it
        (90, 105),  # the budget, the preStop sleep and a margin
        (3000, 3015),
        (86400, 3600),  # capped at an hour
    ],
)
def test_grace_period_from_the_run_budget(wall: int | None, grace: int) -> None:
    config = {"taskConfig": {"maxWallTimeSeconds": wall}} if wall is not None else {}
    a = agent("a1", config=config)
    assert grace_seconds(a) == grace
    dep = by_kind(desired_agent_objects(a, ctx()))["Deployment"]
    assert pod_of(dep)["terminationGracePeriodSeconds"] == grace
    # Running tasks get what is left once the preStop sleep and the margin are taken.
    assert agent_env(a, ctx())["AGENT_SHUTDOWN_GRACE_SECONDS"] == str(grace - 15)


def test_pre_stop_sleeps_within_the_grace_period() -> None:
    dep = by_kind(desired_agent_objects(agent("a1"), ctx()))["Deployment"]
    pod = pod_of(dep)
    sleep = pod["containers"][0]["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert 0 < sleep < pod["terminationGracePeriodSeconds"]


def test_memory_replicas_are_told_their_tasks_are_apart() -> None:
    shared = tasks_shared(agent("a1", replicas=3))
    assert shared.status is False and shared.reason == TASKS_IN_POD_MEMORY
    assert "3 replicas" in shared.message and "spec.taskStore.type external" in shared.message
    single = tasks_shared(agent("a1"))
    assert single.status is True and "lost when it restarts" in single.message
    local = tasks_shared(agent("a1", taskStore={"type": "local"}))
    assert local.status is True and "a1-tasks" in local.message


@pytest.mark.parametrize("name", ["TASK_STORE_TYPE", "TASK_STORE_DSN", "POD_NAME"])
def test_task_store_variables_are_the_operators(name: str) -> None:
    a = agent("a1", container={"env": [{"name": name, "value": "x"}]})
    with pytest.raises(OverrideRefused, match=name):
        desired_agent_objects(a, ctx())


def test_the_tasks_volume_is_the_operators() -> None:
    a = agent(
        "a1",
        taskStore={"type": "local"},
        pod={"volumes": [{"name": "tasks", "emptyDir": {}}]},
    )
    with pytest.raises(OverrideRefused, match="tasks is a volume of the operator"):
        desired_agent_objects(a, ctx())


@pytest.mark.parametrize(
    ("store", "resolved"),
    [
        (None, {}),
        ({"type": "local"}, {}),
        # What the kubelet puts into the pod from the Secret.
        (EXTERNAL, {"TASK_STORE_DSN": "postgresql://u:p@db:5432/tasks"}),
    ],
    ids=["memory", "local", "external"],
)
def test_the_runtime_loads_what_the_operator_writes(
    store: dict[str, Any] | None, resolved: dict[str, str]
) -> None:
    a = agent("a1", **({"taskStore": store} if store else {}))
    dep = by_kind(desired_agent_objects(a, ctx()))["Deployment"]
    refs = {k for k, v in env_of(dep).items() if isinstance(v, dict)}
    assert refs == {"POD_NAME", *resolved}
    env = {**agent_env(a, ctx()), **resolved, "POD_NAME": "a1-7d9c-x2"}
    loaded = AgentSettings.from_env(env).task_store
    assert loaded.type == (store or {}).get("type", "memory")
    assert loaded.pod_name == "a1-7d9c-x2"
    assert (loaded.path is not None) == (loaded.type == "local")
    assert (loaded.dsn is not None) == (loaded.type == "external")


def test_an_autoscaled_agent_is_judged_by_its_most_replicas() -> None:
    scaled = agent(
        "a1", taskStore=EXTERNAL, autoscaling={"minReplicas": 1, "maxReplicas": 4}, replicas=1
    )
    objs = by_kind(desired_agent_objects(scaled, ctx()))
    assert objs["PodDisruptionBudget"]["spec"] == {
        "maxUnavailable": 1,
        "selector": objs["PodDisruptionBudget"]["spec"]["selector"],
    }
    apart = tasks_shared(agent("a1", autoscaling={"minReplicas": 1, "maxReplicas": 3}))
    assert apart.status is False and "3 replicas" in apart.message
    alone = agent("a1", autoscaling={"minReplicas": 1, "maxReplicas": 1})
    assert "PodDisruptionBudget" not in by_kind(desired_agent_objects(alone, ctx()))
