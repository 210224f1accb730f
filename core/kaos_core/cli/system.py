"""``kaos system install|uninstall``: the KAOS chart through helm.

Install is ``helm upgrade --install`` so it also upgrades; the development PostgreSQL
with pgvector is opt-in (``--pgvector-memory-enabled``). Helm and a reachable cluster
are checked first so their absence is one clear line (exit 2), not helm's stack of
messages. Uninstall leaves the CRDs, as helm does: deleting them deletes every KAOS
resource in the cluster, which only an explicit ``kubectl delete crd`` should do.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from kaos_core.cli.tools import (
    EXIT_ENVIRONMENT,
    CliError,
    find_tool,
    first_line,
    require_cluster,
    run,
)

DEFAULT_RELEASE = "kaos"
DEFAULT_NAMESPACE = "kaos-system"
CRD_NAMES = (
    "agents.kaos.tools",
    "modelapis.kaos.tools",
    "mcpservers.kaos.tools",
    "memorystores.kaos.tools",
)
_UNREACHABLE = ("kubernetes cluster unreachable", "connection refused", "no such host")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    system = sub.add_parser("system", help="install, upgrade or uninstall KAOS in the cluster")
    actions = system.add_subparsers(dest="action", required=True, metavar="ACTION")

    install = actions.add_parser(
        "install",
        help="install or upgrade the KAOS chart (helm upgrade --install)",
        description="Install or upgrade the KAOS chart. Each run states the whole "
        "configuration: values not given return to the chart's defaults (as helm upgrade "
        "without --reuse-values), so repeat --pgvector-memory-enabled and --set on upgrades.",
    )
    _common(install)
    install.add_argument(
        "--pgvector-memory-enabled",
        action="store_true",
        help="also deploy the development PostgreSQL with pgvector and its connection "
        "Secret (devPgvector.enabled=true); never for production",
    )
    install.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a chart value, as helm --set (repeatable)",
    )
    install.add_argument(
        "-f",
        "--values",
        dest="values_files",
        action="append",
        default=[],
        metavar="FILE",
        help="a values file, as helm -f (repeatable)",
    )
    install.add_argument(
        "--chart",
        help="chart directory or archive (default: $KAOS_CHART, else charts/kaos of this "
        "source checkout)",
    )
    install.set_defaults(handler=install_cmd)

    uninstall = actions.add_parser("uninstall", help="uninstall KAOS (the CRDs stay)")
    _common(uninstall)
    uninstall.set_defaults(handler=uninstall_cmd)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--release", default=DEFAULT_RELEASE, help="helm release name")
    parser.add_argument(
        "-n", "--namespace", default=DEFAULT_NAMESPACE, help="namespace of the release"
    )
    parser.add_argument(
        "--wait", action="store_true", help="wait until the release's objects are ready"
    )
    parser.add_argument("--timeout", default="5m", help="helm timeout, e.g. 5m (default 5m)")


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
    # core/kaos_core/cli/system.py -> the repository root holds charts/kaos.
    checkout = Path(__file__).resolve().parents[3] / "charts" / "kaos"
    if (checkout / "Chart.yaml").is_file():
        return str(checkout)
    raise CliError(
        "the KAOS chart was not found: pass --chart PATH or set KAOS_CHART", EXIT_ENVIRONMENT
    )


def _check_cluster() -> None:
    """Fail early when no cluster answers. Without kubectl, helm's own error decides."""
    try:
        kubectl = find_tool("kubectl")
    except CliError:
        return
    require_cluster(kubectl)


def _helm_failed(what: str, stderr: str) -> CliError:
    lowered = stderr.lower()
    if any(marker in lowered for marker in _UNREACHABLE):
        return CliError(f"no Kubernetes cluster reachable: {first_line(stderr)}", EXIT_ENVIRONMENT)
    detail = stderr.strip() or "(no output)"
    return CliError(f"{what} failed:\n{detail}")


def install_cmd(args: argparse.Namespace) -> int:
    # Usage errors first: a typo is reported without contacting any cluster.
    for assignment in args.sets:
        if "=" not in assignment:
            raise CliError(f"--set {assignment}: expected KEY=VALUE", EXIT_ENVIRONMENT)
    helm = find_tool("helm")
    chart = find_chart(args.chart)
    _check_cluster()
    argv = [
        helm, "upgrade", "--install", args.release, chart,
        "--namespace", args.namespace, "--create-namespace",
    ]  # fmt: skip
    for values_file in args.values_files:
        argv += ["--values", values_file]
    if args.pgvector_memory_enabled:
        argv += ["--set", "devPgvector.enabled=true"]
    for assignment in args.sets:
        argv += ["--set", assignment]
    if args.wait:
        argv.append("--wait")
    argv += ["--timeout", args.timeout]
    proc = run(argv, timeout=_seconds(args.timeout) + 60)
    if proc.returncode != 0:
        raise _helm_failed("helm upgrade --install", proc.stderr)
    sys.stdout.write(proc.stdout)
    return 0


def uninstall_cmd(args: argparse.Namespace) -> int:
    helm = find_tool("helm")
    _check_cluster()
    argv = [helm, "uninstall", args.release, "--namespace", args.namespace]
    if args.wait:
        argv.append("--wait")
    argv += ["--timeout", args.timeout]
    proc = run(argv, timeout=_seconds(args.timeout) + 60)
    if proc.returncode != 0:
        if "not found" in proc.stderr.lower():
            raise CliError(f"release {args.release} not found in namespace {args.namespace}")
        raise _helm_failed("helm uninstall", proc.stderr)
    sys.stdout.write(proc.stdout)
    sys.stdout.write(
        "The KAOS CRDs stay installed; to delete them and every KAOS resource:\n"
        f"  kubectl delete crd {' '.join(CRD_NAMES)}\n"
    )
    return 0


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
