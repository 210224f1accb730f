"""Security on, through the reconcilers and the controller's event mapping: a resource's
callers file and NetworkPolicy come from who refers to it, and a referrer's change
queues what it referred to before and after (level-triggered: the reconcile recomputes)."""

from __future__ import annotations

from typing import Any

from kaos_core.auth.callers import Callers
from kaos_operator.controller import Controller
from kaos_operator.index import ObjKey
from kaos_operator.kube import Obj
from kaos_operator.metrics import OperatorMetrics
from kaos_operator.reconcilers import build_reconcilers
from kaos_operator.settings import OperatorSettings, ReconcileSettings
from prometheus_client import CollectorRegistry

from tests.support.operator_context import FakeContext, raw, ready_model_api, store_spec
from tests.support.operator_objects import IMAGES, SECURED

REMOTE = {"type": "remote", "memoryStore": "mem"}


def secured_context() -> FakeContext:
    ctx = FakeContext(settings=ReconcileSettings(images=IMAGES, posture=SECURED))
    ready_model_api(ctx)
    return ctx


def applied(ctx: FakeContext, kind: str, name: str) -> Obj:
    return ctx.objects[(kind, "ns", name)]


def caller_names(cm: Obj) -> list[str]:
    doc = Callers.model_validate_json(cm["data"]["callers.json"])
    return [c.service_account for c in doc.callers]


async def test_reconcilers_list_the_referrers_in_the_cache() -> None:
    ctx = secured_context()
    ctx.add(raw("Agent", "a", {"modelAPI": "llm", "agentNetwork": {"access": ["b"]}}))
    # b does not wait for its store (not Ready here) to be applied.
    b = {"modelAPI": "llm", "config": {"memory": REMOTE}, "waitForDependencies": False}
    ctx.add(raw("Agent", "b", b))
    ctx.add(raw("Agent", "broken", {"agentNetwork": {"access": ["b"]}}))  # no modelAPI
    ctx.add(raw("Agent", "other-ns", {"modelAPI": "llm", "agentNetwork": {"access": ["b"]}}, "x"))
    ctx.add(raw("MemoryStore", "mem", store_spec()))
    reconcilers = build_reconcilers(ctx)

    for kind, name in (("Agent", "b"), ("MemoryStore", "mem"), ("ModelAPI", "llm")):
        await reconcilers[kind].reconcile("ns", name)

    # An invalid Agent and one of another namespace grant nothing.
    assert caller_names(applied(ctx, "ConfigMap", "b-callers")) == ["a"]
    assert caller_names(applied(ctx, "ConfigMap", "mem-callers")) == ["b"]
    assert applied(ctx, "ServiceAccount", "b")["automountServiceAccountToken"] is False
    rule = applied(ctx, "NetworkPolicy", "llm")["spec"]["ingress"][0]
    assert [p["podSelector"]["matchExpressions"][0]["values"] for p in rule["from"]] == [
        ["a", "b"],
        ["mem"],
    ]


def controller(security: bool) -> Controller:
    settings = OperatorSettings.from_env(
        {
            "KAOS_SECURITY_ENABLED": str(security).lower(),
            "KAOS_OPERATOR_NAMESPACE": "ns",
            "KAOS_OPERATOR_IDENTITY": "unit",
        }
    )
    client: Any = object()  # never called: only the event handlers run
    return Controller(client, settings, OperatorMetrics.create(CollectorRegistry()))


async def drain(ctl: Controller) -> set[ObjKey]:
    out: set[ObjKey] = set()
    while ctl.queue.depth:
        key = await ctl.queue.get()
        ctl.queue.done(key)
        assert isinstance(key, tuple)
        out.add(key)
    return out


def agent_event(ctl: Controller, event: str, name: str, generation: int, **spec: Any) -> None:
    obj = raw("Agent", name, {"modelAPI": "llm", **spec})
    obj["metadata"]["generation"] = generation
    for handler in ctl.resources["Agent"]._handlers:
        handler(event, obj)


async def test_a_referrer_change_queues_what_it_referred_to_before_and_after() -> None:
    ctl = controller(security=True)
    agent_event(ctl, "ADDED", "a", 1, agentNetwork={"access": ["b"]}, config={"memory": REMOTE})
    assert await drain(ctl) == {
        ("Agent", "ns", "a"),
        ("Agent", "ns", "b"),
        ("ModelAPI", "ns", "llm"),
        ("MemoryStore", "ns", "mem"),
    }
    # A status write: same generation, same references, nothing else to recompute.
    agent_event(ctl, "MODIFIED", "a", 1, agentNetwork={"access": ["b"]}, config={"memory": REMOTE})
    assert await drain(ctl) == {("Agent", "ns", "a")}
    # b revoked, c granted: both hear of it.
    agent_event(ctl, "MODIFIED", "a", 2, agentNetwork={"access": ["c"]}, config={"memory": REMOTE})
    assert {("Agent", "ns", "b"), ("Agent", "ns", "c")} <= await drain(ctl)
    # Memory switched to local: same references, new generation, the store recomputes.
    local = {**REMOTE, "type": "local"}
    agent_event(ctl, "MODIFIED", "a", 3, agentNetwork={"access": ["c"]}, config={"memory": local})
    assert ("MemoryStore", "ns", "mem") in await drain(ctl)
    agent_event(ctl, "DELETED", "a", 3, agentNetwork={"access": ["c"]}, config={"memory": local})
    assert {("Agent", "ns", "c"), ("MemoryStore", "ns", "mem")} <= await drain(ctl)


async def test_without_security_a_referrer_queues_only_itself() -> None:
    ctl = controller(security=False)
    agent_event(ctl, "ADDED", "a", 1, agentNetwork={"access": ["b"]}, config={"memory": REMOTE})
    assert await drain(ctl) == {("Agent", "ns", "a")}
