"""The kind end-to-end suite: KAOS built from this checkout, running for real in kind.

The ``kind`` fixture brings the deployment up once for the package: ``hack/kind/up`` (a
kind cluster), ``hack/kind/build-images`` (the images from Dockerfile.base and
images/*/Dockerfile), ``hack/kind/deploy`` (the chart with the development pgvector, the
development model server, the samples), and ``hack/kind/down`` at the end. With
``KAOS_KIND_CLUSTER`` set it reuses that cluster as it is: it only runs ``deploy`` (which
is idempotent and restores the samples) and leaves the cluster up. ``KAOS_KIND_KEEP=1``
keeps a cluster the suite created.

Without a Docker engine or without kind the suite is skipped, and says so loudly: every
test's skip reason names what is missing, and the terminal summary repeats it in a
banner. Missing kubectl or helm, once Docker and kind are there, is a failure.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from tests.e2e.kind.helpers import STEP_TIMEOUT, KindDeployment
from tests.fixtures.helm import locate_helm
from tests.support.kind import (
    DEFAULT_CLUSTER,
    DEFAULT_NAMESPACE,
    locate,
    run_step,
    why_kind_cannot_run,
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
        "It needs a Docker engine and kind (hack/k8s-build kind builds kind); "
        "see 'End-to-end on kind' in README.md.",
        yellow=True,
    )


@pytest.fixture(scope="package")
def kind(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KindDeployment]:
    config = request.config
    reason = why_kind_cannot_run(os.environ)
    if reason is not None:
        config.stash[KIND_SKIPPED] = reason
        pytest.skip(f"kind end-to-end suite skipped: {reason}")

    kind_bin = locate("kind", os.environ)
    kubectl = locate("kubectl", os.environ)
    helm = locate_helm()
    if kubectl is None:
        pytest.fail(
            "Docker and kind are here but kubectl is not: install kubectl "
            "(https://kubernetes.io/docs/tasks/tools/) or set KAOS_KUBECTL",
            pytrace=False,
        )
    if helm is None:
        pytest.fail("helm is not built: run hack/k8s-build (or set KAOS_HELM)", pytrace=False)
    assert kind_bin is not None  # why_kind_cannot_run checked it

    reused = os.environ.get("KAOS_KIND_CLUSTER") or None
    cluster = reused or DEFAULT_CLUSTER
    namespace = os.environ.get("KAOS_KIND_NAMESPACE") or DEFAULT_NAMESPACE
    env = {
        **os.environ,
        "KAOS_KIND_CLUSTER": cluster,
        "KAOS_KIND_NAMESPACE": namespace,
        "KAOS_KIND": kind_bin,
        "KAOS_KUBECTL": kubectl,
        "KAOS_HELM": str(helm),
    }
    workdir = tmp_path_factory.mktemp("kind")
    capture = config.pluginmanager.getplugin("capturemanager")
    reporter = config.pluginmanager.getplugin("terminalreporter")

    def echo(line: str) -> None:
        # The steps take minutes: show their progress even while pytest captures output.
        if capture is not None and reporter is not None:
            with capture.global_and_fixture_disabled():
                reporter.write_line(line)

    def step(name: str) -> None:
        try:
            run_step(name, env, workdir / f"{name}.log", timeout=STEP_TIMEOUT, echo=echo)
        except AssertionError as exc:
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
                cluster=cluster, namespace=namespace, kubeconfig=kubeconfig, kubectl_path=kubectl
            )
    finally:
        if tear_down:
            step("down")
