"""The whole KAOS stack as processes on loopback, configured by the operator's own functions.

``make run`` (``hack/run_local.py``) plays its conversation against this stack and
``tests/e2e/local`` asserts on it. The sample custom resources under ``samples/`` are
loaded and validated with the CRD models (``kaos_core.crds``); every process is started
with exactly the environment the operator's pure desired-state functions produce for
its resource (``agent_env``, ``memory_store_env``, ``mcp_env``), never a hand-written
list. What differs from the pods the operator would create, and only this:

- Addresses. The contexts those functions take carry loopback URLs, free ports and a
  temporary data dir where a pod has service DNS names, container ports and a volume
  mount (``AgentContext.listen_host``/``listen_port``/``public_url``,
  ``MemoryStoreContext.listen_host``/``listen_port``/``data_dir``, ``mcp_env(host=,
  port=, extra_allowed_hosts=)``): arguments of the functions, not edits of their output.
- The overlay (``OVERLAY``): variables a pod gets from somewhere other than the function.
  ``KAOS_MEMORY_DSN`` of an external store, which a pod reads from the store's
  connection Secret (``secretKeyRef``) and a local process gets as the DSN of a fresh
  database on ``hack/postgres``; with ``secure=True`` the pod paths of the projected
  tokens and the callers files, and the in-cluster API server (see below).
- Secured (``secure=True``, ``make run --secure``): the posture has security on, so every
  process also gets the security variables the Deployment builders add
  (``security.agent_security_env``, ``security.memory_security_env``). What kubelet and the
  API server do for a pod is done by a local service-account issuer
  (``tests.support.devissuer``): it serves its discovery document and keys on loopback
  and mints each agent's tokens (memory and agent audiences, the claims kube-apiserver
  gives a projected token) into files; the callers ConfigMaps the operator would write
  are written to files. The services verify with their real ``jwks`` verifier.
- Verified users (``users=True``, needs ``secure``): the posture also names a user issuer,
  a real OIDC provider (Ory Hydra, ``tests.support.oidc``) on loopback with users alice
  and bob; the agents and the memory service verify users' tokens against it (its CA
  overlaid, where a cluster's provider has a public one), and ``chat`` sends a user's
  token (``Authorization: Bearer``) instead of ``X-Principal``.
- The ModelAPI. LiteLLM is not started: the ModelAPI's endpoint is the development model
  server it proxies, started with the command of ``samples/devmodel.yaml``'s Deployment
  (``--host``/``--port`` moved to loopback).
- External storage with the flag: the agents' ``memoryStore`` is rebound from the local
  sample store to the external one (``Samples.patches`` lists it), as a user would edit
  ``samples/agents.yaml``; the store runs one process where the cluster runs its replicas.
- Per-role model bindings: the store's embedding role is rebound to a second ModelAPI,
  ``<sample ModelAPI>-embeddings`` (a copy of the sample's, so a cluster would run a second
  LiteLLM in front of the same backend), served here by a second development model
  process (``Samples.patches`` lists it): summarisation (digest, extraction) and
  embeddings reach two endpoints, as with local embeddings next to a hosted LLM.

``LocalStack.describe()`` prints all of it, so a reader sees what differs from a cluster.
Variables the developer's shell exports for these runtimes are blanked (empty counts as
unset) so nothing leaks into a process beside what is listed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import aiohttp
import psycopg
import yaml
from kaos_agent.mcp_runtime.settings import McpSettings
from kaos_agent.settings import AgentSettings
from kaos_core.auth import names as auth_names
from kaos_core.crds import Agent, MCPServer, MemoryStore, ModelAPI
from kaos_core.memory.client import MemoryServiceClient
from kaos_core.memory.identity import PRINCIPAL_HEADER, SESSION_HEADER, agent_identity
from kaos_core.telemetry import TelemetrySettings
from kaos_devmodel import DevModelSettings
from kaos_memory.settings import MemorySettings
from kaos_operator.desired import AgentContext, Endpoint, McpContext, MemoryStoreContext, security
from kaos_operator.desired import agent_env as desired_agent_env
from kaos_operator.desired.agent import (
    agent_endpoint,
    agent_refusal,
    desired_agent_objects,
    memory_mode,
)
from kaos_operator.desired.common import MCP_PATH
from kaos_operator.desired.mcpserver import desired_mcpserver_objects, mcp_endpoint, mcp_env
from kaos_operator.desired.memorystore import (
    DSN_ENV,
    desired_memorystore_objects,
    memory_store_endpoint,
    memory_store_env,
)
from kaos_operator.desired.modelapi import model_api_endpoint
from kaos_operator.settings import Images, OperatorSettings, Posture
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tests.support.devissuer import DevIssuer
from tests.support.devissuer import ca_file as _issuer_ca
from tests.support.devmodel import DevModel
from tests.support.memory import MemoryDb
from tests.support.oidc import Provider
from tests.support.postgres import (
    admin_dsn_from_env,
    create_database,
    drop_database,
    is_loopback,
    pg_query,
    server_error,
    start_local_server,
)
from tests.support.procs import REPO_ROOT, ServiceProcess, console_script, free_port, start_service

Storage = Literal["local", "external"]
SAMPLES_DIR = REPO_ROOT / "samples"
# The samples carry no namespace (`kubectl apply -n NS -f samples/`); the local stack
# plays them in "default", which only shows in agent identities and cluster URLs.
NAMESPACE = "default"
LOOPBACK = "127.0.0.1"
# The plan's key of the second development model process (the store's embedding role).
EMBEDDINGS = "devmodel-embeddings"
STORE_SAMPLES: dict[Storage, str] = {
    "local": "memorystore-local.yaml",
    "external": "memorystore-external.yaml",
}

_TOKEN_WHY = (
    "secured: kubelet's projected service-account token in the pod; locally a token the "
    "local issuer minted with the same claims"
)
_CALLERS_WHY = (
    "secured: the callers ConfigMap the operator writes, mounted in the pod; locally its "
    "data written to a file"
)
_API_WHY = (
    "secured: the pod fetches the issuer's keys through the in-cluster API server with "
    "its own token; locally unset, so they come from the local issuer's discovery document"
)
_USER_CA_WHY = (
    "verified users: a cluster's OIDC provider has a publicly trusted certificate; locally "
    "the test provider's own CA"
)
_CA_WHY = (
    "secured: the cluster's CA in the pod; locally the CA of the local issuer's HTTPS certificate"
)
# Every variable a local process gets beside its desired-state function's output, and why.
OVERLAY: dict[str, str] = {
    DSN_ENV: (
        "external store: a pod reads it from the connection Secret (secretKeyRef); "
        "locally the DSN of a fresh database on hack/postgres"
    ),
    auth_names.AGENT_MEMORY_TOKEN_FILE: _TOKEN_WHY,
    auth_names.AGENT_PEER_TOKEN_FILE: _TOKEN_WHY,
    auth_names.AGENT_CALLERS_FILE: _CALLERS_WHY,
    auth_names.MEMORY_CALLERS_FILE: _CALLERS_WHY,
    auth_names.AGENT_AUTH_API_SERVER: _API_WHY,
    auth_names.AGENT_AUTH_CA_FILE: _CA_WHY,
    auth_names.AGENT_AUTH_TOKEN_FILE: _API_WHY,
    auth_names.MEMORY_AUTH_API_SERVER: _API_WHY,
    auth_names.MEMORY_AUTH_CA_FILE: _CA_WHY,
    auth_names.MEMORY_AUTH_TOKEN_FILE: _API_WHY,
    auth_names.AGENT_USER_CA_FILE: _USER_CA_WHY,
    auth_names.MEMORY_USER_CA_FILE: _USER_CA_WHY,
}
# A secured process's API server and own token (unset locally) and the CA it trusts.
_NO_API_SERVER = {
    "Agent": (auth_names.AGENT_AUTH_API_SERVER, auth_names.AGENT_AUTH_TOKEN_FILE),
    "MemoryStore": (auth_names.MEMORY_AUTH_API_SERVER, auth_names.MEMORY_AUTH_TOKEN_FILE),
}
_CA_VARIABLE = {
    "Agent": auth_names.AGENT_AUTH_CA_FILE,
    "MemoryStore": auth_names.MEMORY_AUTH_CA_FILE,
}
_USER_CA_VARIABLE = {
    "Agent": auth_names.AGENT_USER_CA_FILE,
    "MemoryStore": auth_names.MEMORY_USER_CA_FILE,
}


class StackError(RuntimeError):
    """The stack cannot be planned or started; the message says what to do."""


# --- the samples -------------------------------------------------------------------------


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
    """The store's embedding role rebound to a second ModelAPI (see the module docstring),
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


