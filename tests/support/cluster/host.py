"""The host as a real node could change it, as comparable data, and what differs between
two such snapshots; and the registry of the nodes running on the machine.

``tests/e2e/realnode`` and the kind suite compare the host before a node came up with the
host after it went (``make cluster-down``'s promise: the machine as it was found).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# What the kubelet (setupKernelTunables) and the CNI bridge change on the host, and the
# kubelet's keyring limits: written back on stop.
HOST_SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    "net/ipv4/ip_forward",
)
# Host paths a component hard-codes: removed on stop when they did not exist before.
HARD_CODED_PATHS = (Path("/run/containerd"), Path("/var/log/containers"))


# The host as the first node found it (registry_dir()), restored when the last one goes.
BASELINE = "host-baseline.json"


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The cache the hack scripts build into: ``$KAOS_CACHE_DIR``, else ``~/.cache/kaos``
    (``kaos_cli.tools.cache_dir`` reads it the same way; this package needs only the
    standard library)."""
    configured = (os.environ if environ is None else environ).get("KAOS_CACHE_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "kaos"


def registry_dir() -> Path:
    """Each running node leaves its state here (<ident>.json with the pid of its owner), so
    a node whose owner was killed (a test run stopped by a timeout) is torn down by the next."""
    return cache_dir() / "real-nodes"


def read_sysctl(name: str) -> str:
    return Path("/proc/sys", name).read_text().strip()


def cgroup_mounts() -> list[Path]:
    """Mount points of every cgroup hierarchy (v1 controllers, named ones, and v2)."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        pre, _, post = line.partition(" - ")
        if post.split(" ", 1)[0] in {"cgroup", "cgroup2"}:
            found.append(Path(pre.split()[4]))
    return found


def mount_points() -> list[str]:
    return [
        line.split()[4].replace("\\040", " ")
        for line in Path("/proc/self/mountinfo").read_text().splitlines()
    ]


def _run_text(argv: Sequence[str]) -> str:
    proc = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    return proc.stdout if proc.returncode == 0 else f"(exit {proc.returncode}) {proc.stderr}"


def host_snapshot() -> dict[str, Any]:
    """What the node could change on the host, as comparable data: the sysctls, the
    iptables rules (both back ends), ipsets, links, addresses, routes, mounts, the top-level
    cgroups of each hierarchy, and the hard-coded paths."""
    cgroups = {}
    for mount in cgroup_mounts():
        with contextlib.suppress(OSError):
            cgroups[str(mount)] = sorted(p.name for p in mount.iterdir() if p.is_dir())

    def strip_counters(text: str) -> list[str]:
        # iptables-save prints packet counters and a timestamp that change on their own.
        return [
            line.split(" [", 1)[0] if line.startswith(":") else line
            for line in text.splitlines()
            if not line.startswith("#")
        ]

    return {
        "sysctls": {name: read_sysctl(name) for name in HOST_SYSCTLS},
        "iptables": strip_counters(_run_text(["iptables-save"])),
        "iptables-legacy": strip_counters(_run_text(["iptables-legacy-save"]))
        if shutil.which("iptables-legacy-save")
        else [],
        # The real node's NetworkPolicy engine makes ipsets (in the node's namespace).
        "ipsets": sorted(_run_text(["ipset", "list", "-n"]).splitlines())
        if shutil.which("ipset")
        else [],
        "links": sorted(
            line.split(":")[1].strip().split("@")[0]
            for line in _run_text(["ip", "-o", "link", "show"]).splitlines()
        ),
        "addresses": sorted(_run_text(["ip", "-o", "-4", "addr", "show"]).splitlines()),
        "routes": sorted(_run_text(["ip", "route", "show", "table", "all"]).splitlines()),
        "mounts": sorted(mount_points()),
        "cgroups": cgroups,
        "paths": {str(p): p.exists() for p in HARD_CODED_PATHS},
        # Not compared: the nodes running at the time, whose doing host_changes leaves out.
        "nodes": _running_nodes(),
    }


def _foreign_mount_prefixes() -> tuple[str, ...]:
    """What other work on this shared machine mounts on its own while a node runs (part of
    nothing a node does): the image builder's storage and run directories (hack/images),
    in this cache and in the default one."""
    caches = {str(cache_dir()), str(cache_dir({}))}
    return (*(f"{c}/images/" for c in sorted(caches)), "/run/kaos-images",
            "/var/lib/containers/")  # fmt: skip


# The image builder's cgroups (buildah), which come and go with its builds.
FOREIGN_CGROUP_PREFIX = "buildah-"


def _difference(before: Any, after: Any) -> Any:
    """Lists as what went and what came (or that their order changed), mappings key by key,
    anything else as both values."""
    if isinstance(before, list) and isinstance(after, list):
        gone = [x for x in before if x not in after]
        new = [x for x in after if x not in before]
        return {"gone": gone, "new": new} if gone or new else {"order": "changed"}
    if isinstance(before, dict) and isinstance(after, dict):
        return {key: _difference(before.get(key), after.get(key))
                for key in sorted(before.keys() | after.keys())
                if before.get(key) != after.get(key)}  # fmt: skip
    return {"before": before, "after": after}


def _running_nodes() -> list[list[str]]:
    """[ident, workdir] of every node registered on the machine now."""
    found = []
    for entry in sorted(registry_dir().glob("*.json")):
        if entry.name == BASELINE:
            continue
        with contextlib.suppress(OSError, ValueError, KeyError):
            state = json.loads(entry.read_text())
            found.append([str(state["ident"]), str(Path(state["workdir"]).resolve())])
    return found


def host_changes(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What differs between two ``host_snapshot()``s; empty when the host is as it was.

    Left out: the image builder's own mounts and cgroups, and what the nodes running when
    either was taken made (another session's, on a shared machine; the node whose teardown
    is checked is gone from the registry by then): their link, address and routes, mounts
    and cgroups, and the host-wide sysctls and paths, which the last node to go writes
    back."""
    foreign = _foreign_mount_prefixes()
    others = {(ident, workdir) for ident, workdir in [*before.get("nodes", []),
                                                       *after.get("nodes", [])]}  # fmt: skip
    marks = tuple(f"kh-{ident}" for ident, _ in others)
    mount_prefixes = (*foreign, *(f"{workdir}/" for _, workdir in others),
                      *(f"/run/kaos-node-{ident}" for ident, _ in others))  # fmt: skip
    cgroup_names = {f"kaos-{ident}" for ident, _ in others}

    def own(snapshot: dict[str, Any]) -> dict[str, Any]:
        cgroups = {hierarchy: [n for n in names if not n.startswith(FOREIGN_CGROUP_PREFIX)
                               and n not in cgroup_names]
                   for hierarchy, names in snapshot["cgroups"].items()}  # fmt: skip
        mounts = [m for m in snapshot["mounts"] if not m.startswith(mount_prefixes)]
        mine = {**snapshot, "cgroups": cgroups, "mounts": mounts}
        mine.pop("nodes", None)
        for key in ("links", "addresses", "routes"):
            mine[key] = [line for line in snapshot[key] if not any(m in line for m in marks)]
        if others:
            mine.pop("sysctls", None)
            mine.pop("paths", None)
        return mine

    changes: dict[str, Any] = _difference(own(before), own(after))
    return changes
