"""One test namespace of the test cluster holding the agents' and the memory service's
ServiceAccounts: their identities, their real service-account tokens (as files, the way
a pod's projected token is read) and the callers files the services admit."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tests.support.cluster import SERVICE_ACCOUNT_ISSUER, Cluster
from tests.support.oidc import Provider

# The username prefix the RBAC tests' claim mapping gives OIDC users.
RBAC_PREFIX = "oidc:"


@dataclass
class AgentNamespace:
    cluster: Cluster
    ns: str
    tmp: Path

    def identity(self, sa: str) -> str:
        return f"kaos://agent/{self.ns}/{sa}"

    def mint(self, sa: str, audience: str) -> str:
        args = ["create", "token", sa, "-n", self.ns, "--duration", "30m"]
        if audience:
            args += ["--audience", audience]
        return self.cluster.kubectl(*args).stdout.strip()

    def token_file(self, sa: str, audience: str) -> Path:
        path = self.tmp / f"{sa}-{audience.replace('/', '_') or 'api'}"
        path.write_text(self.mint(sa, audience))
        return path

    def callers(self, name: str, *sas: str) -> Path:
        doc = {
            "callers": [
                {"identity": self.identity(sa), "namespace": self.ns, "serviceAccount": sa}
                for sa in sas
            ]
        }
        path = self.tmp / f"callers-{name}.json"
        path.write_text(json.dumps(doc))
        return path

    @property
    def ca_file(self) -> Path:
        assert self.cluster.workdir is not None, "needs the test cluster's own CA"
        return self.cluster.workdir / "pki" / "ca.crt"

    def verified_env(
        self,
        sa: str,
        provider: Provider,
        audience: str,
        *,
        callers: tuple[str, ...] = (),
        cache_seconds: float = 1,
    ) -> dict[str, object]:
        """The settings of agent ``sa`` that verifies agents (its ServiceAccount's token,
        ``callers`` admitted) and ``provider``'s users of ``audience``, and asks RBAC about
        each user (as ``RBAC_PREFIX``-prefixed usernames)."""
        return {
            "AGENT_IDENTITY": self.identity(sa),
            "AGENT_AUTH_MODE": "jwks",
            "AGENT_AUTH_ISSUER": SERVICE_ACCOUNT_ISSUER,
            "AGENT_AUTH_API_SERVER": self.cluster.server,
            "AGENT_AUTH_CA_FILE": self.ca_file,
            "AGENT_AUTH_TOKEN_FILE": self.token_file(sa, ""),
            "AGENT_CALLERS_FILE": self.callers(sa, *callers),
            "AGENT_USER_ISSUER": provider.issuer,
            "AGENT_USER_AUDIENCE": audience,
            "AGENT_USER_CA_FILE": provider.ca_file,
            "AGENT_RBAC": "true",
            "AGENT_RBAC_USERNAME_PREFIX": RBAC_PREFIX,
            "AGENT_RBAC_CACHE_SECONDS": cache_seconds,
        }
