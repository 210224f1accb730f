"""``hack/test-cluster up|down|env`` and ``hack/cluster`` (``make cluster``): a detached
cluster for a shell, found again by its state directory; with ``--deploy``, on a real
node, the chart and every sample running on it (``tests.support.cluster.samples``).

``up`` and ``down`` are also what the kind suite's real-node fixture calls, in-process and
not detached (its processes die with pytest), so CI runs the path ``make cluster`` takes.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from tests.support.cluster import netpol
from tests.support.cluster.binaries import BUILD_SCRIPT, REPO_ROOT, Binaries, build_binaries
from tests.support.cluster.errors import ClusterError, StepFailed
from tests.support.cluster.handle import Cluster
from tests.support.cluster.host import cache_dir
from tests.support.cluster.local import LocalCluster

Say = Callable[[str], None]


def default_state_dir() -> Path:
    return cache_dir() / "test-cluster"


def up(
    state_dir: Path,
    *,
    real_node: bool = False,
    namespace: str | None = None,
    detach: bool = True,
    say: Say = lambda message: None,
    env: Mapping[str, str] | None = None,
) -> tuple[LocalCluster, Cluster]:
    """The cluster recorded in ``state_dir`` when it runs, else a new one there; with
    ``namespace``, the samples deployed into it (and waited Ready) on its real node."""
    if real_node and os.geteuid() != 0:
        raise ClusterError("the real node needs root (network namespaces, mounts, cgroups)")
    if namespace is not None and not real_node:
        raise ClusterError("the samples run only on a real node (--real-node): kwok runs nothing")
    binaries = Binaries.locate()
    found = LocalCluster.attach(binaries, state_dir)
    if found and found[0].running():
        local, handle = found
        if real_node and local._node is None:
            raise ClusterError(
                f"the cluster running in {state_dir} has no real node: stop it first "
                "(hack/test-cluster down)"
            )
        say(f"already running at {handle.server} (logs in {state_dir})")
    else:
        if found:
            say("a previous cluster died: cleaning it up")
            found[0].stop()
        _build_missing(binaries, real_node=real_node, say=say)
        binaries = Binaries.locate()
        started = time.monotonic()
        local = LocalCluster(
            binaries, state_dir, nodes=2, detach=detach, log=say, real_node=real_node
        )
        handle = local.start()
        say(f"up in {time.monotonic() - started:.1f}s at {handle.server}; logs in {state_dir}")
    if namespace is not None:
        from tests.support.cluster.samples import deploy_samples

        assert local._node is not None  # real_node, checked above
        local._node.log = say
        deploy_samples(local._node, handle, namespace, logs=state_dir, echo=say, env=env)
    return local, handle


def _build_missing(binaries: Binaries, *, real_node: bool, say: Say) -> None:
    """``hack/k8s-build`` (and ``node``, and ``hack/netpol-build``) when something is
    missing: tens of minutes cold."""
    try:
        if binaries.missing():
            say("binaries missing: building them with hack/k8s-build")
            build_binaries()
        if real_node and subprocess.run([str(BUILD_SCRIPT), "node", "--check"]).returncode:
            say("node binaries missing: building them with hack/k8s-build node")
            subprocess.run([str(BUILD_SCRIPT), "node"], check=True)
        if real_node and subprocess.run([str(netpol.BUILD_SCRIPT), "--check"]).returncode:
            say("the NetworkPolicy engine is missing: building it with hack/netpol-build")
            subprocess.run([str(netpol.BUILD_SCRIPT)], check=True)
    except subprocess.CalledProcessError as exc:
        raise ClusterError(f"{shlex.join(map(str, exc.cmd))} exited {exc.returncode}") from exc


def down(state_dir: Path, *, say: Say = lambda message: None, remove: bool = True) -> bool:
    """Stop the cluster recorded in ``state_dir`` and undo what its node did to the host;
    False when none was there. With ``remove`` the directory goes too."""
    found = LocalCluster.attach(Binaries.locate(), state_dir)
    if found is None:
        if remove:
            shutil.rmtree(state_dir, ignore_errors=True)
        return False
    local = found[0]
    if local._node is not None:
        local._node.log = say
    local.stop(remove=remove)
    return True


def next_steps(kubeconfig: Path, bin_dir: Path | None, namespace: str) -> list[str]:
    """What to type once the samples run: the CLI and the console against them (the kind
    suite runs these lines as they are)."""
    # The venv's kaos, and the kubectl and helm hack/k8s-build made (the CLI drives them).
    bins = [REPO_ROOT / ".venv" / "bin", bin_dir]
    path = ":".join(shlex.quote(str(b)) for b in bins if b is not None and b.is_dir())
    return [
        f"export KUBECONFIG={shlex.quote(str(kubeconfig))}",
        *([f'export PATH={path}:"$PATH"'] if path else []),
        "kaos agent invoke coordinator hello",
        "kaos agent chat coordinator",
        "kaos memory list --store memory-local --level store",
        "kaos ui",
        f"kubectl get pods   # {namespace} is the kubeconfig's default namespace",
    ]


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"hack/{prog}", add_help=False)
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("up", add_help=False)
    start.add_argument("--real-node", action="store_true")
    start.add_argument("--deploy", action="store_true")
    start.add_argument("--namespace", default=None)
    commands.add_parser("down", add_help=False)
    commands.add_parser("env", add_help=False)
    return parser


def main(argv: Sequence[str], prog: str = "test-cluster") -> int:
    def say(message: str) -> None:
        print(f"{prog}: {message}", file=sys.stderr, flush=True)

    usage = f"usage: hack/{prog} up [--real-node [--deploy [--namespace NS]]] | down | env"
    try:
        args = _parser(prog).parse_args(list(argv))
    except SystemExit:
        print(usage, file=sys.stderr)
        return 2
    deploy, namespace = getattr(args, "deploy", False), getattr(args, "namespace", None)
    if namespace is not None and not deploy:
        print(usage, file=sys.stderr)
        return 2
    state_dir = Path(os.environ.get("KAOS_TEST_CLUSTER_DIR") or default_state_dir())
    if args.command == "up":
        from tests.support.cluster.samples import DEFAULT_NAMESPACE

        namespace = (namespace or DEFAULT_NAMESPACE) if deploy else None
        started = time.monotonic()
        try:
            _, handle = up(state_dir, real_node=args.real_node, namespace=namespace, say=say)
        except StepFailed as exc:
            say(f"error: {exc}")
            say(
                f'the cluster stays up for a look (eval "$(hack/{prog} env)"; kubectl get '
                f"events -A); hack/{prog} up again retries, hack/{prog} down stops it"
            )
            return 1
        if namespace is not None:
            minutes, seconds = divmod(int(time.monotonic() - started), 60)
            say(f"every sample is Ready in namespace {namespace} ({minutes}m{seconds:02d}s)")
            say("next, in this shell:")
            # Unprefixed, to be copied as they are.
            steps = next_steps(handle.kubeconfig, handle.bin_dir, namespace)
            print("\n".join(f"  {line}" for line in steps), file=sys.stderr, flush=True)
        stop = "make cluster-down" if prog == "cluster" else f"hack/{prog} down"
        say(f"stop it with: {stop} (the machine is left as it was found)")
        print(f"export KUBECONFIG={handle.kubeconfig}")
        return 0
    if args.command == "down":
        if down(state_dir, say=say):
            say(f"stopped and removed {state_dir}")
        else:
            say("no cluster was running")
        return 0
    if (found := LocalCluster.attach(Binaries.locate(), state_dir)) and found[0].running():
        print(f"export KUBECONFIG={found[1].kubeconfig}")
        return 0
    say(f"no cluster is running (hack/{prog} up)")
    return 1
