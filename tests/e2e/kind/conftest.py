"""The kind end-to-end suite: KAOS built from this checkout, running for real in kind.

The ``kind`` fixture brings the deployment up once for the package: ``hack/kind/up`` (a
kind cluster), ``hack/kind/build-images`` (the images from Dockerfile.base and
images/*/Dockerfile), ``hack/kind/deploy`` (the chart with the development pgvector, the
development model server, the samples), and ``hack/kind/down`` at the end. With
``KAOS_KIND_CLUSTER`` set it reuses that cluster as it is: it only runs ``deploy`` (which
is idempotent and restores the samples) and leaves the cluster up. ``KAOS_KIND_KEEP=1``
keeps a cluster the suite created.

Where Docker or kind is missing, the same checks run on the test cluster's real node
instead (``tests.support.realnode``: a kubelet on containerd and runc, in a network
namespace of its own; ``KAOS_E2E_PROVIDER=kind|real-node`` forces one), brought up and
taken down by the code of ``make cluster`` and ``make cluster-down``
(``tests.support.cluster.cli``, in-process and not detached): ``hack/images`` builds
(through its cache) the KAOS, LiteLLM and pgvector images without a container engine,
``ctr`` imports them into the node, ``hack/kind/deploy`` deploys with
``KAOS_KIND_PROVIDER=real-node``; the package's last test (``test_kind_teardown.py``)
takes it down and compares the host with what it was before. ``KAOS_KIND_KEEP=1`` keeps
the cluster's directory (logs) after it is stopped; ``KAOS_KIND_CLUSTER_DIR`` names the
state directory of a real-node cluster already running (``KAOS_CLUSTER_DIR=...
hack/cluster up``): the suite deploys onto it and leaves it up.

Where neither can run the suite is skipped, and says so loudly: every test's skip reason
names what is missing, and the terminal summary repeats it in a banner. Missing kubectl
or helm, once a provider can run, is a failure.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.kind.helpers import STEP_TIMEOUT, KindDeployment
from tests.fixtures.helm import locate_helm
from tests.support.cluster import ClusterError
from tests.support.cluster import cli as cluster_cli
from tests.support.cluster.host import host_snapshot
from tests.support.cluster.samples import IMAGES_SCRIPT
from tests.support.kind import (
    DEFAULT_CLUSTER,
    DEFAULT_NAMESPACE,
    locate,
    run_step,
    why_kind_cannot_run,
)
from tests.support.procs import REPO_ROOT
from tests.support.realnode import (
    NodeBinaries,
    sweep_abandoned_nodes,
    why_real_node_cannot_run,
)

# Why the suite did not run, for the terminal summary.
KIND_SKIPPED = pytest.StashKey[str]()


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    reason = config.stash.get(KIND_SKIPPED, None)
    if reason is None:
        return
    terminalreporter.section("the kind end-to-end suite did NOT run", sep="!", yellow=True)
    terminalreporter.line(f"tests/e2e/kind was skipped: {reason}.", yellow=True, bold=True)
    terminalreporter.line(
        "It needs a Docker engine and kind (hack/k8s-build kind builds kind), or root and "
        "the real node's binaries (hack/k8s-build node); see docs/development/e2e.md.",
        yellow=True,
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The teardown test after every other test of this package, whatever their names."""
    here = Path(__file__).parent
    ours = [i for i, item in enumerate(items) if item.path.parent == here]
    if not ours:
        return
    block = [items[i] for i in ours]
    ordered = sorted(block, key=lambda item: item.path.name == TEARDOWN_MODULE)
    for i, item in zip(ours, ordered, strict=True):
        items[i] = item


# Tried in this order unless KAOS_E2E_PROVIDER names one: kind where Docker is, else the
# real node (root and its binaries), so `make test` runs the suite on this machine too.
PROVIDERS = ("kind", "real-node")
# Last in the package: it takes the real node's cluster down (tests/e2e/kind/test_kind_teardown.py).
TEARDOWN_MODULE = "test_kind_teardown.py"


def why_real_node_suite_cannot_run() -> str | None:
    if not os.access(IMAGES_SCRIPT, os.X_OK):
        return f"{IMAGES_SCRIPT.relative_to(REPO_ROOT)} (the images without Docker) is missing"
    return why_real_node_cannot_run()


