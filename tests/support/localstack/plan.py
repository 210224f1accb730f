"""The plan: one process per resource, with exactly the environment the operator's
desired-state functions give its pod, on loopback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kaos_core.crds import ModelAPI
from kaos_operator.desired import (
    AgentContext,
    Endpoint,
    McpContext,
    MemoryStoreContext,
    mcp_auth,
    security,
)
from kaos_operator.desired import agent_env as desired_agent_env
from kaos_operator.desired.agent import agent_endpoint, desired_agent_objects, memory_mode
from kaos_operator.desired.common import MCP_PATH
from kaos_operator.desired.mcpserver import desired_mcpserver_objects, mcp_endpoint, mcp_env
from kaos_operator.desired.memorystore import (
    DSN_ENV,
    desired_memorystore_objects,
    memory_store_endpoint,
    memory_store_env,
)
from kaos_operator.desired.modelapi import model_api_endpoint
from kaos_operator.settings import Images, Posture

from tests.support.localstack.errors import StackError
from tests.support.localstack.overlay import OVERLAY, _secured
from tests.support.localstack.samples import Samples
from tests.support.localstack.spec import LOOPBACK, ProcessSpec
from tests.support.procs import console_script, free_port

# The plan's key of the second development model process (the store's embedding role).
EMBEDDINGS = "devmodel-embeddings"


def _pod_env(objects: list[dict[str, Any]]) -> dict[str, str]:
    dep = next(o for o in objects if o["kind"] == "Deployment")
    out: dict[str, str] = {}
    for item in dep["spec"]["template"]["spec"]["containers"][0].get("env", []):
        if "value" in item:
            out[item["name"]] = item["value"]
        elif "secretKeyRef" in item["valueFrom"]:
            ref = item["valueFrom"]["secretKeyRef"]
            out[item["name"]] = f"<Secret {ref['name']} key {ref['key']}>"
        else:
            out[item["name"]] = f"<pod field {item['valueFrom']['fieldRef']['fieldPath']}>"
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
        clients = tuple(security.agents_using_mcp(name, agents)) if secured else ()
        mcp_objects = desired_mcpserver_objects(
            server, McpContext(images=images, posture=posture, clients=clients)
        )
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
            )
            | (mcp_auth.mcp_security_env(posture) if secured else {}),
            desired_by="mcp_env(server, host=, port=, extra_allowed_hosts=)"
            + (" + mcp_auth.mcp_security_env(posture)" if secured else ""),
            cluster=_pod_env(mcp_objects),
            cluster_url=mcp_endpoint(server.namespace, name),
        )
        if secured and secure_dir is not None:
            _secured(plan[key], "MCPServer", mcp_objects, secure_dir)

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
    check_overlays(plan)
    return plan


def check_overlays(plan: dict[str, ProcessSpec]) -> None:
    """Every variable a process gets beside its desired state is one ``OVERLAY`` explains."""
    for spec_ in plan.values():
        unknown = set(spec_.overlay) - set(OVERLAY)
        if unknown:
            raise StackError(f"{spec_.key}: undocumented overlay keys {sorted(unknown)}")


def _exposed(samples: Samples, peer: str) -> bool:
    """As the reconciler decides: a peer that exists and closed its network is left out."""
    agent = samples.agents.get(peer)
    return agent is None or agent.spec.agent_network.expose
