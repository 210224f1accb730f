"""``kaos system install|uninstall|status``: the KAOS chart through helm, and its health.

Install is ``helm upgrade --install`` so it also upgrades; the development PostgreSQL
with pgvector is opt-in (``--pgvector-memory-enabled``). Helm and a reachable cluster
are checked first so their absence is one clear line (exit 2), not helm's stack of
messages. Uninstall leaves the CRDs, as helm does: deleting them deletes every KAOS
resource in the cluster, which only an explicit ``kubectl delete crd`` should do.
``status`` is its own module (``commands.status``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from kaos_cli.commands.common import CONTEXT_SETTINGS, Cx, common_options
from kaos_cli.commands.status import DEFAULT_NAMESPACE, status_cmd
from kaos_cli.kinds import CRD_NAMES
from kaos_cli.kubectl.sync import Kube
from kaos_cli.output import emit
from kaos_cli.tools import EXIT_ENVIRONMENT, CliError, find_tool, first_line, run, without_prefix

DEFAULT_RELEASE = "kaos"
_UNREACHABLE = ("kubernetes cluster unreachable", "connection refused", "no such host")


def find_chart(explicit: str | None) -> str:
    """The chart to install: ``--chart``, ``$KAOS_CHART`` or this checkout's charts/kaos."""
    candidate = explicit or os.environ.get("KAOS_CHART")
    if candidate:
        path = Path(candidate)
        if path.is_dir() and not (path / "Chart.yaml").is_file():
            raise CliError(f"{candidate} is not a chart (no Chart.yaml)", EXIT_ENVIRONMENT)
        if not path.exists():
            raise CliError(f"chart {candidate} does not exist", EXIT_ENVIRONMENT)
        return str(path)
    # cli/kaos_cli/commands/system.py -> the repository root holds charts/kaos.
    checkout = Path(__file__).resolve().parents[3] / "charts" / "kaos"
    if (checkout / "Chart.yaml").is_file():
        return str(checkout)
    raise CliError(
        "the KAOS chart was not found: pass --chart PATH or set KAOS_CHART", EXIT_ENVIRONMENT
    )


def _check_cluster(context: str | None) -> None:
    """Fail early when no cluster answers. Without kubectl, helm's own error decides."""
    try:
        find_tool("kubectl")
    except CliError:
        return
    Kube(context=context).require_cluster()


def _helm_failed(what: str, stderr: str) -> CliError:
    lowered = stderr.lower()
    if any(marker in lowered for marker in _UNREACHABLE):
        return CliError(f"no Kubernetes cluster reachable: {first_line(stderr)}", EXIT_ENVIRONMENT)
    # helm's "Error: ..." line leads (without its prefix: the CLI prints its own), what
    # else helm said follows, indented.
    headline = first_line(stderr)
    rest = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    rest = [ln for ln in rest if without_prefix(ln) != headline]
    return CliError("\n".join([f"{what} failed: {headline}", *(f"  {ln}" for ln in rest)]))


def _seconds(duration: str) -> float:
    """Seconds of a helm duration like 90s, 5m or 1h (for our own subprocess timeout)."""
    units = {"s": 1, "m": 60, "h": 3600}
    total, number = 0.0, ""
    for char in duration:
        if char.isdigit() or char == ".":
            number += char
        elif char in units and number:
            total += float(number) * units[char]
            number = ""
        else:
            raise CliError(f"--timeout {duration}: expected a duration like 90s or 5m", 2)
    if number:
        total += float(number)
    return total or 300.0


@click.group(
    "system",
    context_settings=CONTEXT_SETTINGS,
    help="Install, upgrade, uninstall KAOS in the cluster and check its health.",
)
def system_group() -> None:
    pass


def _release_options(fn: Any) -> Any:
    fn = click.option(
        "--timeout", default="5m", show_default=True, help="helm timeout, e.g. 90s or 5m"
    )(fn)
    fn = click.option("--wait", is_flag=True, help="wait until the release's objects are ready")(fn)
    fn = click.option(
        "--release", default=DEFAULT_RELEASE, show_default=True, help="helm release name"
    )(fn)
    return common_options(namespace_help=f"namespace of the release (default {DEFAULT_NAMESPACE})")(
        fn
    )


