"""NetworkPolicy on the real node: kube-router's network policy controller, alone.

The node's bridge CNI ignores NetworkPolicy objects, so without an engine every policy
the operator writes is only declared. kube-router (``hack/netpol-build`` builds the
pinned release from its Go module) runs as a process of the node, in the node's network
namespace, like CoreDNS: only its firewall (``--run-firewall``; its BGP router and
service proxy stay off, kube-proxy routes Services). It watches pods, namespaces and
NetworkPolicies with the admin's kubeconfig and holds every pod of the node in iptables
chains (``KUBE-ROUTER-*``, ``KUBE-POD-FW-*``, ``KUBE-NWPLCY-*``) that match peers by ipsets
(``KUBE-SRC-*``, ``KUBE-DST-*``). Pods on the one bridge reach each other through the
FORWARD chain because br_netfilter hands bridged frames to iptables.

Why kube-router: the other engines tried need what this machine lacks (SIG Network's
kube-network-policies programs nftables ``queue`` rules, and this kernel has no
``CONFIG_NFT_QUEUE``) or what the Go module proxy does not serve whole (Calico, Antrea).
kube-router needs only iptables' ``set`` match and the ``ipset`` tool (Debian's).

It makes no links. Its chains and sets live in the node's namespace; ``remove_rules``
takes them out after it stops (its own ``--cleanup-config`` skips them in this release,
and would touch IPVS and routes besides), before the namespace goes.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from tests.support.cluster.binaries import REPO_ROOT, build_env

BUILD_SCRIPT = REPO_ROOT / "hack" / "netpol-build"
# kube-router's own default; served on the node IP (the namespace is the node's own).
HEALTH_PORT = 20244
# What kube-router names its chains and sets (pkg/controllers/netpol in the release).
CHAIN = re.compile(r"KUBE-(ROUTER-(INPUT|FORWARD|OUTPUT)|POD-FW-|NWPLCY-)")
SET_PREFIXES = ("KUBE-SRC-", "KUBE-DST-", "inet6:KUBE-SRC-", "inet6:KUBE-DST-")

InNetns = Callable[..., list[str]]


def locate(build_script: Path = BUILD_SCRIPT) -> Path:
    """Where ``hack/netpol-build`` puts kube-router (built or not)."""
    return Path(build_env(build_script)["KAOS_KUBE_ROUTER"])


def args(binary: Path, kubeconfig: Path, node_name: str, service_cidr: str) -> list[str]:
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--hostname-override={node_name}",
        "--run-firewall=true",
        "--run-router=false",
        "--run-service-proxy=false",
        # The CNI config is the routing controller's business; the node's bridge stays.
        "--enable-cni=false",
        "--enable-ipv6=false",
        f"--service-cluster-ip-range={service_cidr}",
        f"--health-port={HEALTH_PORT}",
        "--metrics-port=0",
        "--v=1",
    ]


def health_url(node_ip: str) -> str:
    return f"http://{node_ip}:{HEALTH_PORT}/healthz"


def _run(argv: Sequence[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), input=stdin, capture_output=True, text=True, check=False)


def _listed(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """The lines ``argv`` prints, and its failure named (never taken for an empty list)."""
    done = _run(argv)
    failed = [f"({' '.join(argv)} exited {done.returncode}: {done.stderr.strip()})"]
    return done.stdout.splitlines(), failed if done.returncode else []


def leftovers(in_netns: InNetns) -> list[str]:
    """kube-router's chains and sets in the namespace (chain lines and set names), and
    any listing that failed."""
    rules, rules_failed = _listed(in_netns("iptables-save", "-t", "filter"))
    sets, sets_failed = _listed(in_netns("ipset", "list", "-n"))
    chains = [line for line in rules if line.startswith(":") and CHAIN.search(line)]
    ours = [name for name in sets if name.startswith(SET_PREFIXES)]
    return rules_failed + sets_failed + chains + ours


def remove_rules(in_netns: InNetns) -> list[str]:
    """Take kube-router's chains (and every rule jumping to them) out of the filter table,
    then destroy its sets (a set is in use while a rule names it); return what is left."""
    saved = _run(in_netns("iptables-save", "-t", "filter"))
    if saved.returncode == 0 and CHAIN.search(saved.stdout):
        kept = [line for line in saved.stdout.splitlines() if not CHAIN.search(line)]
        _run(in_netns("iptables-restore", "-T", "filter"), stdin="\n".join(kept) + "\n")
    for name in _run(in_netns("ipset", "list", "-n")).stdout.split():
        if name.startswith(SET_PREFIXES):
            _run(in_netns("ipset", "destroy", name))
    return leftovers(in_netns)