# --- the plan: one process per resource ---------------------------------------------------


@dataclass
class ProcessSpec:
    """How one resource runs locally, and how it would run in a pod."""

    key: str  # Kind/name
    program: str
    port: int
    argv: list[str]
    desired: dict[str, str]  # output of the operator's desired-state function
    desired_by: str  # which function, for the transcript
    cluster: dict[str, str]  # the same resource's pod env (valueFrom shown as a reference)
    overlay: dict[str, str] = field(default_factory=dict)  # keys from OVERLAY only
    ready_path: str = "/readyz"
    timeout: float = 60.0
    cluster_url: str = ""
    notes: list[str] = field(default_factory=list)
    # Secured: files the process reads that a pod gets from a ConfigMap (path -> content).
    files: dict[str, str] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        """Exactly what the process gets (beside blanked shell variables)."""
        return {**self.desired, **self.overlay}

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"


def _pod_env(objects: list[dict[str, Any]]) -> dict[str, str]:
    dep = next(o for o in objects if o["kind"] == "Deployment")
    out: dict[str, str] = {}
    for item in dep["spec"]["template"]["spec"]["containers"][0].get("env", []):
        if "value" in item:
            out[item["name"]] = item["value"]
        else:
            ref = item["valueFrom"]["secretKeyRef"]
            out[item["name"]] = f"<Secret {ref['name']} key {ref['key']}>"
    return out


