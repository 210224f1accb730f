"""A resource as a local process: its command, port and environment, beside its pod's."""

from __future__ import annotations

from dataclasses import dataclass, field

LOOPBACK = "127.0.0.1"


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
