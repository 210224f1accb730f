"""The audit trail's parts without a server: the digest of arguments, the in-process log
(call order, the window, the latest ``limit``, a user's own entries, bounded, swept), the
query of ``GET /v1/audit``, the settings and the CRD field, the operator's environment and
the CLI's relative times."""

from __future__ import annotations

import hashlib
import json

import pytest
from kaos_agent.audit.log import AuditEntry, AuditLog, MemoryAuditLog, digest_arguments
from kaos_agent.audit_trail.query import DEFAULT_LIMIT, AuditQuery, BadAuditQuery, parse_query
from kaos_agent.settings import AgentSettings
from kaos_cli.clients.audit import when
from kaos_core.crds import Agent
from kaos_core.settings import SettingsError
from kaos_operator.desired.agent_audit import audit_env
from pydantic import ValidationError

BASE = {"MODEL_API_URL": "http://model:8000", "MODEL_NAME": "m"}


def entry(at: float, name: str = "t", **fields: object) -> AuditEntry:
    return AuditEntry(at=at, kind="tool", name=name, outcome="ok", **fields)  # type: ignore[arg-type]


def test_the_digest_is_of_the_canonical_json_and_arguments_only_on_request() -> None:
    args = {"b": [1, "ü"], "a": {"y": None, "x": 1.5}}
    canonical = '{"a":{"x":1.5,"y":null},"b":[1,"ü"]}'
    assert digest_arguments(args, record=False) == (
        hashlib.sha256(canonical.encode()).hexdigest(),
        None,
    )
    assert digest_arguments(args, record=True)[1] == canonical
    # The same arguments in another order: the same digest.
    assert (
        digest_arguments(json.loads(json.dumps(args, sort_keys=True)), record=False)[0]
        == (digest_arguments(args, record=False)[0])
    )


async def test_the_memory_log_answers_the_latest_matches_in_call_order() -> None:
    log = MemoryAuditLog()
    # Written out of start order (a long call ends after a later one): read in start order.
    for at, name, task in ((2.0, "b", "t1"), (1.0, "a", "t1"), (3.0, "c", "t2"), (3.0, "d", "t1")):
        await log.append(entry(at, name, task=task, user="alice" if name != "c" else "bob"))
    assert [e.name for e in await log.query()] == ["a", "b", "c", "d"]
    assert [e.name for e in await log.query(task="t1")] == ["a", "b", "d"]
    assert [e.name for e in await log.query(since=2.0, until=3.0)] == ["b"]
    assert [e.name for e in await log.query(limit=2)] == ["c", "d"]
    assert [e.name for e in await log.query(user="bob")] == ["c"]
    assert await log.sweep(2.5) == 2
    assert [e.name for e in await log.query()] == ["c", "d"]


async def test_the_memory_log_keeps_its_capacity() -> None:
    log = MemoryAuditLog(capacity=3)
    for at in range(5):
        await log.append(entry(float(at), str(at)))
    assert [e.name for e in await log.query()] == ["2", "3", "4"]


class Broken(AuditLog):
    async def write(self, entry: AuditEntry) -> None:
        raise OSError("disk on fire")

    async def select(self, query: AuditQuery) -> list[AuditEntry]:
        return []

    async def sweep(self, before: float) -> int:
        return 0


async def test_a_failed_write_never_raises_and_is_counted() -> None:
    log, failures = Broken(), []
    log.on_failure = lambda: failures.append(1)
    await log.append(entry(1.0))
    await log.append(entry(2.0))
    assert failures == [1, 1]


def query(**params: str | list[str]) -> AuditQuery:
    single = {k: v if isinstance(v, str) else v[0] for k, v in params.items()}
    every = {k: [v] if isinstance(v, str) else v for k, v in params.items()}
    return parse_query(single, every)


def test_the_query_parses_each_parameter() -> None:
    assert query() == AuditQuery(limit=DEFAULT_LIMIT)
    midnight = 1796515200.0  # 2026-12-06T00:00:00Z
    parsed = query(task="t-1", since="2026-12-06", until="2026-12-06T02:00:00+01:00", limit="5")
    assert parsed == AuditQuery(task="t-1", since=midnight, until=midnight + 3600, limit=5)
    assert query(since="1796515200.25", until="2026-12-06t00:00:01.5Z") == AuditQuery(
        since=midnight + 0.25, until=midnight + 1.5
    )


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ({"who": "x"}, "unknown query parameter 'who'"),
        ({"task": ["a", "b"]}, "'task' given more than once"),
        ({"task": ""}, "'task' must be"),
        ({"since": "1 hour ago"}, "'since' must be"),
        ({"since": "2026-12-06T09:30:00"}, "'since' must be"),  # a time needs its offset
        ({"until": "2026-02-30"}, "'until' must be"),
        ({"limit": "10001"}, "'limit' must be"),
        ({"limit": "-1"}, "'limit' must be"),
        ({"since": "20", "until": "10"}, "'until' must be after 'since'"),
    ],
)
def test_a_bad_query_names_the_parameter(params: dict[str, str | list[str]], fragment: str) -> None:
    with pytest.raises(BadAuditQuery) as info:
        query(**params)
    assert fragment in info.value.message
    assert info.value.status == 400


def test_settings_default_and_bounds() -> None:
    settings = AgentSettings.from_env(BASE)
    assert (settings.audit.retention_days, settings.audit.record_arguments) == (30, False)
    assert settings.audit.retention_seconds == 30 * 86400
    opted = AgentSettings.from_env(
        {**BASE, "AGENT_AUDIT_RETENTION_DAYS": "7", "AGENT_AUDIT_RECORD_ARGUMENTS": "true"}
    )
    assert (opted.audit.retention_days, opted.audit.record_arguments) == (7, True)
    for bad in ("0", "3651", "soon"):
        with pytest.raises(SettingsError) as info:
            AgentSettings.from_env({**BASE, "AGENT_AUDIT_RETENTION_DAYS": bad})
        assert "AGENT_AUDIT_RETENTION_DAYS" in str(info.value)


def agent(spec: dict[str, object]) -> Agent:
    return Agent.model_validate(
        {
            "apiVersion": "kaos.tools/v1alpha1",
            "kind": "Agent",
            "metadata": {"name": "a", "namespace": "ns"},
            "spec": {"modelAPI": "m", **spec},
        }
    )


def test_the_operator_writes_the_audit_settings_of_the_agent() -> None:
    # Absent: nothing written, and the runtime's defaults are the field's.
    assert audit_env(agent({})) == {}
    defaults = AgentSettings.from_env(BASE).audit
    assert audit_env(agent({"audit": {}})) == {
        "AGENT_AUDIT_RETENTION_DAYS": str(defaults.retention_days),
        "AGENT_AUDIT_RECORD_ARGUMENTS": "false",
    }
    opted = agent({"audit": {"retentionDays": 365, "recordArguments": True}})
    assert audit_env(opted) == {
        "AGENT_AUDIT_RETENTION_DAYS": "365",
        "AGENT_AUDIT_RECORD_ARGUMENTS": "true",
    }
    with pytest.raises(ValidationError):
        agent({"audit": {"retentionDays": 0}})


def test_the_cli_turns_relative_times_into_epoch_seconds() -> None:
    assert when("90s", now=1000.0) == "910.000"
    assert when("2h", now=10_000.0) == "2800.000"
    assert when("7d", now=1_000_000.0) == f"{1_000_000.0 - 7 * 86400:.3f}"
    # Anything else goes to the agent as it is.
    assert when("2026-12-06") == "2026-12-06"
    assert when(" 1700000000 ") == "1700000000"