def _served_model(api: ModelAPI, wanted: str | None) -> str:
    """The model name as the reconcilers resolve it: the named one, else the first served."""
    served = api.status.models or api.spec.served_models()
    if wanted:
        return wanted
    if not served:
        raise StackError(f"ModelAPI {api.name} serves no model")
    return served[0]


def _host_port(argv: list[str], host: str, port: int) -> list[str]:
    """The command with ``--host``/``--port`` values replaced (added when absent)."""
    out = list(argv)
    for flag, value in (("--host", host), ("--port", str(port))):
        if flag in out:
            out[out.index(flag) + 1] = value
        else:
            out += [flag, value]
    return out


def issuer_ca_file(secure_dir: Path) -> Path:
    """The CA of the local issuer of a secured stack whose files are in ``secure_dir``."""
    return _issuer_ca(secure_dir / "issuer")


def _callers_data(objects: list[dict[str, Any]]) -> str:
    """The callers file of a resource's desired callers ConfigMap."""
    cm = next(o for o in objects if o["kind"] == "ConfigMap" and "callers" in o["metadata"]["name"])
    return str(cm["data"][auth_names.CALLERS_FILE])


def user_provider_root(secure_dir: Path) -> Path:
    """Where a secured stack with verified users keeps its OIDC provider's files."""
    return secure_dir / "oidc"


def _secured(
    spec: ProcessSpec,
    kind: str,
    objects: list[dict[str, Any]],
    secure_dir: Path,
    *,
    users: bool = False,
) -> ProcessSpec:
    """``spec`` with the pod's security variables, its pod paths and the in-cluster API
    server overlaid with local files (``OVERLAY``), and its callers file to write."""
    name = spec.key.split("/", 1)[1]
    callers = secure_dir / "callers" / f"{kind.lower()}-{name}.json"
    spec.files[str(callers)] = _callers_data(objects)
    spec.overlay.update(dict.fromkeys(_NO_API_SERVER[kind], ""))
    spec.overlay[_CA_VARIABLE[kind]] = str(issuer_ca_file(secure_dir))
    if users:
        spec.overlay[_USER_CA_VARIABLE[kind]] = str(_issuer_ca(user_provider_root(secure_dir)))
    if kind == "Agent":
        tokens = secure_dir / "tokens" / name
        spec.overlay[auth_names.AGENT_MEMORY_TOKEN_FILE] = str(tokens / "memory")
        spec.overlay[auth_names.AGENT_PEER_TOKEN_FILE] = str(tokens / "agent")
        spec.overlay[auth_names.AGENT_CALLERS_FILE] = str(callers)
    else:
        spec.overlay[auth_names.MEMORY_CALLERS_FILE] = str(callers)
    return spec