def choose_provider() -> tuple[str | None, str]:
    """The provider to run the suite on and, when there is none, every reason why."""
    forced = os.environ.get("KAOS_E2E_PROVIDER", "").strip()
    if forced and forced not in PROVIDERS:
        return None, f"KAOS_E2E_PROVIDER={forced}: expected one of {', '.join(PROVIDERS)}"
    reasons = []
    checks: list[tuple[str, Callable[[], str | None]]] = [
        ("kind", lambda: why_kind_cannot_run(os.environ)),
        ("real-node", why_real_node_suite_cannot_run),
    ]
    for name, why in checks:
        if forced and forced != name:
            continue
        reason = why()
        if reason is None:
            return name, ""
        reasons.append(f"{name}: {reason}")
    return None, "; ".join(reasons)


@pytest.fixture(scope="package")
def kind(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KindDeployment]:
    config = request.config
    provider, reason = choose_provider()
    if provider is None:
        config.stash[KIND_SKIPPED] = reason
        pytest.skip(f"kind end-to-end suite skipped: {reason}")

    kubectl = locate("kubectl", os.environ)
    helm = locate_helm()
    if kubectl is None:
        pytest.fail(
            f"the {provider} provider can run but kubectl is not here: install kubectl "
            "(https://kubernetes.io/docs/tasks/tools/) or set KAOS_KUBECTL",
            pytrace=False,
        )
    if helm is None:
        pytest.fail("helm is not built: run hack/k8s-build (or set KAOS_HELM)", pytrace=False)
    namespace = os.environ.get("KAOS_KIND_NAMESPACE") or DEFAULT_NAMESPACE
    workdir = tmp_path_factory.mktemp("kind")
    echo = _echo(config)
    if provider == "real-node":
        yield from _on_real_node(namespace, kubectl, str(helm), workdir, echo)
        return

    kind_bin = locate("kind", os.environ)
    assert kind_bin is not None  # why_kind_cannot_run checked it

    reused = os.environ.get("KAOS_KIND_CLUSTER") or None
    cluster = reused or DEFAULT_CLUSTER
    env = {
        **os.environ,
        "KAOS_KIND_CLUSTER": cluster,
        "KAOS_KIND_NAMESPACE": namespace,
        "KAOS_KIND": kind_bin,
        "KAOS_KUBECTL": kubectl,
        "KAOS_HELM": str(helm),
    }

    def step(name: str) -> None:
        try:
            run_step(name, env, workdir / f"{name}.log", timeout=STEP_TIMEOUT,
                     echo=lambda line: echo(f"kind suite: {line}"))  # fmt: skip
        except ClusterError as exc:
            pytest.fail(str(exc), pytrace=False)

    steps = ["deploy"] if reused else ["up", "build-images", "deploy"]
    keep = os.environ.get("KAOS_KIND_KEEP", "").strip().lower() not in {"", "0", "false", "no"}
    tear_down = reused is None and not keep
    try:
        for name in steps:
            step(name)
        kubeconfig = workdir / "kubeconfig"
        kubeconfig.write_text(
            subprocess.run(
                [kind_bin, "get", "kubeconfig", "--name", cluster],
                check=True,
                capture_output=True,
                text=True,
                timeout=60,
            ).stdout
        )
        kubeconfig.chmod(0o600)
        with pytest.MonkeyPatch.context() as patch:
            # The kaos CLI's port-forward helper runs kubectl with the process environment.
            patch.setenv("KUBECONFIG", str(kubeconfig))
            yield KindDeployment(
                cluster=cluster,
                namespace=namespace,
                kubeconfig=kubeconfig,
                kubectl_path=kubectl,
                runtime_containers=lambda: _kind_node_containers(kind_bin, cluster),
            )
    finally:
        if tear_down:
            step("down")


def _echo(config: pytest.Config) -> Callable[[str], None]:
    capture = config.pluginmanager.getplugin("capturemanager")
    reporter = config.pluginmanager.getplugin("terminalreporter")

    def echo(line: str) -> None:
        # The steps take minutes: show their progress even while pytest captures output.
        if capture is not None and reporter is not None:
            with capture.global_and_fixture_disabled():
                reporter.write_line(line)

    return echo


