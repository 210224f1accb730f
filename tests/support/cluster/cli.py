"""``hack/test-cluster up|down|env``: a detached cluster for a shell, found again by its
state directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from tests.support.cluster.binaries import BUILD_SCRIPT, Binaries, build_binaries
from tests.support.cluster.local import LocalCluster


def default_state_dir() -> Path:
    cache = os.environ.get("KAOS_CACHE_DIR") or str(Path.home() / ".cache" / "kaos")
    return Path(cache) / "test-cluster"


def main(argv: Sequence[str]) -> int:
    def say(message: str) -> None:
        print(f"test-cluster: {message}", file=sys.stderr, flush=True)

    command = argv[0] if argv else ""
    flags = set(argv[1:])
    if not flags <= ({"--real-node"} if command == "up" else set()):
        print("usage: hack/test-cluster up [--real-node] | down | env", file=sys.stderr)
        return 2
    real_node = "--real-node" in flags
    state_dir = Path(os.environ.get("KAOS_TEST_CLUSTER_DIR") or default_state_dir())
    binaries = Binaries.locate()
    if command == "up":
        if found := LocalCluster.attach(binaries, state_dir):
            local, handle = found
            if local.running():
                say(f"already running at {handle.server} (logs in {state_dir})")
                print(f"export KUBECONFIG={handle.kubeconfig}")
                return 0
            say("a previous cluster died: cleaning it up")
            local.stop()
        if binaries.missing():
            say("binaries missing: building them with hack/k8s-build")
            binaries = build_binaries()
        if real_node and subprocess.run([str(BUILD_SCRIPT), "node", "--check"]).returncode:
            say("node binaries missing: building them with hack/k8s-build node")
            subprocess.run([str(BUILD_SCRIPT), "node"], check=True)
        started = time.monotonic()
        local = LocalCluster(
            binaries, state_dir, nodes=2, detach=True, log=say, real_node=real_node
        )
        handle = local.start()
        say(f"up in {time.monotonic() - started:.1f}s at {handle.server}; logs in {state_dir}")
        say("stop it with: hack/test-cluster down")
        print(f"export KUBECONFIG={handle.kubeconfig}")
        return 0
    if command == "down":
        if found := LocalCluster.attach(binaries, state_dir):
            if found[0]._node is not None:
                found[0]._node.log = say
            found[0].stop()
            say(f"stopped and removed {state_dir}")
        else:
            shutil.rmtree(state_dir, ignore_errors=True)
            say("no cluster was running")
        return 0
    if command == "env":
        if (found := LocalCluster.attach(binaries, state_dir)) and found[0].running():
            print(f"export KUBECONFIG={found[1].kubeconfig}")
            return 0
        say("no cluster is running (hack/test-cluster up)")
        return 1
    print("usage: hack/test-cluster up [--real-node] | down | env", file=sys.stderr)
    return 2
