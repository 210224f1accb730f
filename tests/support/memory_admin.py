"""Admin access to a secured memory service, against the test cluster's real API server.

``admin_world`` makes a namespace with the chart's own memory RBAC applied (the
ClusterRoles ``<release>-kaos-memory-reader/-admin/-review`` and the review binding of the
namespace's ``default`` ServiceAccount, rendered by helm from ``charts/kaos``), and
ServiceAccounts: two agents, a reader and an admin bound (RoleBindings) to the chart's
roles, and one bound to nothing. ``start_secured_memory`` runs a real ``kaos-memory`` in
``jwks`` mode as that namespace's ``default`` ServiceAccount would in its pod: its own
token, the cluster CA, the store's namespace and name. Admin credentials are real tokens
of the API server's own audience (what a kubeconfig holds), minted by TokenRequest.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kaos_core.auth import names
from kaos_core.memory.client import MemoryServiceClient

from tests.fixtures.helm import Helm
from tests.fixtures.memory import MemoryServer, start_memory
from tests.support.cluster import SERVICE_ACCOUNT_ISSUER, Cluster

STORE = "mem"
AGENTS = ("agent-a", "agent-b")
READER, ADMIN, UNBOUND = "reader", "admin", "unbound"


@dataclass
class AdminWorld:
    cluster: Cluster
    ns: str
    release: str
    tmp: Path

    @property
    def roles(self) -> str:
        """The chart's role name prefix for this release (``kaos.fullname`` + ``-memory``)."""
        return f"{self.release}-kaos-memory"

    def identity(self, agent: str) -> str:
        return f"kaos://agent/{self.ns}/{agent}"

    def user(self, sa: str) -> str:
        return f"system:serviceaccount:{self.ns}:{sa}"

    def mint(self, sa: str, *, audience: str = "") -> str:
        """A TokenRequest token; no audience: the API server's own (a kubeconfig's kind)."""
        args = ["create", "token", sa, "-n", self.ns, "--duration", "30m"]
        if audience:
            args += ["--audience", audience]
        return self.cluster.kubectl(*args).stdout.strip()

    def ca_file(self) -> Path:
        if self.cluster.workdir is not None:
            return self.cluster.workdir / "pki" / "ca.crt"
        raw = self.cluster.kubectl(
            "config", "view", "--raw", "--minify", "-o",
            "jsonpath={.clusters[0].cluster.certificate-authority-data}",
        ).stdout  # fmt: skip
        path = self.tmp / "ca.crt"
        path.write_bytes(base64.b64decode(raw))
        return path

    def kubeconfig_for(self, sa: str) -> Path:
        """A kubeconfig whose one context authenticates as ``sa`` with a bearer token."""
        path = self.tmp / f"kubeconfig-{sa}"
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "test",
                    "cluster": {
                        "server": self.cluster.server,
                        "certificate-authority": str(self.ca_file()),
                    },
                }
            ],
            "users": [{"name": sa, "user": {"token": self.mint(sa)}}],
            "contexts": [
                {"name": sa, "context": {"cluster": "test", "user": sa, "namespace": self.ns}}
            ],
            "current-context": sa,
        }
        path.write_text(yaml.safe_dump(doc))
        return path


def _chart_memory_rbac(helm: Helm, release: str, ns: str) -> list[dict[str, Any]]:
    objects = helm.template(
        "posture.securityEnabled=true", f"operator.watchNamespace={ns}", release=release
    )
    return [o for o in objects if "-memory-" in o["metadata"]["name"]]


