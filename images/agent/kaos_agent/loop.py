"""Builds the pydantic-ai agent: the OpenAI-compatible model, instructions and toolsets."""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.toolsets import AbstractToolset

from kaos_agent.context import RunDeps
from kaos_agent.delegation import PeerClientFactory, delegation_toolset
from kaos_agent.memory.remote import RemoteMemory
from kaos_agent.memory.tools import memory_toolset
from kaos_agent.metrics import AgentMetrics
from kaos_agent.settings import AgentSettings
from kaos_agent.toolsets import GuardedToolset


def peer_instructions(settings: AgentSettings) -> str:
    if not settings.sub_agents:
        return ""
    names = ", ".join(p.name for p in settings.sub_agents)
    return f"\n\nYou can delegate tasks to these agents with the delegate_to_<name> tools: {names}."


def build_agent(
    settings: AgentSettings,
    metrics: AgentMetrics,
    *,
    peer_client: PeerClientFactory,
    remote_memory: RemoteMemory | None,
    mcp: list[GuardedToolset],
) -> Agent[RunDeps, str]:
    provider = OpenAIProvider(base_url=settings.model_base_url, api_key=settings.model_api_key)
    model = OpenAIChatModel(settings.model_name, provider=provider)
    toolsets: list[AbstractToolset[RunDeps]] = list(mcp)
    if settings.sub_agents:
        toolsets.append(
            GuardedToolset(
                delegation_toolset(
                    settings.sub_agents,
                    peer_client,
                    max_depth=settings.max_delegation_depth,
                    metrics=metrics,
                ),
                label_text="delegation",
                metrics=metrics,
            )
        )
    if settings.memory_tools and remote_memory is not None:
        toolsets.append(
            GuardedToolset(
                memory_toolset(remote_memory, settings.entitled_levels),
                label_text="memory",
                metrics=metrics,
            )
        )
    return Agent(
        model,
        instructions=settings.instructions + peer_instructions(settings),
        deps_type=RunDeps,
        name=settings.name,
        toolsets=toolsets,
        retries=2,
        model_settings={"timeout": settings.model_timeout_seconds},
    )
