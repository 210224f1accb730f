"""An Agent whose model cannot call tools, and an Agent's sampling settings.

The ModelAPI's ``status.modelCapabilities`` (served model -> capabilities, as Ollama
reports them) decides: an agent offered tools whose model is known to lack ``tools`` gets
``ToolsSupported=False`` (reason ``ModelCannotCallTools``, one Warning Event), starts
with ``MODEL_TOOLS=off`` and stays Ready; known with ``tools``, ``ToolsSupported=True``;
unknown, or no tools offered: no condition and no variable. ``spec.config.modelSettings``
becomes the runtime's sampling variables.
"""

from __future__ import annotations

from typing import Any

import pytest
from kaos_agent.settings import AgentSettings
from kaos_core.crds import reasons
from kaos_operator.desired import AgentContext, agent_env
from kaos_operator.reconcilers import Outcome, build_reconcilers
from pydantic import ValidationError

from tests.support.operator_context import FakeContext, raw, ready_model_api
from tests.support.operator_objects import IMAGES, OPEN, agent

MODEL = "openai/gpt-4o-mini"
WITH_PEER = {"modelAPI": "llm", "agentNetwork": {"access": ["helper"]}}


def setup(spec: dict[str, Any], capabilities: dict[str, list[str]] | None) -> FakeContext:
    ctx = FakeContext()
    api = ready_model_api(ctx)
    if capabilities is not None:
        api["status"]["modelCapabilities"] = capabilities
    ctx.add(raw("Agent", "a1", spec))
    return ctx


async def reconcile(ctx: FakeContext) -> dict[str, Any]:
    rec = build_reconcilers(ctx)["Agent"]
    assert await rec.reconcile("ns", "a1") == Outcome.OK
    return ctx.status_of("Agent", "ns", "a1")


def condition(status: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in status.get("conditions") or [] if c["type"] == type_), None)


def deployed_env(ctx: FakeContext) -> dict[str, str]:
    dep = ctx.objects[("Deployment", "ns", "a1")]
    return {
        e["name"]: e.get("value", "")
        for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]
    }


async def test_a_model_without_tools_starts_the_agent_without_them_and_warns() -> None:
    ctx = setup(WITH_PEER, {MODEL: ["completion"]})
    await reconcile(ctx)
    assert deployed_env(ctx)["MODEL_TOOLS"] == "off"
    ctx.deployment_available("ns", "a1")
    status = await reconcile(ctx)
    tools = condition(status, reasons.TOOLS_SUPPORTED)
    assert tools is not None
    assert (tools["status"], tools["reason"]) == ("False", reasons.MODEL_CANNOT_CALL_TOOLS)
    assert f"model {MODEL} of ModelAPI llm cannot call tools" in tools["message"]
    assert "capabilities: completion" in tools["message"] and "peer agents" in tools["message"]
    # The agent still answers, without tools: Ready.
    assert status["phase"] == reasons.PHASE_READY
    ready = condition(status, reasons.READY)
    assert ready is not None and ready["status"] == "True"
    # One Warning Event, not one per reconcile.
    await reconcile(ctx)
    warnings = [e for e in ctx.events if e.reason == reasons.MODEL_CANNOT_CALL_TOOLS]
    assert len(warnings) == 1 and warnings[0].type_ == "Warning"
    assert warnings[0].message == tools["message"]


async def test_a_model_with_tools_keeps_them() -> None:
    ctx = setup(WITH_PEER, {MODEL: ["completion", "tools"]})
    status = await reconcile(ctx)
    tools = condition(status, reasons.TOOLS_SUPPORTED)
    assert tools is not None
    assert (tools["status"], tools["reason"]) == ("True", reasons.MODEL_CALLS_TOOLS)
    assert "MODEL_TOOLS" not in deployed_env(ctx)
    assert not [e for e in ctx.events if e.type_ == "Warning"]


