"""One test namespace of the test cluster holding the agents' and the memory service's
ServiceAccounts: their identities, their real service-account tokens (as files, the way
a pod's projected token is read) and the callers files the services admit."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tests.support.cluster import Cluster


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
