"""What the kinds that keep data share: the size of their claim and the Secret holding a
PostgreSQL connection string."""

from __future__ import annotations

from pydantic import Field

from kaos_core.crds.common import CRDModel

# A Kubernetes resource quantity such as 1Gi or 500M.
QUANTITY = r"^[0-9]+(\.[0-9]+)?([EPTGMK]i?|[mk])?$"


class ConnectionSecretRef(CRDModel):
    """The Secret holding the PostgreSQL connection string (DSN)."""

    name: str = Field(
        min_length=1,
        max_length=253,
        description="The Secret, in the store's namespace (the operator never reads it; the "
        "pods get it through secretKeyRef).",
    )
    key: str = Field(
        default="dsn",
        min_length=1,
        max_length=253,
        description="Its key holding the DSN, e.g. postgresql://user:pass@host:5432/db.",
    )