def plan_stack(
    samples: Samples,
    *,
    data_root: Path,
    dsn: str | None,
    images: Images,
    posture: Posture,
    secure_dir: Path | None = None,
) -> dict[str, ProcessSpec]:
    """Every process of the stack, in start order, with its environment; with security on
    in ``posture`` the security variables too, and their files under ``secure_dir``."""
    secured = posture.security_enabled
    if secured and secure_dir is None:
        raise StackError("a secured stack needs a directory for its tokens and callers files")
    agents = list(samples.agents.values())
    store = samples.store
    external = store.spec.storage.type == "external"
    if external and dsn is None:
        raise StackError("an external MemoryStore needs a database DSN")
    ports = {"devmodel": free_port(), f"MemoryStore/{store.name}": free_port()}
    ports |= {f"MCPServer/{n}": free_port() for n in samples.mcp_servers}
    ports |= {f"Agent/{n}": free_port() for n in samples.agents}

    def url(key: str) -> str:
        return f"http://{LOOPBACK}:{ports[key]}"

    plan: dict[str, ProcessSpec] = {}
    api = samples.model_api
    model_url = url("devmodel")  # the ModelAPI's endpoint: the server it proxies
    dm_argv = _host_port(samples.devmodel_command, LOOPBACK, ports["devmodel"])
    plan["devmodel"] = ProcessSpec(
        key=f"ModelAPI/{api.name}",
        program=dm_argv[0],
        port=ports["devmodel"],
        argv=[console_script(dm_argv[0]), *dm_argv[1:]],
        desired={},
        desired_by="samples/devmodel.yaml (Deployment command)",
        cluster={},
        ready_path="/readyz",
        cluster_url=model_api_endpoint(api),
        notes=[
            f"cluster: {' '.join(samples.devmodel_command)} behind LiteLLM ({api.spec.mode})",
            f"local:   {' '.join(dm_argv)} serves the ModelAPI directly",
        ],
    )

    # The embedding role's ModelAPI: the second one when the roles were split, its own
    # development model process (the summarisation role keeps the sample's).
    emb_api = samples.embedding_api or api
    emb_url = model_url
    if samples.embedding_api is not None:
        ports[EMBEDDINGS] = free_port()
        emb_argv = _host_port(samples.devmodel_command, LOOPBACK, ports[EMBEDDINGS])
        emb_url = url(EMBEDDINGS)
        plan[EMBEDDINGS] = ProcessSpec(
            key=f"ModelAPI/{emb_api.name}",
            program=emb_argv[0],
            port=ports[EMBEDDINGS],
            argv=[console_script(emb_argv[0]), *emb_argv[1:]],
            desired={},
            desired_by="samples/devmodel.yaml (Deployment command)",
            cluster={},
            ready_path="/readyz",
            cluster_url=model_api_endpoint(emb_api),
            notes=[
                f"the store's embedding role; local: {' '.join(emb_argv)}, a second process",
            ],
        )

    roles = store.spec.models
    store_key = f"MemoryStore/{store.name}"
    store_callers = tuple(security.agents_bound_to(store.name, agents)) if secured else ()
    store_ctx = MemoryStoreContext(
        images=images,
        posture=posture,
        callers=store_callers,
        model_api_url=model_url,
        embedding_model_api_url=emb_url,
        summarization_model=_served_model(api, roles.summarization.model),
        embedding_model=_served_model(emb_api, roles.embedding.model),
        listen_host=LOOPBACK,
        listen_port=ports[store_key],
        data_dir=str(data_root / store.name),
    )
    cluster_store_ctx = MemoryStoreContext(
        images=images,
        posture=posture,
        callers=store_callers,
        model_api_url=model_api_endpoint(api),
        embedding_model_api_url=model_api_endpoint(emb_api),
        summarization_model=store_ctx.summarization_model,
        embedding_model=store_ctx.embedding_model,
    )
    store_objects = desired_memorystore_objects(store, cluster_store_ctx)
    plan[store_key] = ProcessSpec(
        key=store_key,
        program="kaos-memory",
        port=ports[store_key],
        argv=[console_script("kaos-memory")],
        desired=memory_store_env(store, store_ctx)
        | (
            security.memory_security_env(posture) | security.memory_admin_env(store)
            if secured
            else {}
        ),
        desired_by="memory_store_env(store, ctx)"
        + (" + security.memory_security_env(posture) + memory_admin_env(store)" if secured else ""),
        cluster=_pod_env(store_objects),
        overlay={DSN_ENV: dsn} if external and dsn is not None else {},
        timeout=120.0,
        cluster_url=memory_store_endpoint(store.namespace, store.name),
        notes=[f"replicas: {store.spec.effective_replicas()} in a cluster, 1 process here"]
        if store.spec.effective_replicas() > 1
        else [],
    )
    if secured and secure_dir is not None:
        _secured(
            plan[store_key], "MemoryStore", store_objects, secure_dir, users=posture.user_identity
        )

    for name, server in samples.mcp_servers.items():
        key = f"MCPServer/{name}"
        plan[key] = ProcessSpec(
            key=key,
            program="kaos-mcp",
            port=ports[key],
            argv=[console_script("kaos-mcp")],
            desired=mcp_env(
                server,
                host=LOOPBACK,
                port=ports[key],
                extra_allowed_hosts=(f"{LOOPBACK}:*",),
            ),
            desired_by="mcp_env(server, host=, port=, extra_allowed_hosts=)",
            cluster=_pod_env(desired_mcpserver_objects(server, McpContext(images=images))),
            cluster_url=mcp_endpoint(server.namespace, name),
        )

    for name, agent in samples.agents.items():
        key = f"Agent/{name}"
        spec = agent.spec
        remote = memory_mode(spec.config.memory) == "remote"
        peers = [p for p in spec.agent_network.access if _exposed(samples, p)]
        common: dict[str, Any] = {
            "images": images,
            "posture": posture,
            "callers": tuple(security.callers_of_agent(name, agents)) if secured else (),
            "model_name": _served_model(api, spec.model),
            "store_ceiling": store.spec.max_read_scope if remote else None,
        }
        local_ctx = AgentContext(
            model_api_url=model_url,
            mcp_servers=tuple(
                Endpoint(m, url(f"MCPServer/{m}") + MCP_PATH) for m in spec.mcp_servers
            ),
            sub_agents=tuple(Endpoint(p, url(f"Agent/{p}")) for p in peers),
            memory_endpoint=url(store_key) if remote else None,
            listen_host=LOOPBACK,
            listen_port=ports[key],
            public_url=url(key),
            **common,
        )
        cluster_ctx = AgentContext(
            model_api_url=model_api_endpoint(api),
            mcp_servers=tuple(
                Endpoint(m, mcp_endpoint(agent.namespace, m)) for m in spec.mcp_servers
            ),
            sub_agents=tuple(Endpoint(p, agent_endpoint(agent.namespace, p)) for p in peers),
            memory_endpoint=memory_store_endpoint(store.namespace, store.name) if remote else None,
            **common,
        )
        agent_objects = desired_agent_objects(agent, cluster_ctx)
        plan[key] = ProcessSpec(
            key=key,
            program="kaos-agent",
            port=ports[key],
            argv=[console_script("kaos-agent")],
            desired=desired_agent_env(agent, local_ctx)
            | (security.agent_security_env(posture) if secured else {}),
            desired_by="agent_env(agent, ctx)"
            + (" + security.agent_security_env(posture)" if secured else ""),
            cluster=_pod_env(agent_objects),
            cluster_url=agent_endpoint(agent.namespace, name),
        )
        if secured and secure_dir is not None:
            _secured(plan[key], "Agent", agent_objects, secure_dir, users=posture.user_identity)
    for spec_ in plan.values():
        unknown = set(spec_.overlay) - set(OVERLAY)
        if unknown:
            raise StackError(f"{spec_.key}: undocumented overlay keys {sorted(unknown)}")
    return plan


