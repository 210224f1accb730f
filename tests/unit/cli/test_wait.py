"""``--wait`` stops at once on a state that cannot resolve by itself (Failed, a stuck
reason, a referenced object still missing after its grace, with close names), never on a
status the operator wrote for an earlier generation, and otherwise at its timeout."""

from __future__ import annotations

from typing import Any, cast

import pytest
from kaos_cli.commands.wait import MISSING_GRACE, POLL_SECONDS, wait_ready
from kaos_cli.kinds import AGENT, MCP, MEMORYSTORE, MODELAPI
from kaos_cli.kubectl.sync import Kube
from kaos_cli.tools import CliError
from kaos_core.crds import reasons


class FakeKube:
    """The two questions ``--wait`` asks the cluster: one object's current state (the
    next of a scripted sequence, the last one repeating) and the names of a kind."""

    def __init__(self, states: dict[str, list[dict[str, Any]]], names: dict[str, list[str]]):
        self._states = {name: iter(seq) for name, seq in states.items()}
        self._last: dict[str, dict[str, Any]] = {}
        self._names = names
        self.namespace = "team"

    def find(self, resource: str, name: str) -> dict[str, Any] | None:
        self._last[name] = next(self._states[name], self._last.get(name, {}))
        return self._last[name]

    def names(self, resource: str) -> list[str]:
        return self._names.get(resource, [])

    def namespace_name(self) -> str:
        return "team"


