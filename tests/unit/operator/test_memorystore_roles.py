"""A MemoryStore whose model roles name two ModelAPIs: the reconciler resolves each one.

Against the fake context (no cluster): the store's Deployment gets the summarisation
ModelAPI's endpoint and first model for that role and the embedding ModelAPI's for the
other; a role naming a ModelAPI that does not exist holds the store in Waiting, naming it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kaos_core.crds import reasons
from kaos_operator.reconcilers import Outcome, build_reconcilers

from tests.support.operator_context import FakeContext, raw, ready_model_api

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
ROLES = {
    "summarization": {"modelAPI": "hosted"},
    "embedding": {"modelAPI": "local-emb", "dimensions": 64},
}


def pod_env(ctx: FakeContext, name: str) -> dict[str, Any]:
    dep = ctx.objects[("Deployment", "ns", name)]
    container = dep["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


async def test_each_role_is_bound_to_its_own_model_api() -> None:
    ctx = FakeContext()
    ready_model_api(ctx, "hosted")
    emb = ready_model_api(ctx, "local-emb")
    emb["status"]["models"] = ["bge-small"]
    ctx.add(raw("MemoryStore", "mem", {"models": ROLES}))
    rec = build_reconcilers(ctx, clock=lambda: T0)["MemoryStore"]
    assert await rec.reconcile("ns", "mem") == Outcome.OK
    env = pod_env(ctx, "mem")
    assert env["KAOS_MEMORY_MODEL_BASE_URL"] == "http://hosted.ns.svc:4000/v1"
    assert env["KAOS_MEMORY_SUMMARIZATION_MODEL"] == "openai/gpt-4o-mini"
    assert env["KAOS_MEMORY_EMBEDDING_BASE_URL"] == "http://local-emb.ns.svc:4000/v1"
    assert env["KAOS_MEMORY_EMBEDDING_MODEL"] == "bge-small"


async def test_a_missing_embedding_model_api_holds_the_store_naming_it() -> None:
    ctx = FakeContext()
    ready_model_api(ctx, "hosted")
    ctx.add(raw("MemoryStore", "mem", {"models": ROLES}))
    rec = build_reconcilers(ctx, clock=lambda: T0)["MemoryStore"]
    assert await rec.reconcile("ns", "mem") == Outcome.OK
    status = ctx.status_of("MemoryStore", "ns", "mem")
    assert status["phase"] == reasons.PHASE_WAITING
    assert status["message"] == "ModelAPI local-emb not found"
    assert ("Deployment", "ns", "mem") not in ctx.objects