def _wait_for_default_sa(cluster: Cluster, ns: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        found = cluster.kubectl(
            "get", "serviceaccount", "default", "-n", ns, "--ignore-not-found", "-o", "name"
        ).stdout.strip()
        if found:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the default ServiceAccount of {ns} never appeared")
        time.sleep(0.2)  # polling the controller's work, with a deadline


@contextmanager
def admin_world(cluster: Cluster, helm: Helm, tmp: Path) -> Iterator[AdminWorld]:
    suffix = uuid.uuid4().hex[:6]
    ns, release = f"mem-admin-{suffix}", f"ma{suffix}"
    rbac = _chart_memory_rbac(helm, release, ns)
    world = AdminWorld(cluster, ns, release, tmp)
    cluster.kubectl("create", "namespace", ns)
    try:
        for sa in (*AGENTS, READER, ADMIN, UNBOUND):
            cluster.kubectl("create", "serviceaccount", sa, "-n", ns)
        cluster.kubectl(
            "apply",
            "-f",
            "-",
            input=json.dumps({"kind": "List", "apiVersion": "v1", "items": rbac}),
        )
        for sa, role in ((READER, "reader"), (ADMIN, "admin")):
            cluster.kubectl(
                "create", "rolebinding", f"{sa}-memory", "-n", ns,
                f"--clusterrole={world.roles}-{role}", f"--serviceaccount={ns}:{sa}",
            )  # fmt: skip
        _wait_for_default_sa(cluster, ns)
        yield world
    finally:
        for obj in rbac:
            cluster.kubectl(
                "delete", obj["kind"].lower(), obj["metadata"]["name"], "--ignore-not-found",
                check=False,
            )  # fmt: skip
        cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def start_secured_memory(
    world: AdminWorld,
    model_base_url: str,
    root: Path,
    *,
    api_server: str | None = None,
    **overrides: Any,
) -> MemoryServer:
    """A real ``kaos-memory`` in ``jwks`` mode for the world's store: the agents listed in
    its callers file, admin calls reviewed by the API server (``api_server`` overrides the
    cluster's, e.g. to make it unreachable)."""
    root.mkdir(parents=True, exist_ok=True)
    own_token = root / "own-token"
    own_token.write_text(world.mint("default"))
    callers = root / "callers.json"
    entries = [
        {"identity": world.identity(a), "namespace": world.ns, "serviceAccount": a} for a in AGENTS
    ]
    callers.write_text(json.dumps({"callers": entries}))
    settings: dict[str, Any] = {
        "auth_mode": "jwks",
        "auth_issuer": SERVICE_ACCOUNT_ISSUER,
        "auth_api_server": api_server or world.cluster.server,
        "auth_ca_file": world.ca_file(),
        "auth_token_file": own_token,
        "callers_file": callers,
        "store_namespace": world.ns,
        "store_name": STORE,
        "token_budget": 16,
        **overrides,
    }
    if api_server is not None:
        # Agents' keys come from the real API server even when admin reviews cannot.
        settings["auth_jwks_url"] = world.cluster.server.rstrip("/") + "/openid/v1/jwks"
    return start_memory(
        backend="local", root=root, dsn=None, model_base_url=model_base_url, overrides=settings
    )


def agent_token_file(world: AdminWorld, agent: str) -> Path:
    path = world.tmp / f"token-{agent}"
    path.write_text(world.mint(agent, audience=names.MEMORY_AUDIENCE))
    return path


async def _write_all(
    server: MemoryServer, world: AdminWorld, lines_by_principal: dict[str, tuple[str, ...]]
) -> None:
    for agent in AGENTS:
        async with MemoryServiceClient(
            server.url, token_file=agent_token_file(world, agent), failure_mode="strict"
        ) as client:
            for principal, lines in lines_by_principal.items():
                session = f"{agent}-{principal}-{uuid.uuid4().hex[:6]}"
                for line in lines:
                    await client.write(
                        [("user", line), ("assistant", "Noted.")],
                        session_id=session,
                        principal=principal,
                    )


def _settled(server: MemoryServer, principals: set[str]) -> bool:
    folds = server.db.folds()
    users = {str(p.get("user_id")) for p in server.db.vector_payloads()}
    return (
        bool(folds)
        and all(f["digest_status"] == "done" for f in folds)
        and all(f["extraction_status"] == "done" for f in folds)
        and principals <= users
    )


def remember(
    server: MemoryServer, world: AdminWorld, lines_by_principal: dict[str, tuple[str, ...]]
) -> None:
    """Every agent writes every principal's lines, one session per agent and principal
    (a tiny token budget folds each write); returns once digests and facts are stored."""
    asyncio.run(_write_all(server, world, lines_by_principal))
    deadline = time.monotonic() + 120
    while not _settled(server, set(lines_by_principal)):
        assert time.monotonic() < deadline, f"memory never settled: {server.db.folds()}"
        time.sleep(0.2)  # polling background folds and extraction, with a deadline