class Clock:
    """Time that passes only when the wait sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def agent(
    phase: str,
    *conditions: tuple[str, str, str, str],
    generation: int = 1,
    observed: int | None = 1,
    spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "kind": "Agent",
        "metadata": {"name": "a1", "generation": generation},
        "spec": spec or {"modelAPI": "devmodl"},
        "status": {
            "phase": phase,
            "observedGeneration": observed,
            "conditions": [
                {"type": t, "status": s, "reason": r, "message": m} for t, s, r, m in conditions
            ],
        },
    }


def run(
    kube: FakeKube, timeout: float = 120, targets: list[Any] | None = None
) -> tuple[int | CliError, float]:
    clock = Clock()
    try:
        result: int | CliError = wait_ready(
            cast(Kube, kube),
            targets or [(AGENT, "a1")],
            timeout,
            clock=clock,
            sleep=clock.sleep,
        )
    except CliError as exc:
        result = exc
    return result, clock.now


REFUSED = (
    "Ready",
    "False",
    reasons.OVERRIDE_REFUSED,
    "MEMORY_ENDPOINT is reserved for the operator: it sets it from spec.config.memory; "
    "remove it from spec.container.env",
)


def test_a_refused_override_stops_at_once_with_the_whole_message(
    capsys: pytest.CaptureFixture[str],
) -> None:
    kube = FakeKube({"a1": [agent("Failed", REFUSED)]}, {})
    result, waited = run(kube)
    assert isinstance(result, CliError) and result.exit_code == 1
    assert result.message == (
        "agent a1 failed: OverrideRefused: MEMORY_ENDPOINT is reserved for the operator: it "
        "sets it from spec.config.memory; remove it from spec.container.env; fix its spec and "
        "deploy again (see: kaos agent describe a1)"
    )
    assert waited == 0
    assert capsys.readouterr().err.splitlines() == [
        "agent/a1: Failed - Ready: OverrideRefused: MEMORY_ENDPOINT is reserved for the "
        "operator: it sets it from spec.config.memory; remove it from spec.container.env"
    ]


def test_a_stuck_reason_stops_even_while_the_phase_says_waiting() -> None:
    stuck = ("Ready", "False", reasons.INVALID_SPEC, "spec.replicas: must be at least 1")
    result, waited = run(FakeKube({"a1": [agent("Waiting", stuck)]}, {}))
    assert isinstance(result, CliError)
    assert result.message.startswith("agent a1 failed: InvalidSpec: spec.replicas: must be")
    assert waited == 0


def test_a_failure_of_an_earlier_generation_is_waited_out() -> None:
    """The user just fixed the spec: the Failed status is about the version before."""
    kube = FakeKube(
        {
            "a1": [
                agent("Failed", REFUSED, generation=2, observed=1),
                agent("Ready", generation=2, observed=2),
            ]
        },
        {},
    )
    result, waited = run(kube)
    assert result == 0
    assert waited == POLL_SECONDS


def test_a_stale_ready_is_not_ready() -> None:
    kube = FakeKube(
        {
            "a1": [
                agent("Ready", generation=3, observed=2),
                agent("Ready", generation=3, observed=3),
            ]
        },
        {},
    )
    assert run(kube) == (0, POLL_SECONDS)


MISSING_API = (
    "DependenciesReady",
    "False",
    reasons.MODEL_API_NOT_FOUND,
    "ModelAPI devmodl not found",
)


def test_a_missing_modelapi_stops_after_the_grace_with_a_close_name() -> None:
    kube = FakeKube(
        {"a1": [agent("Waiting", MISSING_API)]},
        {MODELAPI.resource: ["devmodel", "other-api"]},
    )
    result, waited = run(kube)
    assert isinstance(result, CliError) and result.exit_code == 1
    assert result.message == (
        "agent a1 cannot become Ready: modelapi 'devmodl' does not exist in namespace team "
        "(did you mean modelapi 'devmodel'?); fix spec.modelAPI and deploy again "
        "(see: kaos agent describe a1)"
    )
    assert MISSING_GRACE <= waited < MISSING_GRACE + 2 * POLL_SECONDS


def test_a_missing_object_that_arrives_within_the_grace_is_waited_for() -> None:
    kube = FakeKube(
        {"a1": [agent("Waiting", MISSING_API)] * 3 + [agent("Ready")]},
        {MODELAPI.resource: ["devmodl"]},
    )
    assert run(kube) == (0, 3 * POLL_SECONDS)


def test_the_operator_lagging_behind_an_object_that_exists_is_waited_for() -> None:
    """After the grace the name exists after all (the operator has not caught up)."""
    states = [agent("Waiting", MISSING_API)] * int(MISSING_GRACE / POLL_SECONDS + 3)
    kube = FakeKube({"a1": [*states, agent("Ready")]}, {MODELAPI.resource: ["devmodl"]})
    result, _ = run(kube)
    assert result == 0


def test_every_missing_reference_is_named_with_its_field() -> None:
    both = agent(
        "Waiting",
        (
            "DependenciesReady",
            "False",
            reasons.MCP_SERVER_NOT_FOUND,
            "MCPServer toolz not found; MemoryStore memory-locl not found",
        ),
        spec={
            "modelAPI": "llm",
            "mcpServers": ["tools", "toolz"],
            "config": {"memory": {"type": "remote", "memoryStore": "memory-locl"}},
        },
    )
    kube = FakeKube(
        {"a1": [both]},
        {MCP.resource: ["tools"], MEMORYSTORE.resource: ["memory-local"]},
    )
    result, _ = run(kube)
    assert isinstance(result, CliError)
    assert result.message == (
        "agent a1 cannot become Ready: mcp 'toolz' does not exist in namespace team (did you "
        "mean mcp 'tools'?); memorystore 'memory-locl' does not exist in namespace team (did "
        "you mean memorystore 'memory-local'?); fix spec.mcpServers[1] and "
        "spec.config.memory.memoryStore and deploy again (see: kaos agent describe a1)"
    )


def test_no_close_name_no_suggestion() -> None:
    kube = FakeKube({"a1": [agent("Waiting", MISSING_API)]}, {MODELAPI.resource: ["zzz"]})
    result, _ = run(kube)
    assert isinstance(result, CliError)
    assert "does not exist in namespace team; fix spec.modelAPI" in result.message


def test_a_state_that_can_change_runs_to_the_timeout(capsys: pytest.CaptureFixture[str]) -> None:
    pending = ("Ready", "False", reasons.DEPLOYMENT_PROGRESSING, "waiting for the deployment")
    result, waited = run(FakeKube({"a1": [agent("Pending", pending)]}, {}), timeout=5)
    assert isinstance(result, CliError)
    assert result.message == (
        "agent a1 not Ready after 5s: Pending - Ready: DeploymentProgressing: waiting for the "
        "deployment (see: kaos agent describe a1)"
    )
    assert 5 < waited <= 5 + 2 * POLL_SECONDS
    # Each change is printed once, not once per poll.
    assert len(capsys.readouterr().err.splitlines()) == 1


def test_a_failed_pod_points_to_the_logs() -> None:
    crash = ("Ready", "False", reasons.CRASH_LOOPING, "container agent exited 1, restarting")
    result, waited = run(FakeKube({"a1": [agent("Failed", crash)]}, {}))
    assert isinstance(result, CliError)
    assert result.message == (
        "agent a1 failed: CrashLooping: container agent exited 1, restarting; it will not "
        "become Ready by itself (see: kaos agent describe a1, kaos agent logs a1)"
    )
    assert waited == 0