def _kind_node_containers(kind_bin: str, cluster: str) -> set[str]:
    """What containerd lists in each kind node (``ctr`` ships in kind's node image)."""
    docker = locate("docker", os.environ) or "docker"
    nodes = subprocess.run(
        [kind_bin, "get", "nodes", "--name", cluster],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout.split()  # fmt: skip
    found: set[str] = set()
    for node in nodes:
        found.update(subprocess.run(
            [docker, "exec", node, "ctr", "-n", "k8s.io", "containers", "ls", "-q"],
            check=True, capture_output=True, text=True, timeout=60,
        ).stdout.split())  # fmt: skip
    return found


def _on_real_node(
    namespace: str, kubectl: str, helm: str, workdir: Path, echo: Callable[[str], None]
) -> Iterator[KindDeployment]:
    """The suite's deployment on a real node of the test cluster: ``make cluster``'s own
    ``up`` and ``down`` (``tests.support.cluster.cli``), not detached, so that the cluster
    dies with pytest if pytest is killed."""
    keep = os.environ.get("KAOS_KIND_KEEP", "").strip().lower() not in {"", "0", "false", "no"}
    # A cluster `hack/cluster up` left running (its state directory): used as it is, its
    # samples redeployed by ``up``, and left running (no teardown to compare).
    given = os.environ.get("KAOS_KIND_CLUSTER_DIR", "").strip()
    state_dir = Path(given) if given else workdir / "cluster"

    def say(line: str) -> None:
        echo(f"kind suite (real node): {line}")

    # A node a killed run left behind would otherwise be part of "before".
    sweep_abandoned_nodes(NodeBinaries.locate(), log=say)
    before = host_snapshot()
    after: list[dict[str, Any]] = []

    def take_down() -> dict[str, Any]:
        if not after:
            cluster_cli.down(state_dir, say=say, remove=not keep)
            after.append(host_snapshot())
        return after[0]

    try:
        local, cluster = cluster_cli.up(
            state_dir, real_node=True, namespace=namespace, detach=False, say=say,
            env={"KAOS_KUBECTL": kubectl, "KAOS_HELM": helm},
        )  # fmt: skip
        node = local._node
        assert node is not None
    except ClusterError as exc:
        take_down()
        pytest.fail(str(exc), pytrace=False)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("KUBECONFIG", str(cluster.kubeconfig))
            yield KindDeployment(
                cluster="real-node",
                namespace=namespace,
                kubeconfig=cluster.kubeconfig,
                kubectl_path=kubectl,
                runtime_containers=node.runtime_containers,
                provider="real-node",
                host_before=None if given else before,
                take_down=None if given else take_down,
                in_netns=node.in_netns,
                ctr=node.ctr,
            )
    finally:
        if not given:
            take_down()


# What a failed test's report carries from the cluster: every pod of the test namespace
# and the last lines of each one's containers, so a failure in CI says which component
# stalled (a timed-out request says only that something did).
LOG_LINES = 25


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call" and report.failed:
        deployment = _deployment_of(item)
        if deployment is not None:
            report.sections.append(("the cluster at the failure", _cluster_state(deployment)))
    return report


def _deployment_of(item: pytest.Item) -> KindDeployment | None:
    """The test's deployment: its ``kind`` fixture, or one a fixture of it holds."""
    for value in getattr(item, "funcargs", {}).values():
        if isinstance(value, KindDeployment):
            return value
        inner = getattr(value, "kind", None)
        if isinstance(inner, KindDeployment):
            return inner
    return None


def _cluster_state(kind: KindDeployment) -> str:
    try:
        pods = kind.kubectl("get", "pods", "-o", "wide", check=False, timeout=30).stdout
        names = kind.kubectl("get", "pods", "-o", "name", check=False, timeout=30).stdout.split()
        tail = ("--all-containers", "--prefix", f"--tail={LOG_LINES}")
        logs = [kind.kubectl("logs", name, *tail, check=False, timeout=30).stdout for name in names]
    except subprocess.TimeoutExpired as exc:
        return f"the cluster did not answer: {exc}"
    return "\n".join([pods, *logs])