@pytest.mark.parametrize(
    ("spec", "capabilities"),
    [
        (WITH_PEER, None),  # the ModelAPI reports no capabilities
        (WITH_PEER, {"other-model": ["completion"]}),  # not for this model: unknown
        ({"modelAPI": "llm"}, {MODEL: ["completion"]}),  # no tools offered
    ],
    ids=["unknown", "other-model", "no-tools"],
)
async def test_unknown_or_no_tools_sets_nothing(
    spec: dict[str, Any], capabilities: dict[str, list[str]] | None
) -> None:
    ctx = setup(spec, capabilities)
    status = await reconcile(ctx)
    assert condition(status, reasons.TOOLS_SUPPORTED) is None
    assert "MODEL_TOOLS" not in deployed_env(ctx)


async def test_the_model_learning_tools_gives_them_back() -> None:
    ctx = setup(WITH_PEER, {MODEL: ["completion"]})
    await reconcile(ctx)
    assert deployed_env(ctx)["MODEL_TOOLS"] == "off"
    ctx.resources[("ModelAPI", "ns", "llm")]["status"]["modelCapabilities"] = {
        MODEL: ["completion", "tools"]
    }
    status = await reconcile(ctx)
    assert "MODEL_TOOLS" not in deployed_env(ctx)
    tools = condition(status, reasons.TOOLS_SUPPORTED)
    assert tools is not None and tools["status"] == "True"


async def test_a_vanished_model_api_keeps_tools_off() -> None:
    ctx = setup(WITH_PEER, {MODEL: ["completion"]})
    await reconcile(ctx)
    del ctx.resources[("ModelAPI", "ns", "llm")]
    await reconcile(ctx)
    assert deployed_env(ctx)["MODEL_TOOLS"] == "off"


def context(**kw: Any) -> AgentContext:
    return AgentContext(
        images=IMAGES, posture=OPEN, model_api_url="http://llm.ns.svc:4000", model_name=MODEL, **kw
    )


def test_model_settings_become_sampling_variables_the_runtime_loads() -> None:
    a = agent(
        "a1",
        config={"modelSettings": {"temperature": 0, "maxTokens": 128, "topP": 0.9, "seed": 7}},
    )
    env = agent_env(a, context())
    assert {
        k: env[k]
        for k in env
        if k.startswith("MODEL_") and k not in ("MODEL_API_URL", "MODEL_NAME")
    } == {
        "MODEL_TEMPERATURE": "0.0",
        "MODEL_MAX_TOKENS": "128",
        "MODEL_TOP_P": "0.9",
        "MODEL_SEED": "7",
    }
    sampling = AgentSettings.from_env(env).model.sampling
    assert (sampling.temperature, sampling.max_tokens, sampling.top_p, sampling.seed) == (
        0.0,
        128,
        0.9,
        7,
    )
    # Only what is set is sent; tools off reaches the runtime.
    env = agent_env(
        agent("a1", config={"modelSettings": {"temperature": 0.2}}), context(tools_off=True)
    )
    assert env["MODEL_TEMPERATURE"] == "0.2" and env["MODEL_TOOLS"] == "off"
    assert "MODEL_SEED" not in env and "MODEL_MAX_TOKENS" not in env
    assert AgentSettings.from_env(env).model.tools == "off"


def test_no_model_settings_sets_no_sampling() -> None:
    env = agent_env(agent("a1"), context())
    assert not {
        "MODEL_TEMPERATURE",
        "MODEL_MAX_TOKENS",
        "MODEL_TOP_P",
        "MODEL_SEED",
        "MODEL_TOOLS",
    } & set(env)


@pytest.mark.parametrize(
    "settings",
    [{"temperature": 2.5}, {"temperature": -0.1}, {"topP": 1.5}, {"maxTokens": 0}, {"seed": -1}],
)
def test_model_settings_out_of_range_are_refused(settings: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        agent("a1", config={"modelSettings": settings})
