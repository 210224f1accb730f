"""Every container the operator deploys with a liveness probe also gets a startup probe on
the same request: a service still importing its libraries on a busy node is not restarted
by its liveness probe before it ever listened (the kind suite saw agents and memory
services restarted in a loop that way under load)."""

from __future__ import annotations

from typing import Any

from tests.unit.operator.test_desired_security import open_objects


def _containers(objects: Any) -> list[dict[str, Any]]:
    found = []
    for group in objects.values():
        for obj in group:
            if obj.get("kind") == "Deployment":
                found += obj["spec"]["template"]["spec"]["containers"]
    return found


def test_every_live_probed_container_has_a_startup_probe_on_the_same_request() -> None:
    containers = [c for c in _containers(open_objects()) if "livenessProbe" in c]
    assert len(containers) >= 4  # the agent, both stores, the model API
    for c in containers:
        live, startup = c["livenessProbe"], c["startupProbe"]
        assert startup["httpGet"] == live["httpGet"], c["name"]
        # Minutes to start, where liveness allows seconds.
        assert startup["periodSeconds"] * startup["failureThreshold"] >= 120, c["name"]
        assert live.get("failureThreshold", 3) * live["periodSeconds"] < 60, c["name"]
        assert live["timeoutSeconds"] >= 3, c["name"]


def test_the_agent_and_the_memory_service_leave_their_service_before_sigterm() -> None:
    """A preStop sleep: the endpoint leaves kube-proxy's rules before the process stops
    listening (the kind suite's rolling upgrade lost a memory write without it)."""
    objects = open_objects()
    serving = {
        c["name"]: c
        for key in ("agent", "store", "store_ext")
        for c in _containers({key: objects[key]})
    }
    assert set(serving) == {"agent", "memory"}
    for c in serving.values():
        assert c["lifecycle"]["preStop"]["sleep"]["seconds"] >= 3, c["name"]