def _exposed(samples: Samples, peer: str) -> bool:
    """As the reconciler decides: a peer that exists and closed its network is left out."""
    agent = samples.agents.get(peer)
    return agent is None or agent.spec.agent_network.expose


# --- blanking the shell's variables -------------------------------------------------------


def runtime_variables(program: str) -> set[str]:
    """Every variable the program reads as a setting (so the shell's can be blanked),
    the tracing ones (``OTEL_*``, read by every KAOS program) included."""
    own = _own_variables(program)
    if not own:
        return own
    return own | {TelemetrySettings.env_name(f) for f in TelemetrySettings.model_fields}


def _own_variables(program: str) -> set[str]:
    if program == "kaos-agent":
        return {AgentSettings.env_name(f) for f in AgentSettings.model_fields}
    if program == "kaos-mcp":
        return {McpSettings.env_name(f) for f in McpSettings.model_fields}
    if program == "kaos-memory":
        names = {MemorySettings.env_name(f) for f in MemorySettings.model_fields}
        return names | {"KAOS_MEMORY_LOCAL_COLLECTION", "KAOS_MEMORY_EXTERNAL_COLLECTION"}
    if program == "kaos-devmodel":
        return {DevModelSettings.env_name(f) for f in DevModelSettings.model_fields}
    return set()


def process_settings_env(pid: int, program: str) -> dict[str, str]:
    """The non-empty settings variables a running process actually has (Linux /proc)."""
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    names = runtime_variables(program)
    out: dict[str, str] = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.decode(errors="replace").partition("=")
        if sep and name in names and value:
            out[name] = value
    return out


# --- the external store's database --------------------------------------------------------


