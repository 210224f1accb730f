"""KEDA for the autoscaling tests: its CRDs and binaries as ``hack/keda-build`` caches them.

``keda_crds`` fetches only the CRDs when they are missing (``hack/keda-build --crds``, a
small module download, no build): a cluster that serves ScaledObjects is all the
operator's side needs. ``keda_binaries`` needs the full build (``hack/keda-build``).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.procs import REPO_ROOT, free_port

BUILD_SCRIPT = REPO_ROOT / "hack" / "keda-build"
SCALED_OBJECT_CRD = "keda.sh_scaledobjects.yaml"


@dataclass(frozen=True)
class KedaPaths:
    operator: Path
    adapter: Path
    crds: Path


def keda_paths() -> KedaPaths:
    out = subprocess.run(
        [str(BUILD_SCRIPT), "--print-env"], check=True, capture_output=True, text=True
    ).stdout
    env = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return KedaPaths(
        Path(env["KAOS_KEDA"]), Path(env["KAOS_KEDA_ADAPTER"]), Path(env["KAOS_KEDA_CRDS"])
    )


def keda_crds(*names: str) -> list[dict[str, Any]]:
    """KEDA's CRDs (those named, else all), fetched once into the cache."""
    crds = keda_paths().crds
    if not (crds / SCALED_OBJECT_CRD).is_file():
        subprocess.run([str(BUILD_SCRIPT), "--crds"], check=True, timeout=600)
    files = [crds / n for n in names] if names else sorted(crds.glob("*.yaml"))
    return [yaml.safe_load(f.read_text()) for f in files]


def keda_binaries() -> KedaPaths:
    """The built binaries (``make services`` builds them, after Kubernetes, whose Go build
    cache the build reuses); a test is skipped where they are not built."""
    paths = keda_paths()
    for binary in (paths.operator, paths.adapter):
        if not binary.is_file():
            pytest.skip(f"{binary.name} is not built: run hack/keda-build")
    return paths


def grpc_certs(directory: Path) -> Path:
    """A self-signed key pair for KEDA's gRPC between its operator and its metrics adapter
    (mutual TLS; the operator will not start without one), valid for ``localhost`` (the
    authority the adapter is told to expect)."""
    directory.mkdir(parents=True, exist_ok=True)
    key, cert = directory / "tls.key", directory / "tls.crt"
    argv = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    argv += ["-subj", "/CN=keda-operator", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"]
    argv += ["-keyout", str(key), "-out", str(cert)]
    subprocess.run(argv, check=True, capture_output=True, timeout=60)
    (directory / "ca.crt").write_bytes(cert.read_bytes())
    return directory


def operator_args(
    binary: Path, *, bind: str, probe: int, grpc: int, certs: Path, ca_dir: Path
) -> list[str]:
    """KEDA's operator: its probe and gRPC on ``bind``, its own metrics on loopback."""
    return [
        str(binary),
        f"--health-probe-bind-address={bind}:{probe}",
        f"--metrics-bind-address=127.0.0.1:{free_port()}",
        f"--metrics-service-bind-address={bind}:{grpc}",
        f"--cert-dir={certs}",
        f"--ca-dir={ca_dir}",
        "--leader-elect=false",
        "--enable-cert-rotation=false",
        "--zap-log-level=info",
    ]


def operator_env(kubeconfig: Path, watch_namespace: str, keda_namespace: str) -> dict[str, str]:
    """KEDA's operator's environment, watching one namespace."""
    return {
        "KUBECONFIG": str(kubeconfig),
        "WATCH_NAMESPACE": watch_namespace,
        # KEDA's own namespace, and only its Secrets: KEDA resolves the env of the target's
        # container, and an agent's carries secretKeyRefs (the task store's DSN) that KEDA
        # has no need to read. A hardened install does the same.
        "POD_NAMESPACE": keda_namespace,
        "KEDA_CLUSTER_OBJECT_NAMESPACE": keda_namespace,
        "KEDA_RESTRICT_SECRET_ACCESS": "true",
    }
