"""The pinned control-plane binaries ``hack/k8s-build`` builds, and where they are."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.support.cluster.errors import BinariesMissing

REPO_ROOT = Path(__file__).resolve().parents[3]
BUILD_SCRIPT = REPO_ROOT / "hack" / "k8s-build"


def build_env(build_script: Path = BUILD_SCRIPT) -> dict[str, str]:
    """The locations ``hack/k8s-build --print-env`` names (KEY=value lines)."""
    out = subprocess.run(
        [str(build_script), "--print-env"], check=True, capture_output=True, text=True
    ).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


@dataclass(frozen=True)
class Binaries:
    """Where ``hack/k8s-build`` puts the pinned binaries (it is the one source of versions)."""

    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    etcd: Path
    kwok: Path
    kwok_stages: Path
    helm: Path
    bin_dir: Path
    kube_version: str

    @classmethod
    def locate(cls, build_script: Path = BUILD_SCRIPT) -> Binaries:
        env = build_env(build_script)
        kube_bin = Path(env["KAOS_KUBE_BIN"])
        return cls(
            kube_apiserver=kube_bin / "kube-apiserver",
            kube_controller_manager=kube_bin / "kube-controller-manager",
            kube_scheduler=kube_bin / "kube-scheduler",
            etcd=Path(env["KAOS_ETCD"]),
            kwok=Path(env["KAOS_KWOK"]),
            kwok_stages=Path(env["KAOS_KWOK_STAGES"]),
            helm=Path(env["KAOS_HELM"]),
            bin_dir=Path(env["KAOS_K8S_BIN"]),
            kube_version=env["KAOS_KUBE_VERSION"],
        )

    def missing(self) -> list[str]:
        paths = [
            self.kube_apiserver,
            self.kube_controller_manager,
            self.kube_scheduler,
            self.etcd,
            self.kwok,
            self.helm,
        ]
        gone = [p.name for p in paths if not os.access(p, os.X_OK)]
        if not self.kwok_stages.is_dir():
            gone.append("kwok stages")
        return gone

    def require(self) -> Binaries:
        if gone := self.missing():
            raise BinariesMissing(
                f"missing {', '.join(gone)}: run hack/k8s-build once "
                "(a cold build takes tens of minutes; later runs reuse the cache)"
            )
        return self


def build_binaries(build_script: Path = BUILD_SCRIPT) -> Binaries:
    """Run ``hack/k8s-build`` (a no-op when everything is cached) and locate the result."""
    subprocess.run([str(build_script)], check=True)
    return Binaries.locate(build_script).require()
