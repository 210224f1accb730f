"""A real node for the test cluster: containerd, runc, CNI, a kubelet, kube-proxy and DNS.

``LocalCluster(real_node=True)`` (``hack/test-cluster up --real-node``) runs this node
beside its control plane instead of kwok's simulated ones: pods start as real containers.

Everything the node makes is its own and goes away with it, leaving the machine as it was:

* a network namespace (held by a pause process) joined to the host by a veth pair with no
  uplink: the host end carries the API server's address, the node end the node IP; the
  CNI bridge, the pod and Service addresses, kube-proxy's iptables rules and the
  ``ip_forward`` the bridge turns on all live in that namespace, which dies with its last
  process;
* a cgroup ``/kaos-<id>`` in each hierarchy as the kubelet's ``cgroupRoot`` (this machine
  runs cgroup v1: ``failCgroupV1: false``, ``cgroupDriver: cgroupfs``; nothing else of the
  machine's cgroups is touched), removed bottom-up at the end;
* every mount (container root filesystems, pod volumes, pod network namespaces) under the
  node's directory, unmounted at the end;
* the host sysctls the kubelet sets (``vm.overcommit_memory``, ``kernel.panic``, ...),
  recorded before it starts and written back after it stops;
* the host paths the components would share: runc's state goes to the node's directory
  and the shims' sockets to ``/run/kaos-node-<id>`` instead of ``/run/containerd``; the
  kubelet's links in the hard-coded ``/var/log/containers`` are removed (the directory
  too when it was not there before).

Binaries come from ``hack/k8s-build node`` (kubelet, kube-proxy, containerd, its shim and
ctr, CoreDNS, a pause binary); runc and the CNI plugins from Debian. The sandbox image is
made here from the pause binary (``tests.support.ociimage``). CoreDNS runs as a process in
the node's namespace, behind a ``kube-dns`` Service. Volumes of PersistentVolumeClaims come
from Rancher's local-path-provisioner, a process of the node too, behind the cluster's
default StorageClass (``tests.support.cluster.localpath``): directories in the node's own.
NetworkPolicies are enforced by kube-router's firewall, a process of the node too
(``tests.support.cluster.netpol``, built by ``hack/netpol-build``); its chains and sets
live in the node's namespace and are removed before it goes.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.cluster import BUILD_SCRIPT, TrackedProcess, build_env, localpath, netpol
from tests.support.cluster.host import (
    BASELINE,
    cache_dir,
    cgroup_mounts,
    host_snapshot,
    mount_points,
    read_sysctl,
    registry_dir,
)
from tests.support.cluster.local import SERVICE_CIDR
from tests.support.cluster.pki import _kubeconfig
from tests.support.cluster.processes import _die_with_parent
from tests.support.ociimage import Entry, build_archive

NODE_NAME = "kaos-node"
POD_SUBNET = "10.244.0.0/24"
CLUSTER_DNS = "10.96.0.10"
CLUSTER_DOMAIN = "cluster.local"
# The host end of the veth gets .1 of the first free 10.250.<n>.0/24, the node end .2.
LINK_NET_PREFIX = "10.250"
PAUSE_IMAGE = "kaos.local/pause:1"
# A static busybox (Debian's busybox-static) in a scratch image: the node's own checks.
TOOLBOX_IMAGE = "kaos.local/toolbox:1"
BUSYBOX = Path("/bin/busybox")
CNI_BIN_DIR = Path("/usr/lib/cni")
POLL_INTERVAL = 0.2


class NodeError(Exception):
    """The real node cannot be provided (missing tools) or did not come up."""


# ------------------------------------------------------------------------ binaries


@dataclass(frozen=True)
class NodeBinaries:
    kubelet: Path
    kube_proxy: Path
    containerd_bin: Path
    coredns: Path
    pause: Path
    provisioner: Path
    # The NetworkPolicy engine (tests.support.cluster.netpol), from hack/netpol-build.
    kube_router: Path

    @property
    def containerd(self) -> Path:
        return self.containerd_bin / "containerd"

    @property
    def ctr(self) -> Path:
        return self.containerd_bin / "ctr"

    @property
    def shim(self) -> Path:
        return self.containerd_bin / "containerd-shim-runc-v2"

    @classmethod
    def locate(cls, build_script: Path = BUILD_SCRIPT) -> NodeBinaries:
        env = build_env(build_script)
        kube = Path(env["KAOS_NODE_KUBE_BIN"])
        return cls(
            kubelet=kube / "kubelet",
            kube_proxy=kube / "kube-proxy",
            containerd_bin=Path(env["KAOS_CONTAINERD_BIN"]),
            coredns=Path(env["KAOS_COREDNS"]),
            pause=Path(env["KAOS_PAUSE"]),
            provisioner=Path(env["KAOS_LOCAL_PATH_PROVISIONER"]),
            kube_router=netpol.locate(),
        )

    def missing(self) -> list[str]:
        """Every missing piece, each with how to get it."""
        built = [self.kubelet, self.kube_proxy, self.containerd, self.shim, self.ctr,
                 self.coredns, self.pause, self.provisioner]  # fmt: skip
        gone = [f"{p.name} (hack/k8s-build node)" for p in built if not os.access(p, os.X_OK)]
        if not os.access(self.kube_router, os.X_OK):
            gone.append("kube-router (hack/netpol-build)")
        for tool, package in (("runc", "runc"), ("iptables", "iptables"),
                              ("conntrack", "conntrack"), ("nsenter", "util-linux"),
                              ("unshare", "util-linux"), ("ip", "iproute2"),
                              ("ipset", "ipset")):  # fmt: skip
            if shutil.which(tool) is None:
                gone.append(f"{tool} (apt-get install {package})")
        for plugin in ("bridge", "host-local", "loopback"):
            if not os.access(CNI_BIN_DIR / plugin, os.X_OK):
                gone.append(f"CNI {plugin} (apt-get install containernetworking-plugins)")
        if not os.access(BUSYBOX, os.X_OK):
            gone.append(f"{BUSYBOX} (apt-get install busybox-static)")
        return gone


def sweep_abandoned_nodes(
    binaries: NodeBinaries, *, log: Callable[[str], None] = lambda message: None
) -> None:
    """Tear down nodes whose owning process died without stopping them (their kubelet and
    containerd died with it; containers, mounts, cgroups and sysctls would stay)."""
    for entry in sorted(registry_dir().glob("*.json")):
        if entry.name == BASELINE:
            continue
        try:
            state = json.loads(entry.read_text())
        except (OSError, ValueError):
            continue
        owner = state.get("owner")
        if owner is None or Path(f"/proc/{owner}").exists():
            continue
        log(f"tearing down the real node {state.get('ident')} its owner {owner} left behind")
        RealNode.from_json(binaries, state).stop()
        entry.unlink(missing_ok=True)


def why_real_node_cannot_run(build_script: Path = BUILD_SCRIPT) -> str | None:
    """Every reason the real node cannot run here, in one sentence; None when it can."""
    if os.geteuid() != 0:
        return "the real node needs root (network namespaces, mounts, cgroups)"
    if not Path("/sys/fs/cgroup").is_dir():
        return "no cgroup file system at /sys/fs/cgroup"
    try:
        binaries = NodeBinaries.locate(build_script)
    except (subprocess.CalledProcessError, KeyError, OSError) as exc:
        return f"hack/k8s-build --print-env failed: {exc}"
    gone = binaries.missing()
    return f"missing {', '.join(gone)}" if gone else None


# ------------------------------------------------------------------- process util


def _pids_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(int(entry.name))
    return found


def _sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise NodeError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


# ---------------------------------------------------------------------- the node


@dataclass
class RealNode:
    """One node in ``workdir``: ``prepare_network()`` before the API server starts (it
    binds the host end's address), ``start(...)`` after it, ``stop()`` at the end."""

    binaries: NodeBinaries
    workdir: Path
    detach: bool = False
    timeout: float = 180.0
    log: Callable[[str], None] = lambda message: None
    ident: str = ""
    host_ip: str = ""
    node_ip: str = ""
    before: dict[str, Any] = field(default_factory=dict)
    procs: list[TrackedProcess] = field(default_factory=list)
    holder: TrackedProcess | None = None
    # The NetworkPolicy engine's chains and sets that its removal left (``stop``).
    netpol_left: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.ident:
            self.ident = hashlib.sha256(str(self.workdir.resolve()).encode()).hexdigest()[:8]

    # -- names -----------------------------------------------------------------

    @property
    def host_if(self) -> str:
        return f"kh-{self.ident}"

    @property
    def node_if(self) -> str:
        return f"kn-{self.ident}"

    @property
    def cgroup_root(self) -> str:
        return f"/kaos-{self.ident}"

    @property
    def containerd_dir(self) -> Path:
        return self.workdir / "containerd"

    @property
    def shim_socket_dir(self) -> Path:
        return Path("/run") / f"kaos-node-{self.ident}"

    @property
    def volumes_dir(self) -> Path:
        """Where the provisioner makes the volumes of claims."""
        return self.workdir / "volumes"

    @property
    def socket(self) -> Path:
        return self.containerd_dir / "containerd.sock"

    @property
    def netns(self) -> str:
        assert self.holder is not None, "the node's network is not prepared"
        return f"/proc/{self.holder.pid}/ns/net"

    def in_netns(self, *argv: str) -> list[str]:
        return ["nsenter", f"--net={self.netns}", "--", *argv]

    def ctr(self, *args: str, namespace: str = "k8s.io") -> list[str]:
        return [str(self.binaries.ctr), "--address", str(self.socket), "-n", namespace, *args]

    # -- state (detached mode) ---------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "ident": self.ident,
            "workdir": str(self.workdir),
            "host_ip": self.host_ip,
            "node_ip": self.node_ip,
            "before": self.before,
            "holder": self.holder.to_json() if self.holder else None,
            "processes": [p.to_json() for p in self.procs],
        }

    @classmethod
    def from_json(cls, binaries: NodeBinaries, state: dict[str, Any]) -> RealNode:
        node = cls(binaries, Path(state["workdir"]), detach=True, ident=state["ident"])
        node.host_ip, node.node_ip = state["host_ip"], state["node_ip"]
        node.before = state["before"]
        node.holder = TrackedProcess.from_json(state["holder"]) if state.get("holder") else None
        node.procs = [TrackedProcess.from_json(p) for p in state["processes"]]
        return node

    def running(self) -> bool:
        everything = [*self.procs, *([self.holder] if self.holder else [])]
        return bool(everything) and all(p.alive() for p in everything)

    # -- network -------------------------------------------------------------------

    def _free_link_net(self) -> ipaddress.IPv4Network:
        used = _sh("ip", "-o", "-4", "addr", "show").stdout + _sh("ip", "route").stdout
        for n in range(1, 255):
            net = ipaddress.IPv4Network(f"{LINK_NET_PREFIX}.{n}.0/24")
            if f"{LINK_NET_PREFIX}.{n}." not in used:
                return net
        raise NodeError(f"no free {LINK_NET_PREFIX}.<n>.0/24 for the node's link")

    def prepare_network(self) -> str:
        """Record the host, make the namespace and the veth pair; return the host end's
        address (the API server binds and advertises it)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        sweep_abandoned_nodes(self.binaries, log=self.log)
        self.before = self._host_baseline()
        self.holder = self._spawn("netns", ["unshare", "--net", "--", str(self.binaries.pause)],
                                  argv0=str(self.binaries.pause), in_netns=False)  # fmt: skip
        deadline = time.monotonic() + 10
        host_netns = os.readlink("/proc/self/ns/net")

        def joined(pid: int) -> bool:
            try:
                return os.readlink(f"/proc/{pid}/ns/net") != host_netns
            except OSError:
                return False

        while not joined(self.holder.pid) or not self.holder.alive():
            if time.monotonic() > deadline or not self.holder.alive():
                raise NodeError(f"the namespace holder did not start: {self.holder.log_tail()}")
            time.sleep(POLL_INTERVAL / 4)
        net = self._free_link_net()
        hosts = list(net.hosts())
        self.host_ip, self.node_ip = str(hosts[0]), str(hosts[1])
        _sh("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.node_if)
        _sh("ip", "link", "set", self.node_if, "netns", str(self.holder.pid))
        _sh("ip", "addr", "add", f"{self.host_ip}/24", "dev", self.host_if)
        _sh("ip", "link", "set", self.host_if, "up")
        for argv in (
            ["ip", "link", "set", "lo", "up"],
            ["ip", "addr", "add", f"{self.node_ip}/24", "dev", self.node_if],
            ["ip", "link", "set", self.node_if, "up"],
            # Service addresses need a route before kube-proxy's DNAT applies; the host
            # does not forward, so nothing leaves the machine by it.
            ["ip", "route", "add", "default", "via", self.host_ip],
        ):
            _sh(*self.in_netns(*argv))
        self.log(f"node network: host {self.host_if} {self.host_ip}, node {self.node_ip}")
        self._register()
        return self.host_ip

    @property
    def _registry_entry(self) -> Path:
        return registry_dir() / f"{self.ident}.json"

    def _register(self) -> None:
        """Record the node (updated as processes start) for ``sweep_abandoned_nodes``; a
        detached node belongs to no process (``hack/test-cluster down`` ends it)."""
        self._registry_entry.parent.mkdir(parents=True, exist_ok=True)
        owner = None if self.detach else os.getpid()
        self._registry_entry.write_text(json.dumps({"owner": owner, **self.to_json()}) + "\n")

    # -- start -------------------------------------------------------------------

    def start(self, pki: Any, server: str, api: Any, deadline: float) -> None:
        """Bring up containerd, the kubelet, kube-proxy and CoreDNS against ``server``.

        ``pki`` is the cluster's ``_Pki`` (it signs the components' certificates), ``api``
        its ``_ApiClient``."""
        self._deadline = deadline
        self._make_cgroup_root()
        kubeconfigs = self._certificates(pki, server)
        self._containerd_config()
        containerd = self._spawn(
            "containerd", [str(self.binaries.containerd), "--config",
                           str(self.containerd_dir / "config.toml")],
        )  # fmt: skip
        self._wait("containerd", [containerd], lambda: _sh(*self.ctr("version"), check=False)
                   .returncode == 0)  # fmt: skip
        self.import_archive(self._pause_archive())
        self.import_archive(self._toolbox_archive())
        kubelet = self._spawn("kubelet", self._kubelet_args(pki, kubeconfigs["kubelet"]))
        proxy = self._spawn("kube-proxy", self._kube_proxy_args(kubeconfigs["kube-proxy"]))
        coredns = self._spawn("coredns", self._coredns_args(kubeconfigs["admin"]))
        self._dns_service(api)
        # The provisioner reads its ConfigMap when it starts.
        for path, obj in localpath.objects(self.volumes_dir, TOOLBOX_IMAGE):
            api.create(path, obj)
        provisioner = self._spawn("local-path-provisioner", localpath.args(
            self.binaries.provisioner, kubeconfigs["admin"], TOOLBOX_IMAGE))  # fmt: skip
        self._register()
        everything = [containerd, kubelet, proxy, coredns, provisioner]
        self._wait(f"node {NODE_NAME} Ready", everything, lambda: api.node_ready(NODE_NAME))
        # NetworkPolicy: kube-router's firewall alone (tests.support.cluster.netpol); it
        # reads the node's object when it starts, so only once the kubelet registered it.
        everything.append(self._spawn("kube-router", netpol.args(
            self.binaries.kube_router, kubeconfigs["admin"], NODE_NAME, SERVICE_CIDR)))  # fmt: skip
        self._register()
        self._wait("kube-proxy /healthz", everything,
                   lambda: _http_ok(f"http://{self.node_ip}:10256/healthz"))  # fmt: skip
        self._wait("CoreDNS /ready", everything,
                   lambda: _http_ok(f"http://{self.node_ip}:8181/ready"))  # fmt: skip
        self._wait("kube-router /healthz", everything,
                   lambda: _http_ok(netpol.health_url(self.node_ip)))  # fmt: skip

    def _wait(self, what: str, watch: Sequence[TrackedProcess], ready: Callable[[], bool]) -> None:
        while True:
            for p in watch:
                if not p.alive():
                    raise NodeError(f"{p.name} exited waiting for {what}; {p.log}:\n{p.log_tail()}")
            if ready():
                self.log(f"real node: {what}")
                return
            if time.monotonic() > self._deadline:
                tails = "\n".join(f"--- {p.name} ({p.log}):\n{p.log_tail(10)}" for p in watch)
                raise NodeError(f"timed out waiting for {what}\n{tails}")
            time.sleep(POLL_INTERVAL)

    def _spawn(
        self, name: str, argv: Sequence[str], *, argv0: str | None = None, in_netns: bool = True
    ) -> TrackedProcess:
        log = self.workdir / f"{name}.log"
        full = self.in_netns(*argv) if in_netns else list(argv)
        env = {**os.environ, "PATH": f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin"}
        with open(log, "ab") as out:
            popen = subprocess.Popen(
                full,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                env=env,
                start_new_session=True,
                preexec_fn=None if self.detach else _die_with_parent,
            )
        # nsenter and unshare exec the program in place: the pid is the program's.
        proc = TrackedProcess(name, argv0 or argv[0], popen.pid, log, popen)
        if name != "netns":
            self.procs.append(proc)
        return proc

    def _make_cgroup_root(self) -> None:
        """The kubelet refuses a cgroupRoot that does not exist: make it in every
        hierarchy (cpuset needs its cpus and mems filled from the parent)."""
        for mount in cgroup_mounts():
            path = mount / self.cgroup_root.lstrip("/")
            path.mkdir(exist_ok=True)
            for knob in ("cpuset.cpus", "cpuset.mems"):
                if (path / knob).exists() and not (path / knob).read_text().strip():
                    (path / knob).write_text((mount / knob).read_text())

    def _certificates(self, pki: Any, server: str) -> dict[str, Path]:
        subjects = {
            "kubelet": f"/O=system:nodes/CN=system:node:{NODE_NAME}",
            "kube-proxy": "/CN=system:kube-proxy",
        }
        kubeconfigs = {"admin": pki.dir.parent / "admin.kubeconfig"}
        for name, subject in subjects.items():
            pki.issue_client(name, subject)
            path = self.workdir / f"{name}.kubeconfig"
            path.write_text(json.dumps(_kubeconfig(server, pki, name), indent=2) + "\n")
            path.chmod(0o600)
            kubeconfigs[name] = path
        return kubeconfigs

    def _containerd_config(self) -> None:
        d = self.containerd_dir
        cni_conf = self.workdir / "cni" / "net.d"
        cni_conf.mkdir(parents=True, exist_ok=True)
        (cni_conf / "10-kaos.conflist").write_text(json.dumps({
            "cniVersion": "1.0.0",
            "name": "kaos",
            "plugins": [{
                "type": "bridge", "bridge": "kaos0", "isGateway": True, "ipMasq": True,
                "hairpinMode": True,
                "ipam": {"type": "host-local", "ranges": [[{"subnet": POD_SUBNET}]],
                         "routes": [{"dst": "0.0.0.0/0"}],
                         "dataDir": str(self.workdir / "cni" / "ipam")},
            }],
        }, indent=2) + "\n")  # fmt: skip
        runc = shutil.which("runc", path="/usr/sbin:/usr/bin:/sbin:/bin") or "runc"
        (d / "config.toml").parent.mkdir(parents=True, exist_ok=True)
        (d / "config.toml").write_text(f"""\
