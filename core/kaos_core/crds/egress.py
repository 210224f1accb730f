"""``egress``: where the pods of an MCPServer, a ModelAPI or a MemoryStore may connect.

With the operator's security on, every KAOS pod gets a NetworkPolicy that denies egress by
default: DNS and the KAOS resources a pod references are allowed by the operator, anything
outside the cluster only through this list (an MCP tool's API, a Proxy ModelAPI's provider,
a Hosted ModelAPI's model registry, an external MemoryStore's database). Each entry is an
address block and, optionally, its ports (none: every port). Without security on the list
is not used.

``cluster_egress`` reads the operator's own list (``KAOS_CLUSTER_EGRESS``: ``CIDR:PORT``
entries, for every KAOS pod: the API server, a tracing collector).
"""

from __future__ import annotations

import ipaddress
from typing import Any, Literal

from pydantic import Field, field_validator

from kaos_core.crds.common import CRDModel

EGRESS_MAX = 32
# An IPv4 or IPv6 block in CIDR notation (the operator checks it exactly, ``_cidr``).
CIDR = r"^([0-9]{1,3}(\.[0-9]{1,3}){3}/[0-9]{1,2}|[0-9a-fA-F:.]{2,45}/[0-9]{1,3})$"


class EgressPort(CRDModel):
    """One destination port."""

    port: int = Field(ge=1, le=65535, description="Destination port.")
    protocol: Literal["TCP", "UDP", "SCTP"] = Field(default="TCP", description="Protocol.")


class EgressRule(CRDModel):
    """Connections the pods may open: to an address block, on some ports or on all."""

    cidr: str = Field(
        max_length=64,
        pattern=CIDR,
        description="Destination address block, e.g. 203.0.113.10/32 or 0.0.0.0/0.",
    )
    ports: list[EgressPort] = Field(
        default_factory=list,
        max_length=16,
        description="Destination ports; empty: every port of the block.",
    )

    @field_validator("cidr")
    @classmethod
    def _cidr(cls, value: str) -> str:
        try:
            ipaddress.ip_network(value, strict=True)
        except ValueError:
            raise ValueError(
                f"{value!r} is not an address block (host bits must be zero, e.g. 10.0.0.0/8)"
            ) from None
        return value


def egress_field(what: str) -> Any:
    return Field(
        default_factory=list,
        max_length=EGRESS_MAX,
        description=f"With the operator's security on: where the pods may connect besides DNS"
        f" ({what}); default deny. Entries: an address block and optional ports.",
    )


def cluster_egress(text: str | None) -> list[EgressRule]:
    """``CIDR:PORT`` (or a bare ``CIDR``: every port) entries, comma separated, as rules;
    ``ValueError`` naming the first entry that is neither."""
    rules: list[EgressRule] = []
    for entry in (e.strip() for e in (text or "").split(",")):
        if not entry:
            continue
        # The prefix length ends the block (an IPv6 block's colons come before the slash).
        address, slash, rest = entry.partition("/")
        prefix, _, port = rest.partition(":")
        try:
            if not slash:
                raise ValueError(entry)
            ports = [EgressPort(port=int(port))] if port else []
            rules.append(EgressRule(cidr=f"{address}/{prefix}", ports=ports))
        except ValueError:
            raise ValueError(
                f"{entry!r} is not CIDR or CIDR:PORT (e.g. 172.18.0.2/32:6443)"
            ) from None
    return rules
