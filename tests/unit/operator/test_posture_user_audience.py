"""The posture's per-agent user audience (``KAOS_USER_AUDIENCE`` a template): checked when
the operator's settings load, and projected into every Agent and MemoryStore as the
template, which each agent renders into its own audience from the identity it is given."""

from __future__ import annotations

import pytest
from kaos_agent.auth import own_audience
from kaos_agent.settings import AgentSettings
from kaos_core.settings import SettingsError
from kaos_memory.settings import MemorySettings
from kaos_operator.desired import (
    AgentContext,
    MemoryStoreContext,
    desired_agent_objects,
    desired_memorystore_objects,
)
from kaos_operator.settings import OperatorSettings, Posture

from tests.support.operator_objects import IMAGES, agent, by_kind, env_of, store

PER_AGENT = "kaos.dev/agent/{namespace}/{name}"
ISSUER = "https://idp.example.test/realms/kaos"


def test_the_template_is_checked_when_the_operator_starts() -> None:
    loaded = OperatorSettings.from_env({"KAOS_USER_AUDIENCE": PER_AGENT})
    assert loaded.posture.user_audience == PER_AGENT
    assert OperatorSettings.from_env({}).posture.user_audience == "kaos"
    refused = {
        "kaos.dev/agent/{agent}": r"placeholder other than \{namespace\}, \{name\}",
        "kaos.dev/agent/{name": "unmatched brace",
        "{name}": "needs text besides",
    }
    for template, message in refused.items():
        with pytest.raises(SettingsError, match=f"KAOS_USER_AUDIENCE=.*{message}"):
            OperatorSettings.from_env({"KAOS_USER_AUDIENCE": template})


def test_each_agent_renders_its_own_audience_from_the_projected_template() -> None:
    posture = Posture(security_enabled=True, user_issuer=ISSUER, user_audience=PER_AGENT)
    ctx = AgentContext(
        images=IMAGES,
        posture=posture,
        model_api_url="http://llm.team-a.svc:4000",
        model_name="m",
        memory_endpoint="http://mem.team-a.svc:8080",
    )
    rendered = {}
    for name in ("coordinator", "researcher"):
        objects = desired_agent_objects(agent(name, namespace="team-a"), ctx)
        env = env_of(by_kind(objects)["Deployment"])
        assert env["AGENT_USER_AUDIENCE"] == PER_AGENT
        # What the operator writes loads, and names this agent's own audience.
        # The values (POD_NAME is the downward API's, resolved by the kubelet).
        runtime = AgentSettings.from_env({k: v for k, v in env.items() if isinstance(v, str)})
        assert runtime.user_auth is not None
        rendered[name] = own_audience(runtime.user_auth.user_audience, runtime.agent.identity)
    assert rendered == {
        "coordinator": "kaos.dev/agent/team-a/coordinator",
        "researcher": "kaos.dev/agent/team-a/researcher",
    }
    store_ctx = MemoryStoreContext(
        images=IMAGES,
        posture=posture,
        model_api_url="http://llm.team-a.svc:4000",
        summarization_model="m",
        embedding_model="m",
    )
    store_env = env_of(by_kind(desired_memorystore_objects(store(), store_ctx))["Deployment"])
    assert store_env["KAOS_MEMORY_USER_AUDIENCE"] == PER_AGENT
    memory = MemorySettings.from_env(store_env)
    assert memory.user_auth is not None and memory.user_auth.user_audience.per_agent
