"""Leader election that cannot fail silently: warnings with the reason, readiness says so.

The elector runs against an in-memory Lease store that answers like the API server
(404 for a missing namespace, 403 without RBAC); the readiness check is read through
the operator app's own ``/readyz``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from aiohttp.test_utils import TestClient, TestServer
from kaos_operator.app import create_app
from kaos_operator.kube import KubeClient, Obj, PermanentError, ResourceType
from kaos_operator.leader import LeaderElector
from kaos_operator.settings import LeaderSettings, OperatorSettings

from tests.e2e.operator.helpers import eventually

NS = "kaos-system"


class FakeLeases:
    """Leases by (namespace, name); namespaces outside ``namespaces`` do not exist."""

    def __init__(self, namespaces: set[str], *, forbid: bool = False) -> None:
        self.namespaces = namespaces
        self.forbid = forbid
        self.leases: dict[tuple[str | None, str], Obj] = {}
        self.version = 0

    def _check(self, namespace: str | None, verb: str) -> None:
        if self.forbid:
            raise PermanentError(
                403,
                "Forbidden",
                f'leases.coordination.k8s.io is forbidden: cannot {verb} in "{namespace}"',
            )
        if namespace not in self.namespaces:
            raise PermanentError(404, "NotFound", f'namespaces "{namespace}" not found')

    async def get(self, rt: ResourceType, namespace: str | None, name: str) -> Obj | None:
        if self.forbid:
            self._check(namespace, "get")
        return self.leases.get((namespace, name))

    async def create(self, rt: ResourceType, namespace: str | None, body: Obj) -> Obj:
        self._check(namespace, "create")
        return self._store(namespace, body)

    async def replace(self, rt: ResourceType, namespace: str | None, name: str, body: Obj) -> Obj:
        self._check(namespace, "update")
        return self._store(namespace, body)

    def _store(self, namespace: str | None, body: Obj) -> Obj:
        self.version += 1
        stored = {**body, "metadata": {**body["metadata"], "resourceVersion": str(self.version)}}
        self.leases[(namespace, body["metadata"]["name"])] = stored
        return stored


def leader_settings(identity: str = "op-a", namespace: str = NS) -> LeaderSettings:
    return LeaderSettings(
        enabled=True,
        namespace=namespace,
        lease_name="kaos-operator",
        identity=identity,
        lease_duration=15,
        renew_deadline=10,
        retry_period=2,
    )


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name == "kaos_operator.leader" and r.levelno == logging.WARNING
    ]


async def test_missing_namespace_is_a_warning_naming_it(caplog: pytest.LogCaptureFixture) -> None:
    elector = LeaderElector(FakeLeases({"default"}), leader_settings())
    with caplog.at_level(logging.WARNING, logger="kaos_operator.leader"):
        assert not await elector.try_acquire_or_renew()
    (record,) = warnings_of(caplog)
    fields: dict[str, Any] = vars(record)
    assert record.getMessage() == "cannot acquire the leader Lease"
    assert fields["namespace"] == NS and fields["lease"] == "kaos-operator"
    assert (fields["status"], fields["reason"]) == (404, "NotFound")
    assert not elector.progressing


async def test_every_failed_attempt_is_logged_and_recovery_clears_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    leases = FakeLeases(set(), forbid=True)
    elector = LeaderElector(leases, leader_settings())
    with caplog.at_level(logging.WARNING, logger="kaos_operator.leader"):
        for _ in range(3):
            assert not await elector.try_acquire_or_renew()
    assert [vars(r)["reason"] for r in warnings_of(caplog)] == ["Forbidden"] * 3
    assert not elector.progressing
    leases.forbid = False
    leases.namespaces.add(NS)
    assert await elector.try_acquire_or_renew()
    assert elector.progressing
    assert leases.leases[(NS, "kaos-operator")]["spec"]["holderIdentity"] == "op-a"


async def test_a_standby_behind_a_live_holder_is_progressing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    leases = FakeLeases({NS})
    assert await LeaderElector(leases, leader_settings("op-a")).try_acquire_or_renew()
    standby = LeaderElector(leases, leader_settings("op-b"))
    with caplog.at_level(logging.WARNING, logger="kaos_operator.leader"):
        assert not await standby.try_acquire_or_renew()
    assert standby.progressing and warnings_of(caplog) == []


async def test_a_failed_renewal_says_renew(caplog: pytest.LogCaptureFixture) -> None:
    leases = FakeLeases({NS})
    elector = LeaderElector(leases, leader_settings())
    assert await elector.try_acquire_or_renew()
    elector.leading = True  # as ``run`` sets it once acquired
    leases.namespaces.clear()  # the namespace is being deleted under the leader
    with caplog.at_level(logging.WARNING, logger="kaos_operator.leader"):
        assert not await elector.try_acquire_or_renew()
    (record,) = warnings_of(caplog)
    assert record.getMessage() == "cannot renew the leader Lease"


# -- readiness through the app ------------------------------------------------------------


@pytest.fixture
async def stalled_app() -> AsyncIterator[TestClient[Any, Any]]:
    """The operator app whose Lease namespace does not exist."""
    settings = OperatorSettings.from_env({"KAOS_OPERATOR_NAMESPACE": "no-such-namespace"})
    app = create_app(settings, client=cast(KubeClient, FakeLeases({"default"})))
    async with TestClient(TestServer(app)) as client:
        yield client


async def test_readiness_fails_with_a_fixed_message_while_the_election_is_stalled(
    stalled_app: TestClient[Any, Any],
) -> None:
    async def stalled() -> dict[str, Any] | None:
        resp = await stalled_app.get("/readyz")
        body: dict[str, Any] = await resp.json()
        return body if resp.status == 503 else None

    body = await eventually(stalled, within=10, what="/readyz to report the stalled election")
    assert body["checks"]["leader_election"] == "LeaderElectionStalled"
    assert body["checks"]["controller"] == "ok"  # a candidate that never led