version = 3
root = "{d / "root"}"
state = "{d / "state"}"
# Plugins that would write outside the node's directory or need what is not here.
disabled_plugins = [
  "io.containerd.internal.v1.opt",
  "io.containerd.nri.v1.nri",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.blockfile",
  "io.containerd.snapshotter.v1.erofs",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[grpc]
  address = "{self.socket}"

[ttrpc]
  address = "{d / "containerd.sock.ttrpc"}"

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "{PAUSE_IMAGE}"

[plugins."io.containerd.cri.v1.runtime"]
  # runc cannot raise oom_score_adj here (no CAP_SYS_RESOURCE): keep the container's.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_cdi = false
  cdi_spec_dirs = []
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "{runc}"
        # runc's state, by default in the machine-wide /run/containerd/runc.
        Root = "{d / "state" / "runc"}"
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["{CNI_BIN_DIR}"]
    conf_dir = "{cni_conf}"

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

# Not the machine-wide /run/containerd/s: a directory of this node's (short: a socket path
# is at most 108 bytes, so containerd allows 42 here).
[plugins."io.containerd.shim.v1.manager"]
  socket_dir = "{self.shim_socket_dir}"
""")

    def _pause_archive(self) -> Path:
        return self._image_archive("pause", PAUSE_IMAGE,
                                   {"pause": Entry(self.binaries.pause)}, ["/pause"])  # fmt: skip

    def _toolbox_archive(self) -> Path:
        files = {"bin/busybox": Entry(BUSYBOX)}
        # mkdir and rm: the storage provisioner's helper pods run this image too.
        for applet in ("sh", "id", "wget", "nslookup", "httpd", "cat", "touch", "sleep", "ls",
                       "mkdir", "rm", "grep"):  # fmt: skip
            files[f"bin/{applet}"] = Entry(target="busybox")
        files["tmp/.keep"] = Entry(BUSYBOX, mode=0o644)
        return self._image_archive("toolbox", TOOLBOX_IMAGE, files, ["/bin/sh"])

    def _image_archive(
        self, name: str, ref: str, files: dict[str, Entry], entrypoint: list[str]
    ) -> Path:
        out = cache_dir() / "node-images" / f"{name}.tar"
        build_archive(out, ref, files, entrypoint=entrypoint)
        return out

    def runtime_containers(self) -> set[str]:
        """The container IDs containerd itself lists in the CRI's namespace."""
        proc = _sh(*self.ctr("containers", "ls", "-q"))
        return set(proc.stdout.split())

    def import_archive(self, archive: Path, timeout: float = 900) -> None:
        """``ctr -n k8s.io images import`` (unpacked for the CRI's overlayfs snapshotter)."""
        proc = subprocess.run(
            self.ctr("images", "import", "--platform", "linux/amd64", str(archive)),
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            raise NodeError(f"ctr images import {archive} failed: {proc.stderr.strip()}")

    def _kubelet_args(self, pki: Any, kubeconfig: Path) -> list[str]:
        kdir = self.workdir / "kubelet"
        (kdir / "pki").mkdir(parents=True, exist_ok=True)
        resolv = self.workdir / "resolv.conf"
        resolv.write_text("# no upstream resolver: the node reaches nothing off this machine\n")
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": self.cgroup_root,
            "containerRuntimeEndpoint": f"unix://{self.socket}",
            "address": self.node_ip,
            "port": 10250,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(pki.ca_crt)},
            },
            "authorization": {"mode": "Webhook"},
            "clusterDNS": [CLUSTER_DNS],
            "clusterDomain": CLUSTER_DOMAIN,
            "resolvConf": str(resolv),
            "podCIDR": POD_SUBNET,
            "failSwapOn": False,
            "podLogsDir": str(self.workdir / "pod-logs"),
            "volumePluginDir": str(kdir / "volume-plugins"),
            "serializeImagePulls": False,
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "2%",
                             "imagefs.available": "2%", "nodefs.inodesFree": "2%"},
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "maxPods": 60,
            "fileCheckFrequency": "0s",
            "syncFrequency": "10s",
            "nodeStatusReportFrequency": "20s",
            "shutdownGracePeriod": "0s",
        }  # fmt: skip
        path = self.workdir / "kubelet-config.json"
        path.write_text(json.dumps(config, indent=2) + "\n")
        return [
            str(self.binaries.kubelet),
            f"--config={path}",
            f"--kubeconfig={kubeconfig}",
            f"--root-dir={kdir}",
            f"--cert-dir={kdir / 'pki'}",
            f"--hostname-override={NODE_NAME}",
            f"--node-ip={self.node_ip}",
            "--v=1",
        ]

    def _kube_proxy_args(self, kubeconfig: Path) -> list[str]:
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(kubeconfig)},
            "mode": "iptables",
            "clusterCIDR": POD_SUBNET,
            "hostnameOverride": NODE_NAME,
            "healthzBindAddress": f"{self.node_ip}:10256",
            "metricsBindAddress": "127.0.0.1:10249",
            # Leave the conntrack table's size and timeouts (machine-wide) alone.
            "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s",
                          "tcpCloseWaitTimeout": "0s"},
        }  # fmt: skip
        path = self.workdir / "kube-proxy-config.json"
        path.write_text(json.dumps(config, indent=2) + "\n")
        return [str(self.binaries.kube_proxy), f"--config={path}", "--v=1"]

    def _coredns_args(self, kubeconfig: Path) -> list[str]:
        corefile = self.workdir / "Corefile"
        corefile.write_text(f"""\
.:53 {{
    bind {self.node_ip}
    errors
    ready {self.node_ip}:8181
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 5
}}
""")
        return [str(self.binaries.coredns), "-conf", str(corefile)]

    def _dns_service(self, api: Any) -> None:
        """``kube-dns`` in kube-system, its one endpoint CoreDNS on the node IP."""
        ports = [("dns", "UDP"), ("dns-tcp", "TCP")]
        api.create("/api/v1/namespaces/kube-system/services", {
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "kube-dns", "namespace": "kube-system",
                         "labels": {"k8s-app": "kube-dns"}},
            "spec": {"clusterIP": CLUSTER_DNS,
                     "ports": [{"name": n, "protocol": p, "port": 53, "targetPort": 53}
                               for n, p in ports]},
        })  # fmt: skip
        api.create("/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices", {
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "kube-dns-node", "namespace": "kube-system",
                         "labels": {"kubernetes.io/service-name": "kube-dns",
                                    "endpointslice.kubernetes.io/managed-by": "kaos-test-cluster"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [self.node_ip], "conditions": {"ready": True},
                           "nodeName": NODE_NAME}],
            "ports": [{"name": n, "protocol": p, "port": 53} for n, p in ports],
        })  # fmt: skip

    # -- stop --------------------------------------------------------------------

    def stop(self, grace: float = 10.0) -> None:
        """Stop everything, then undo all the node did to the host (see the module doc).
        Safe to call on a half-started node and more than once."""
        started = time.monotonic()

        def step(what: str) -> None:
            self.log(f"real node down: {time.monotonic() - started:5.1f}s {what}")

        for p in reversed([p for p in self.procs if p.name != "containerd"]):
            p.stop(grace)
            step(f"{p.name} stopped")
        self._kill_containers()
        step("containers killed")
        for p in self.procs:
            if p.name == "containerd":
                p.stop(grace)
                step("containerd stopped")
        # Shims outlive containerd; they were all started for this node's socket.
        for pid in _pids_mentioning(str(self.socket)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.procs = []
        self._unmount_all()
        self._remove_cgroups()
        if self.holder is not None and self.holder.alive():
            # The namespace takes them along when it goes; removed first all the same, so
            # that what is left is seen (``netpol_left``) rather than assumed gone.
            self.netpol_left = netpol.remove_rules(self.in_netns)
            step(f"NetworkPolicy chains and sets removed ({len(self.netpol_left)} left)")
        if self.holder is not None:
            self.holder.stop(grace)
            self.holder = None
        # The namespace is gone with its last process, and the veth pair with it; the
        # host end is removed here too in case something still held the namespace.
        _sh("ip", "link", "del", self.host_if, check=False)
        shutil.rmtree(self.shim_socket_dir, ignore_errors=True)
        self._remove_container_log_links()
        self._registry_entry.unlink(missing_ok=True)
        # The host-wide settings go back when the last node on the machine goes.
        if not self._other_nodes():
            self._restore_host()
            (registry_dir() / BASELINE).unlink(missing_ok=True)
        step("mounts, cgroups, network and sysctls restored")

    def _cgroup_dirs(self) -> list[Path]:
        """Every cgroup directory under the node's root, deepest first; and under
        containerd's default parent ``/k8s.io`` (containers started with ``ctr run``)
        when the node made it."""
        found: list[Path] = []
        existed = self.before.get("cgroups") or {}
        for mount in cgroup_mounts():
            names = [self.cgroup_root.lstrip("/")]
            if "k8s.io" not in existed.get(str(mount), ["k8s.io"]):
                names.append("k8s.io")
            for root in (mount / name for name in names):
                if root.is_dir():
                    found.extend(Path(p) for p, _, _ in os.walk(root))
        return sorted(found, key=lambda p: len(p.parts), reverse=True)

    def _kill_containers(self) -> None:
        """SIGKILL every process in the node's cgroups (the containers, and anything they
        started), until none is left."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            pids: set[int] = set()
            for d in self._cgroup_dirs():
                with contextlib.suppress(OSError):
                    pids.update(int(x) for x in (d / "cgroup.procs").read_text().split())
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(POLL_INTERVAL)

    def _unmount_all(self) -> None:
        prefix = str(self.workdir.resolve()) + "/"
        for _ in range(10):
            ours = [m for m in mount_points() if m.startswith(prefix)]
            if not ours:
                return
            for mount in sorted(ours, key=len, reverse=True):
                _sh("umount", "-l", mount, check=False)
        raise NodeError(f"mounts under {prefix} would not go away")

    def _remove_cgroups(self) -> None:
        deadline = time.monotonic() + 30
        while (left := self._cgroup_dirs()) and time.monotonic() < deadline:
            for d in left:
                with contextlib.suppress(OSError):
                    d.rmdir()
            if self._cgroup_dirs():
                self._kill_containers()
                time.sleep(POLL_INTERVAL)
        if left := self._cgroup_dirs():
            raise NodeError(f"cgroups left behind: {', '.join(map(str, left))}")

    def _other_nodes(self) -> list[Path]:
        return [p for p in registry_dir().glob("*.json")
                if p != self._registry_entry and p.name != BASELINE]  # fmt: skip

    def _host_baseline(self) -> dict[str, Any]:
        """The host as it was before any node of this machine ran: sysctls are host-wide,
        so a second node started while a first runs must restore what the first found."""
        baseline = registry_dir() / BASELINE
        if self._other_nodes():
            with contextlib.suppress(OSError, ValueError):
                found: dict[str, Any] = json.loads(baseline.read_text())
                return found
        snapshot = host_snapshot()
        baseline.parent.mkdir(parents=True, exist_ok=True)
        baseline.write_text(json.dumps(snapshot) + "\n")
        return snapshot

    def _remove_container_log_links(self) -> None:
        """The kubelet links each container's log into the hard-coded /var/log/containers:
        remove this node's links, and the directory when it is empty and was not there."""
        links = Path("/var/log/containers")
        prefix = str(self.workdir.resolve()) + "/"
        with contextlib.suppress(OSError):
            for link in links.iterdir():
                if link.is_symlink() and os.readlink(link).startswith(prefix):
                    link.unlink()
        existed = (self.before.get("paths") or {}).get(str(links), True)
        if not existed:
            with contextlib.suppress(OSError):
                links.rmdir()  # only when empty: another node's links keep it

    def _restore_host(self) -> None:
        for name, value in (self.before.get("sysctls") or {}).items():
            with contextlib.suppress(OSError):
                if read_sysctl(name) != value:
                    Path("/proc/sys", name).write_text(value + "\n")
        for path, existed in (self.before.get("paths") or {}).items():
            if not existed:
                shutil.rmtree(path, ignore_errors=True)
