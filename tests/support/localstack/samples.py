"""The sample resources of ``samples/``, validated with the CRD models, and the edits the
stack makes to them (see the package's docstring)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from kaos_core.crds import Agent, MCPServer, MemoryStore, ModelAPI
from kaos_operator.desired.agent import agent_refusal, memory_mode
from kaos_operator.settings import Posture

from tests.support.localstack.errors import StackError
from tests.support.procs import REPO_ROOT

Storage = Literal["local", "external"]
SAMPLES_DIR = REPO_ROOT / "samples"
# The samples carry no namespace (`kubectl apply -n NS -f samples/`); the local stack
# plays them in "default", which only shows in agent identities and cluster URLs.
NAMESPACE = "default"
STORE_SAMPLES: dict[Storage, str] = {
    "local": "memorystore-local.yaml",
    "external": "memorystore-external.yaml",
}


@dataclass(frozen=True)
class Samples:
    """The sample resources the stack runs, validated, plus the edits made to them."""

    model_api: ModelAPI
    mcp_servers: dict[str, MCPServer]
    store: MemoryStore
    agents: dict[str, Agent]  # in start order: peers before the agents that call them
    devmodel_command: list[str]  # the container command of samples/devmodel.yaml
    patches: list[str] = field(default_factory=list)  # human-readable, one per edit
    # The second ModelAPI the store's embedding role is rebound to (None: not rebound).
    embedding_api: ModelAPI | None = None


def _docs(path: Path) -> list[dict[str, Any]]:
    try:
        return [d for d in yaml.safe_load_all(path.read_text()) if d]
    except (OSError, yaml.YAMLError) as exc:
        raise StackError(f"cannot read sample {path}: {exc}") from exc


def _with_namespace(doc: dict[str, Any], namespace: str) -> dict[str, Any]:
    return {**doc, "metadata": {**doc["metadata"], "namespace": namespace}}


def _one(docs: list[dict[str, Any]], kind: str, path: Path) -> dict[str, Any]:
    found = [d for d in docs if d.get("kind") == kind]
    if len(found) != 1:
        raise StackError(f"{path.name}: expected one {kind}, found {len(found)}")
    return found[0]


def _start_order(agents: dict[str, Agent]) -> dict[str, Agent]:
    """Peers first, so a delegating agent starts after the agents it may call."""
    ordered: dict[str, Agent] = {}

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in ordered or name in path or name not in agents:
            return  # a cycle or an absent peer does not order anything
        for peer in agents[name].spec.agent_network.access:
            visit(peer, (*path, name))
        ordered[name] = agents[name]

    for name in agents:
        visit(name, ())
    return ordered


def load_samples(
    storage: Storage = "local", samples_dir: Path = SAMPLES_DIR, namespace: str = NAMESPACE
) -> Samples:
    """The ModelAPI, MCPServers, the MemoryStore of ``storage`` and the Agents, validated."""
    patches: list[str] = []
    api_path = samples_dir / "modelapi.yaml"
    model_api = ModelAPI.model_validate(
        _with_namespace(_one(_docs(api_path), "ModelAPI", api_path), namespace)
    )
    mcp_path = samples_dir / "mcpserver.yaml"
    mcp_servers = {
        s.name: s
        for s in (
            MCPServer.model_validate(_with_namespace(d, namespace))
            for d in _docs(mcp_path)
            if d.get("kind") == "MCPServer"
        )
    }
    store_path = samples_dir / STORE_SAMPLES[storage]
    store_doc = _one(_docs(store_path), "MemoryStore", store_path)
    embedding_api, store_doc = _split_roles(model_api, store_doc, patches)
    store = MemoryStore.model_validate(_with_namespace(store_doc, namespace))
    agents: dict[str, Agent] = {}
    agents_path = samples_dir / "agents.yaml"
    for doc in _docs(agents_path):
        if doc.get("kind") != "Agent":
            continue
        memory = doc.get("spec", {}).get("config", {}).get("memory", {})
        bound = memory.get("memoryStore")
        if bound is not None and bound != store.name:
            # The samples bind the agents to the local store; with --external they use
            # the external one, as a user would edit agents.yaml.
            doc = yaml.safe_load(yaml.safe_dump(doc))  # a deep copy, the file stays as is
            doc["spec"]["config"]["memory"]["memoryStore"] = store.name
            patches.append(
                f"Agent/{doc['metadata']['name']}: spec.config.memory.memoryStore "
                f"{bound} -> {store.name}"
            )
        agent = Agent.model_validate(_with_namespace(doc, namespace))
        agents[agent.name] = agent
    dm_path = samples_dir / "devmodel.yaml"
    deployment = _one(_docs(dm_path), "Deployment", dm_path)
    command = list(deployment["spec"]["template"]["spec"]["containers"][0]["command"])
    samples = Samples(
        model_api=model_api,
        mcp_servers=mcp_servers,
        store=store,
        agents=_start_order(agents),
        devmodel_command=command,
        patches=patches,
        embedding_api=embedding_api,
    )
    _check_references(samples)
    return samples


def _split_roles(
    model_api: ModelAPI, store_doc: dict[str, Any], patches: list[str]
) -> tuple[ModelAPI | None, dict[str, Any]]:
    """The store's embedding role rebound to a second ModelAPI (see the package docstring),
    when both roles name the sample's one; the store document, edited in a copy."""
    roles = store_doc.get("spec", {}).get("models", {})
    names = {r.get("modelAPI") for r in roles.values() if isinstance(r, dict)}
    if names != {model_api.name}:
        return None, store_doc
    name = f"{model_api.name}-embeddings"
    embedding_api = model_api.model_copy(
        update={"metadata": model_api.metadata.model_copy(update={"name": name})}
    )
    doc = yaml.safe_load(yaml.safe_dump(store_doc))  # a deep copy, the file stays as is
    doc["spec"]["models"]["embedding"]["modelAPI"] = name
    patches.append(
        f"MemoryStore/{doc['metadata']['name']}: spec.models.embedding.modelAPI "
        f"{model_api.name} -> {name} (a copy of ModelAPI/{model_api.name})"
    )
    return embedding_api, doc


def _check_references(s: Samples) -> None:
    """What the operator's reconcilers would report as missing dependencies."""
    problems: list[str] = []
    apis = {s.model_api.name} | ({s.embedding_api.name} if s.embedding_api else set())
    for role in (s.store.spec.models.summarization, s.store.spec.models.embedding):
        if role.model_api not in apis:
            problems.append(f"MemoryStore/{s.store.name}: ModelAPI {role.model_api} not found")
    for agent in s.agents.values():
        if agent.spec.model_api != s.model_api.name:
            problems.append(f"Agent/{agent.name}: ModelAPI {agent.spec.model_api} not found")
        for name in agent.spec.mcp_servers:
            if name not in s.mcp_servers:
                problems.append(f"Agent/{agent.name}: MCPServer {name} not found")
        memory = agent.spec.config.memory
        if memory_mode(memory) == "remote" and memory.memory_store != s.store.name:
            problems.append(f"Agent/{agent.name}: MemoryStore {memory.memory_store} not found")
        refusal = agent_refusal(agent, Posture(), s.store.spec.max_read_scope)
        if refusal is not None:
            problems.append(f"Agent/{agent.name}: {refusal.reason}: {refusal.message}")
    if problems:
        raise StackError("the samples do not fit together:\n  " + "\n  ".join(problems))
