"""What a test holds of a cluster: its kubeconfig, its URL, and kubectl and helm."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.support.cluster.binaries import Binaries


@dataclass(frozen=True)
class Cluster:
    """What a test needs to talk to a cluster: its kubeconfig, its URL and tool paths."""

    kubeconfig: Path
    server: str
    workdir: Path | None = None
    helm: Path | None = None
    bin_dir: Path | None = None
    node_names: tuple[str, ...] = ()

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """Environment for kubectl, helm or any client: KUBECONFIG set, helm on PATH,
        and helm's cache and config kept out of the user's home."""
        env = dict(os.environ if base is None else base)
        env["KUBECONFIG"] = str(self.kubeconfig)
        if self.bin_dir is not None:
            env["PATH"] = f"{self.bin_dir}{os.pathsep}{env.get('PATH', '')}"
        helm_home = (self.workdir or Path(tempfile.gettempdir()) / "kaos-test-cluster") / "helm"
        for var, sub in (("HELM_CACHE_HOME", "cache"), ("HELM_CONFIG_HOME", "config")):
            env.setdefault(var, str(helm_home / sub))
        env.setdefault("HELM_DATA_HOME", str(helm_home / "data"))
        return env

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        return _run_tool(["kubectl", *args], self.env(), input, check, timeout)

    def run_helm(
        self, *args: str, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        return _run_tool([str(self.helm or "helm"), *args], self.env(), None, check, timeout)

    @classmethod
    def from_kubeconfig(cls, kubeconfig: Path, binaries: Binaries | None = None) -> Cluster:
        """A handle on an existing cluster (``KAOS_TEST_KUBECONFIG``)."""
        server = subprocess.run(
            [
                "kubectl",
                "config",
                "view",
                "--minify",
                "-o",
                "jsonpath={.clusters[0].cluster.server}",
            ],
            env={**os.environ, "KUBECONFIG": str(kubeconfig)},
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        if binaries is not None:
            return cls(kubeconfig, server, helm=binaries.helm, bin_dir=binaries.bin_dir)
        helm = shutil.which("helm")
        return cls(kubeconfig, server, helm=Path(helm) if helm else None)


def _run_tool(
    argv: list[str], env: dict[str, str], input: str | None, check: bool, timeout: float
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        argv, env=env, input=input, capture_output=True, text=True, timeout=timeout
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(argv)} exited {proc.returncode}\n"
            f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        )
    return proc
