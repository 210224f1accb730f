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

from tests.support.procs import REPO_ROOT

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
