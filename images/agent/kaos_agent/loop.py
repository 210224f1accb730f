"""Builds the pydantic-ai agent: the model, instructions and toolsets of one agent."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import aiohttp
from pydantic_ai import Agent
from pydantic_ai.capabilities.instrumentation import Instrumentation
from pydantic_ai.models import Model
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.profiles import ModelProfile
from pydantic_ai.settings import ModelSettings as PydanticModelSettings
from pydantic_ai.toolsets import AbstractToolset

from kaos_agent.audit.record import Auditor
from kaos_agent.context import RunDeps
from kaos_agent.delegation import PeerClient, delegation_toolset
from kaos_agent.memory.remote import RemoteMemory
from kaos_agent.memory.tools import memory_toolset
from kaos_agent.metrics import AgentMetrics
from kaos_agent.model_client import ChatCompletionsModel
from kaos_agent.settings import AgentMemorySettings, DelegationSettings, ModelSettings
from kaos_agent.toolsets import GuardedToolset


def openai_model(settings: ModelSettings, http: aiohttp.ClientSession) -> Model:
    """The OpenAI-compatible model of the ModelAPI, sent over ``http``."""
    return ChatCompletionsModel(
        settings.name,
        base_url=settings.base_url,
        api_key=settings.api_key,
        http=http,
        profile=_token_cap_as_max_tokens,
    )


def _token_cap_as_max_tokens(profile: ModelProfile) -> ModelProfile:
    # A token cap goes as ``max_tokens``, which every OpenAI-compatible server (Ollama,
    # LiteLLM, vLLM) reads; not all of them read ``max_completion_tokens``.
    return cast(ModelProfile, {**profile, "openai_chat_supports_max_completion_tokens": False})


def peer_instructions(delegation: DelegationSettings) -> str:
    if not delegation.peers:
        return ""
    names = ", ".join(p.name for p in delegation.peers)
    return f"\n\nYou can delegate tasks to these agents with the delegate_to_<name> tools: {names}."


def agent_toolsets(
    *,
    tools: Sequence[GuardedToolset],
    delegation: DelegationSettings,
    peer_client: PeerClient,
    memory: AgentMemorySettings,
    remote_memory: RemoteMemory | None,
    metrics: AgentMetrics,
    audit: Auditor | None = None,
) -> list[AbstractToolset[RunDeps]]:
    """The loop's toolsets: tool servers, then delegation, then memory, each guarded; each
    call recorded in ``audit`` (delegations by the delegation tools themselves)."""
    toolsets: list[AbstractToolset[RunDeps]] = list(tools)
    if delegation.peers:
        toolsets.append(
            GuardedToolset(
                delegation_toolset(
                    delegation.peers,
                    peer_client,
                    max_depth=delegation.max_depth,
                    metrics=metrics,
                    audit=audit,
                ),
                label_text="delegation",
                metrics=metrics,
            )
        )
    if memory.tools != "none" and remote_memory is not None:
        toolsets.append(
            GuardedToolset(
                memory_toolset(remote_memory, memory.entitled_levels, memory.tools),
                label_text="memory",
                metrics=metrics,
                audit=audit,
            )
        )
    return toolsets


def request_settings(settings: ModelSettings) -> PydanticModelSettings:
    """The settings every model request of the loop carries."""
    return {"timeout": settings.timeout_seconds, **settings.sampling.request_settings()}


def build_agent(
    *,
    name: str,
    instructions: str,
    model: Model,
    model_settings: ModelSettings,
    delegation: DelegationSettings,
    toolsets: Sequence[AbstractToolset[RunDeps]],
    instrument: InstrumentationSettings | None = None,
) -> Agent[RunDeps, str]:
    return Agent(
        model,
        instructions=instructions + peer_instructions(delegation),
        deps_type=RunDeps,
        name=name,
        toolsets=list(toolsets),
        retries=2,
        model_settings=request_settings(model_settings),
        # pydantic-ai's GenAI spans when tracing is on; off, not even a no-op capability.
        capabilities=[Instrumentation(settings=instrument)] if instrument is not None else None,
    )