@dataclass
class Database:
    """A fresh database with pgvector on the project's PostgreSQL (``hack/postgres``)."""

    admin_dsn: str
    name: str
    dsn: str

    @classmethod
    def create(cls) -> Database:
        admin = admin_dsn_from_env()
        error = server_error(admin)
        if error is not None and is_loopback(admin):
            error = start_local_server() or server_error(admin)
        if error is not None:
            raise StackError(
                f"PostgreSQL with pgvector is not reachable ({error.splitlines()[0]}).\n"
                "The external MemoryStore needs it: run `make services` first (or "
                '`hack/postgres install && hack/postgres start && eval "$(hack/postgres env)"`).'
            )
        name = f"kaos_run_{uuid.uuid4().hex[:8]}"
        dsn = create_database(admin, name)
        try:
            pg_query(dsn, "CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.Error as exc:
            drop_database(admin, name)
            raise StackError(
                f"pgvector is missing on {admin}: {exc}. `make services` builds it."
            ) from exc
        return cls(admin_dsn=admin, name=name, dsn=dsn)

    def drop(self) -> None:
        drop_database(self.admin_dsn, self.name)


# --- the stack ----------------------------------------------------------------------------


class LocalStack:
    """Starts the plan's processes in order and stops them in reverse; a context manager.

    ``dsn``: the database of an external store (tests pass one from their fixtures);
    without it an external stack creates and later drops a fresh one (``Database``).
    """

    def __init__(
        self,
        root: Path,
        *,
        storage: Storage = "local",
        dsn: str | None = None,
        samples: Samples | None = None,
        log: Callable[[str], None] | None = None,
        secure: bool = False,
        users: bool = False,
    ) -> None:
        self.root = root
        self.storage: Storage = storage
        self.samples = samples or load_samples(storage)
        self._dsn = dsn
        self._database: Database | None = None
        self._log = log or (lambda _line: None)
        # The operator's defaults (images only name what a pod would run; posture: open).
        settings = OperatorSettings.from_env({})
        self.images = settings.images
        self.posture = settings.posture
        # Secured: security on, tokens from a local issuer (see the module's docstring).
        self.issuer = DevIssuer(root / "secured" / "issuer") if secure else None
        if users and not secure:
            raise StackError("verified users need the secured posture (secure=True)")
        # Verified users: a real OIDC provider, started first (its issuer is in the posture).
        self.provider = Provider(user_provider_root(root / "secured")) if users else None
        self._user_tokens: dict[str, str] = {}
        if self.issuer is not None:
            self.posture = Posture(
                security_enabled=True,
                token_verification="jwks",
                service_account_issuer=self.issuer.url,
            )
        self.plan: dict[str, ProcessSpec] = {}
        self.procs: dict[str, ServiceProcess] = {}

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> LocalStack:
        try:
            dsn = self._dsn
            if self.storage == "external" and dsn is None:
                self._database = Database.create()
                dsn = self._database.dsn
            if self.provider is not None:
                self._log(f"   starting {'OIDC provider (users)':<28} Ory Hydra on loopback")
                self.provider.start()
                self.posture = dataclasses.replace(
                    self.posture,
                    user_issuer=self.provider.issuer,
                    user_audience=auth_names.DEFAULT_USER_AUDIENCE,
                )
            self.plan = plan_stack(
                self.samples,
                data_root=self.root / "data",
                dsn=dsn,
                images=self.images,
                posture=self.posture,
                secure_dir=None if self.issuer is None else self.root / "secured",
            )
            self._replan()
            if self.issuer is not None:
                self._log(f"   starting {'service-account issuer':<28} local on {self.issuer.url}")
                self.issuer.start()
                self._write_secured_files()
            for key, spec in self.plan.items():
                self._log(f"   starting {spec.key:<28} {spec.program} on {spec.url}")
                blank = dict.fromkeys(runtime_variables(spec.program), "")
                self.procs[key] = start_service(
                    key.replace("/", "-").lower(),
                    spec.argv,
                    port=spec.port,
                    env={**blank, **spec.env},
                    log_dir=self.root / "logs",
                    ready_path=spec.ready_path,
                    timeout=spec.timeout,
                )
                self._started(key)
        except BaseException:
            self.stop()
            raise
        return self

    def _replan(self) -> None:
        """A variant's edits of the plan before anything starts (``realstack``)."""

    def _started(self, key: str) -> None:
        """A variant's work once the process of ``key`` answers (``realstack``)."""

    def stop(self) -> dict[str, int | None]:
        """Stop every process (newest first); their exit codes by key."""
        codes: dict[str, int | None] = {}
        for key in reversed(list(self.procs)):
            proc = self.procs[key]
            try:
                codes[key] = proc.stop(timeout=30)
            except (OSError, subprocess.SubprocessError):
                # A process that cannot be stopped must not keep the others running.
                proc.kill()
                codes[key] = None
        self.procs.clear()
        if self.issuer is not None:
            self.issuer.stop()
        if self.provider is not None:
            self.provider.stop()
        if self._database is not None:
            with contextlib.suppress(Exception):
                self._database.drop()
            self._database = None
        return codes

    def __enter__(self) -> LocalStack:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- access ------------------------------------------------------------------------------

    @property
    def store(self) -> MemoryStore:
        return self.samples.store

    @property
    def store_key(self) -> str:
        return f"MemoryStore/{self.store.name}"

    def url(self, key: str) -> str:
        return self.plan[key].url

    def agent_url(self, name: str) -> str:
        return self.url(f"Agent/{name}")

    @property
    def memory_url(self) -> str:
        return self.url(self.store_key)

    @property
    def devmodel(self) -> DevModel:
        return DevModel(url=self.url("devmodel"))

    @property
    def embedding_devmodel(self) -> DevModel:
        """The store's embedding endpoint (the devmodel itself when the roles share it)."""
        return DevModel(url=self.url(EMBEDDINGS if EMBEDDINGS in self.plan else "devmodel"))

    def identity(self, agent: str) -> str:
        return agent_identity(self.samples.agents[agent].namespace, agent)

    def memory_client(self, agent: str | None = None) -> MemoryServiceClient:
        """A client of the store as ``agent`` would call it (None: an administrator);
        secured, it presents the agent's memory token as the agent does."""
        return MemoryServiceClient(
            self.memory_url,
            agent_identity=None if agent is None else self.identity(agent),
            token_file=None if agent is None else self.token_file(agent, "memory"),
        )

    def user_token(self, principal: str | None) -> str | None:
        """A user's access token from the stack's OIDC provider (None: no verified users),
        obtained once per user the way a gateway would."""
        if self.provider is None or principal is None:
            return None
        if principal not in self._user_tokens:
            tokens = self.provider.token(principal, audience=auth_names.DEFAULT_USER_AUDIENCE)
            self._user_tokens[principal] = tokens.access_token
        return self._user_tokens[principal]

    def token_file(self, agent: str, audience: Literal["memory", "agent"]) -> Path | None:
        """The file an agent reads its token for ``audience`` from (None: not secured)."""
        variable = (
            auth_names.AGENT_MEMORY_TOKEN_FILE
            if audience == "memory"
            else auth_names.AGENT_PEER_TOKEN_FILE
        )
        value = self.plan[f"Agent/{agent}"].overlay.get(variable)
        return None if value is None else Path(value)

    def _write_secured_files(self) -> None:
        """The callers files, and each agent's tokens minted by the local issuer."""
        assert self.issuer is not None
        for key, spec in self.plan.items():
            for path, content in spec.files.items():
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                Path(path).write_text(content)
            if not key.startswith("Agent/"):
                continue
            agent = self.samples.agents[key.split("/", 1)[1]]
            for variable, audience in (
                (auth_names.AGENT_MEMORY_TOKEN_FILE, auth_names.MEMORY_AUDIENCE),
                (auth_names.AGENT_PEER_TOKEN_FILE, auth_names.AGENT_AUDIENCE),
            ):
                self.issuer.write_token(
                    Path(spec.overlay[variable]),
                    agent.namespace,
                    security.agent_service_account(agent.name),
                    audience,
                )

    @property
    def memory_db(self) -> MemoryDb:
        spec = self.plan[self.store_key]
        return MemoryDb(
            backend=self.store.spec.storage.type,
            data_dir=Path(spec.env["KAOS_MEMORY_DATA_DIR"]),
            dsn=spec.env.get(DSN_ENV),
            collection=self.store.spec.collection,
        )

    # -- the transcript of the setup ---------------------------------------------------------

    def describe(self) -> Iterator[str]:
        """What runs, from which resource, and everything that differs from a cluster."""
        s = self.samples
        yield f"resources (samples/, validated with kaos_core.crds, namespace {NAMESPACE}):"
        yield f"   ModelAPI/{s.model_api.name}, " + ", ".join(
            ([f"ModelAPI/{s.embedding_api.name}"] if s.embedding_api else [])
            + [f"MCPServer/{n}" for n in s.mcp_servers]
            + [f"MemoryStore/{s.store.name} ({s.store.spec.storage.type})"]
        )
        yield "   " + ", ".join(
            f"Agent/{n} (peers: {', '.join(a.spec.agent_network.access) or 'none'})"
            for n, a in s.agents.items()
        )
        for patch in s.patches:
            yield f"   edited: {patch}"
        yield "loopback instead of service DNS:"
        for spec in self.plan.values():
            yield f"   {spec.key:<28} {spec.cluster_url:<44} -> {spec.url}"
        for spec in self.plan.values():
            yield f"{spec.key}: {spec.program}, env = {spec.desired_by}"
            for note in spec.notes:
                yield f"   {note}"
            if not spec.desired:
                continue
            diff = [
                (k, spec.cluster.get(k, "(unset)"), v)
                for k, v in spec.desired.items()
                if spec.cluster.get(k) != v
            ]
            same = len(spec.desired) - len(diff)
            yield f"   {len(spec.desired)} variables; {same} as in the pod, loopback context:"
            for k, pod, local in diff:
                if local.startswith(pod):  # a list the local process extends
                    yield f"      {k:<34} the pod's + {_short(local[len(pod) :].lstrip(','))}"
                else:
                    yield f"      {k:<34} {_short(pod)} -> {_short(local)}"
            for k in sorted(set(spec.cluster) - set(spec.desired) - set(spec.overlay)):
                yield f"      {k:<34} {_short(spec.cluster[k])} -> (not set locally)"
            said: set[str] = set()
            for k, v in spec.overlay.items():
                pod = spec.cluster.get(k, "(unset)")
                local = _short(_redact(k, v) or "(unset)")
                yield f"   overlay: {_short(k, 34):<34} {_short(pod)} -> {local}"
                if OVERLAY[k] not in said:  # each reason once per process
                    said.add(OVERLAY[k])
                    yield f"            ({OVERLAY[k]})"


def _short(value: str, width: int = 40) -> str:
    value = value.replace("\n", "\\n")
    return value if len(value) <= width else value[: width - 1] + "…"


def _redact(key: str, value: str) -> str:
    if key != DSN_ENV:
        return value
    # No password is printed, should the developer's DSN carry one.
    try:
        params = conninfo_to_dict(value)
    except psycopg.ProgrammingError:
        return "(unparsable DSN)"
    if "password" in params:
        params["password"] = "***"
        return make_conninfo(**{k: str(v) for k, v in params.items()})
    return value


# --- talking to the agents ----------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    status: int
    text: str
    session: str | None
    body: dict[str, Any]


async def chat(
    http: aiohttp.ClientSession,
    agent_url: str,
    text: str,
    *,
    session: str | None = None,
    principal: str | None = None,
    user_token: str | None = None,
    timeout: float = 120.0,  # noqa: ASYNC109  (one request's budget, passed to aiohttp)
) -> Reply:
    """One user message to an agent's ``/v1/chat/completions`` (no client history); with
    ``user_token`` the user is that token's (``Authorization: Bearer``), not a header."""
    headers: dict[str, str] = {}
    if session is not None:
        headers[SESSION_HEADER] = session
    if user_token is not None:
        headers["Authorization"] = f"Bearer {user_token}"
    elif principal is not None:
        headers[PRINCIPAL_HEADER] = principal
    body = {"model": "agent", "messages": [{"role": "user", "content": text}]}
    async with http.post(
        f"{agent_url}/v1/chat/completions",
        json=body,
        headers=headers,
        timeout=aiohttp.ClientTimeout(total=timeout),
    ) as resp:
        doc: dict[str, Any] = await resp.json(content_type=None)
        answer = ""
        if resp.status == 200:
            answer = str(doc["choices"][0]["message"]["content"] or "")
        return Reply(resp.status, answer, resp.headers.get(SESSION_HEADER), doc)


def environ_of(proc: ServiceProcess) -> dict[str, str]:
    """The settings variables the running process really has (see ``process_settings_env``)."""
    program = Path(proc.proc.args[0] if isinstance(proc.proc.args, list) else "").name
    return process_settings_env(proc.proc.pid, program)


# --- the scripted model -------------------------------------------------------------------

# What the development model answers in the conversation of ``make run`` and the tests
# (rules of ``kaos_devmodel.script``; anything else is echoed).
DELEGATED_MESSAGE = "Please shout: hello from Lisbon"
WORD_COUNT_TEXT = "memory is augmentation never a hard dependency"
# A long answer (about 1,500 tokens by the store's estimate): three of them push a
# session's window past the sample store's 4,096-token budget, so it folds.
STORY = " ".join(
    f"In part {i} the yellow tram climbs past the tiled houses to the castle while the "
    "river glitters far below."
    for i in range(1, 61)
)
SCRIPT: list[dict[str, Any]] = [
    {
        "match": r"^Ask the researcher",
        "tool_call": {
            "name": "delegate_to_researcher",
            "arguments": {"message": DELEGATED_MESSAGE},
        },
    },
    {
        "match": r"^Please shout: ",
        "tool_call": {"name": "shout", "arguments": {"text": "hello from Lisbon"}},
    },
    {"after_tool": "shout", "reply": "shout returned {result}"},
    {"after_tool": "delegate_to_researcher", "reply": "The researcher answered: {result}"},
    {
        "match": r"^How many words",
        "tool_call": {"name": "word_count", "arguments": {"text": WORD_COUNT_TEXT}},
    },
    {"after_tool": "word_count", "reply": "word_count returned {result}"},
    {"match": r"^Tell me the long story", "reply": STORY},
    {
        "match": r"^Where do I live",
        "tool_call": {"name": "search_memory", "arguments": {"query": "where do I live"}},
    },
    {"after_tool": "search_memory", "reply": "From long-term memory:\n{result}"},
]


def model_request(requests: list[dict[str, Any]], prompt: str) -> dict[str, Any] | None:
    """The newest model request the devmodel recorded whose last user message is ``prompt``."""
    for req in reversed(requests):
        users = [m for m in req["messages"] if m["role"] == "user"]
        if users and users[-1]["content"] == prompt:
            found: dict[str, Any] = req
            return found
    return None