def _helm_argv(helm: str, cx: Cx) -> list[str]:
    argv = [helm]
    if cx.kube.context:
        argv += ["--kube-context", cx.kube.context]
    return argv


@system_group.command(
    "install",
    help="Install or upgrade the KAOS chart (helm upgrade --install). Each run states the whole "
    "configuration: values not given return to the chart's defaults, so repeat "
    "--pgvector-memory-enabled and --set on upgrades.",
)
@click.option(
    "--pgvector-memory-enabled",
    is_flag=True,
    help="also deploy the development PostgreSQL with pgvector and its connection "
    "Secret (devPgvector.enabled=true); never for production",
)
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="KEY=VALUE",
    help="a chart value, as helm --set (repeatable)",
)
@click.option(
    "-f",
    "--values",
    "values_files",
    multiple=True,
    metavar="FILE",
    help="a values file, as helm -f (repeatable)",
)
@click.option(
    "--chart",
    default=None,
    help="chart directory or archive (default: $KAOS_CHART, else charts/kaos of this "
    "source checkout)",
)
@_release_options
def install_cmd(
    cx: Cx,
    pgvector_memory_enabled: bool,
    sets: tuple[str, ...],
    values_files: tuple[str, ...],
    chart: str | None,
    release: str,
    wait: bool,
    timeout: str,
) -> int:
    # Usage errors first: a typo is reported without contacting any cluster.
    for assignment in sets:
        if "=" not in assignment:
            raise CliError(f"--set {assignment}: expected KEY=VALUE", EXIT_ENVIRONMENT)
    seconds = _seconds(timeout)
    namespace = cx.kube.namespace or DEFAULT_NAMESPACE
    helm = find_tool("helm")
    chart_path = find_chart(chart)
    _check_cluster(cx.kube.context)
    argv = [
        *_helm_argv(helm, cx),
        "upgrade",
        "--install",
        release,
        chart_path,
        "--namespace",
        namespace,
        "--create-namespace",
    ]
    for values_file in values_files:
        argv += ["--values", values_file]
    if pgvector_memory_enabled:
        argv += ["--set", "devPgvector.enabled=true"]
    for assignment in sets:
        argv += ["--set", assignment]
    if wait:
        argv.append("--wait")
    argv += ["--timeout", timeout]
    proc = run(argv, timeout=seconds + 60)
    if proc.returncode != 0:
        raise _helm_failed("helm upgrade --install", proc.stderr)
    if cx.fmt == "table":
        sys.stdout.write(proc.stdout)
    else:
        emit(cx.fmt, {"release": release, "namespace": namespace, "chart": chart_path})
    return 0


@system_group.command("uninstall", help="Uninstall KAOS (the CRDs stay, and so do your resources).")
@_release_options
def uninstall_cmd(cx: Cx, release: str, wait: bool, timeout: str) -> int:
    seconds = _seconds(timeout)
    namespace = cx.kube.namespace or DEFAULT_NAMESPACE
    helm = find_tool("helm")
    _check_cluster(cx.kube.context)
    argv = [*_helm_argv(helm, cx), "uninstall", release, "--namespace", namespace]
    if wait:
        argv.append("--wait")
    argv += ["--timeout", timeout]
    proc = run(argv, timeout=seconds + 60)
    if proc.returncode != 0:
        if "not found" in proc.stderr.lower():
            raise CliError(f"release {release} not found in namespace {namespace}")
        raise _helm_failed("helm uninstall", proc.stderr)
    sys.stdout.write(proc.stdout)
    sys.stdout.write(
        "The KAOS CRDs stay installed; to delete them and every KAOS resource:\n"
        f"  kubectl delete crd {' '.join(CRD_NAMES)}\n"
    )
    return 0


system_group.add_command(status_cmd)
