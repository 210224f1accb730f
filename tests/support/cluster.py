"""A real Kubernetes control plane on loopback for tests, without Docker.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok (which plays
the kubelet of simulated nodes: pods get scheduled, become Running and Ready, but no
container runs) are started from the binaries that ``hack/k8s-build`` caches. The API
server authenticates with client certificates and service-account tokens, authorises
with Node and RBAC, and runs the default admission plugins, as on a normal cluster.

Every process runs in its own process group with its log in the cluster's directory;
``stop()`` kills the groups, also after a failed start. Only the standard library and
the ``openssl`` command are used, so this module also drives ``hack/test-cluster``::

    python -m tests.support.cluster up|down|env
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TypeVar

if TYPE_CHECKING:
    from tests.support.realnode import RealNode

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "hack" / "k8s-build"

SERVICE_CIDR = "10.96.0.0/16"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
# Pod IPs are recorded by kwok, never dialled: nothing listens behind them.
POD_CIDR = "10.244.0.0/16"
# Every simulated container's log is this file of the cluster's workdir (a kwok ClusterLogs,
# followed), so ``kubectl logs [-f]`` has something to serve: tests append lines to it.
POD_LOG_NAME = "pod-logs.log"
# The annotation that tells kwok which nodes it plays the kubelet for.
KWOK_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
# kwok's PortForward kind, served as a CRD (``--enable-crds=PortForward``) so a test can
# point ``kubectl port-forward`` to a simulated pod at a process on loopback (the console's
# tests reach the local stack through the API server that way). Schema-free: kwok validates.
KWOK_PORTFORWARD_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "portforwards.kwok.x-k8s.io"},
    "spec": {
        "group": "kwok.x-k8s.io",
        "scope": "Namespaced",
        "names": {"kind": "PortForward", "listKind": "PortForwardList",
                  "plural": "portforwards", "singular": "portforward"},
        "versions": [{
            "name": "v1alpha1", "served": True, "storage": True,
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": True,
            }},
        }],
    },
}  # fmt: skip
# The real node's name (tests.support.realnode.NODE_NAME; kept here to import lazily).
REAL_NODE_NAME = "kaos-node"
T = TypeVar("T")
POLL_INTERVAL = 0.1  # seconds between readiness probes; a wait with a deadline, not a sleep


class ClusterError(Exception):
    """Root of the errors raised while providing a test cluster."""


class BinariesMissing(ClusterError):
    """The control-plane binaries are not built yet."""


class StartupFailed(ClusterError):
    """A component did not become ready; the message carries the tail of its log."""


# --------------------------------------------------------------------------- binaries


def build_env(build_script: Path = BUILD_SCRIPT) -> dict[str, str]:
    """The locations ``hack/k8s-build --print-env`` names (KEY=value lines)."""
    out = subprocess.run(
        [str(build_script), "--print-env"], check=True, capture_output=True, text=True
    ).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


@dataclass(frozen=True)
class Binaries:
    """Where ``hack/k8s-build`` puts the pinned binaries (it is the one source of versions)."""

    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    etcd: Path
    kwok: Path
    kwok_stages: Path
    helm: Path
    bin_dir: Path
    kube_version: str

    @classmethod
    def locate(cls, build_script: Path = BUILD_SCRIPT) -> Binaries:
        env = build_env(build_script)
        kube_bin = Path(env["KAOS_KUBE_BIN"])
        return cls(
            kube_apiserver=kube_bin / "kube-apiserver",
            kube_controller_manager=kube_bin / "kube-controller-manager",
            kube_scheduler=kube_bin / "kube-scheduler",
            etcd=Path(env["KAOS_ETCD"]),
            kwok=Path(env["KAOS_KWOK"]),
            kwok_stages=Path(env["KAOS_KWOK_STAGES"]),
            helm=Path(env["KAOS_HELM"]),
            bin_dir=Path(env["KAOS_K8S_BIN"]),
            kube_version=env["KAOS_KUBE_VERSION"],
        )

    def missing(self) -> list[str]:
        paths = [
            self.kube_apiserver,
            self.kube_controller_manager,
            self.kube_scheduler,
            self.etcd,
            self.kwok,
            self.helm,
        ]
        gone = [p.name for p in paths if not os.access(p, os.X_OK)]
        if not self.kwok_stages.is_dir():
            gone.append("kwok stages")
        return gone

    def require(self) -> Binaries:
        if gone := self.missing():
            raise BinariesMissing(
                f"missing {', '.join(gone)}: run hack/k8s-build once "
                "(a cold build takes tens of minutes; later runs reuse the cache)"
            )
        return self


def build_binaries(build_script: Path = BUILD_SCRIPT) -> Binaries:
    """Run ``hack/k8s-build`` (a no-op when everything is cached) and locate the result."""
    subprocess.run([str(build_script)], check=True)
    return Binaries.locate(build_script).require()


# ----------------------------------------------------------------- handle for tests


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


# ------------------------------------------------------------------------ processes


@dataclass
class TrackedProcess:
    """A test service started in its own process group (``popen``), or found again from a
    state file by pid (``popen`` None; then checked to still run ``argv0``)."""

    name: str
    argv0: str
    pid: int
    log: Path
    popen: subprocess.Popen[bytes] | None = None

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        return _pid_runs(self.pid, self.argv0)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def signal_group(self, sig: int) -> None:
        # A detached process found again from a state file is only signalled while it
        # still runs our binary, so a recycled pid is never hit.
        if self.popen is None and not _pid_runs(self.pid, self.argv0):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)
        if self.popen is not None and self.popen.poll() is None and sig == signal.SIGKILL:
            with contextlib.suppress(ProcessLookupError):
                self.popen.kill()

    def stop(self, grace: float) -> None:
        """SIGTERM to its group; SIGKILL after ``grace`` seconds; reaped."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            self.signal_group(sig)
            deadline = time.monotonic() + grace
            while self.alive() and time.monotonic() < deadline:
                time.sleep(POLL_INTERVAL / 5)
            if not self.alive():
                break
        self.reap()

    def reap(self) -> None:
        if self.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=0)

    def to_json(self) -> dict[str, Any]:
        """What a state file keeps of it (read back by ``from_json``)."""
        return {"name": self.name, "pid": self.pid, "argv0": self.argv0, "log": str(self.log)}

    @classmethod
    def from_json(cls, entry: dict[str, Any]) -> Self:
        return cls(entry["name"], entry["argv0"], int(entry["pid"]), Path(entry["log"]))


def _pid_runs(pid: int, argv0: str) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return cmdline == argv0 and state != "Z"


def _die_with_parent() -> None:
    """In the child: get SIGKILL when the process that started it dies (Linux), so a
    test run that is killed leaves no control plane behind."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)


def _free_ports(count: int) -> list[int]:
    """Ports the OS hands out as free on 127.0.0.1, all held at once so they differ."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


# ------------------------------------------------------------------------------ PKI


_OPENSSL_CNF = """\
[req]
distinguished_name = dn
prompt = no
[dn]
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign, digitalSignature
subjectKeyIdentifier = hash
[server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = {sans}
[client]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
"""

_API_SANS = [
    "IP:127.0.0.1",
    "DNS:localhost",
    "IP:10.96.0.1",
    "DNS:kubernetes",
    "DNS:kubernetes.default",
    "DNS:kubernetes.default.svc",
    "DNS:kubernetes.default.svc.cluster.local",
]


class _Pki:
    """Throwaway CAs and the certificates the components present, made with openssl: the
    cluster CA, and the front-proxy CA that aggregated API servers trust, as kubeadm does."""

    CLIENTS = {
        "admin": "/O=system:masters/CN=kaos-admin",
        "controller-manager": "/CN=system:kube-controller-manager",
        "scheduler": "/CN=system:kube-scheduler",
    }
    FRONT_PROXY_CLIENT = "front-proxy-client"

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.ca_crt = self.crt("ca")
        self.ca_key = self.key("ca")
        self.front_proxy_ca_crt = self.crt("front-proxy-ca")
        self.sa_key = self.key("sa")
        self.sa_pub = directory / "sa.pub"

    def crt(self, name: str) -> Path:
        return self.dir / f"{name}.crt"

    def key(self, name: str) -> Path:
        return self.dir / f"{name}.key"

    def create(self, extra_sans: Sequence[str] = ()) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        cnf = self.dir / "openssl.cnf"
        cnf.write_text(_OPENSSL_CNF.format(sans=", ".join([*_API_SANS, *extra_sans])))
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-noenc"]
        common = ["-x509", "-days", "3650", "-config", str(cnf), *ec]
        # name: (extensions section, subject, signing CA or None for a CA of its own)
        certs: dict[str, tuple[str, str, str | None]] = {
            "ca": ("ca", "/CN=kaos-test-ca", None),
            "front-proxy-ca": ("ca", "/CN=kaos-test-front-proxy-ca", None),
            "apiserver": ("server", "/CN=kube-apiserver", "ca"),
            self.FRONT_PROXY_CLIENT: ("client", f"/CN={self.FRONT_PROXY_CLIENT}", "front-proxy-ca"),
            **{name: ("client", subject, "ca") for name, subject in self.CLIENTS.items()},
        }
        for name, (ext, subject, ca) in certs.items():
            signer = [] if ca is None else ["-CA", str(self.crt(ca)), "-CAkey", str(self.key(ca))]
            self._openssl(
                "req", *common, *signer, "-extensions", ext, "-subj", subject,
                "-keyout", str(self.key(name)), "-out", str(self.crt(name)),
            )  # fmt: skip
        self._openssl(
            "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
            "-out", str(self.sa_key),
        )  # fmt: skip
        self._openssl("pkey", "-in", str(self.sa_key), "-pubout", "-out", str(self.sa_pub))

    def issue_client(self, name: str, subject: str) -> None:
        """A client certificate ``name`` for ``subject``, signed by the cluster CA."""
        self._openssl(
            "req", "-x509", "-days", "3650", "-config", str(self.dir / "openssl.cnf"),
            "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-noenc",
            "-CA", str(self.ca_crt), "-CAkey", str(self.ca_key), "-extensions", "client",
            "-subj", subject, "-keyout", str(self.key(name)), "-out", str(self.crt(name)),
        )  # fmt: skip

    def _openssl(self, *args: str) -> None:
        proc = subprocess.run(["openssl", *args], capture_output=True, text=True)
        if proc.returncode != 0:
            raise StartupFailed(f"openssl {args[0]} failed: {proc.stderr.strip()}")


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def _kubeconfig(server: str, pki: _Pki, user: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "kaos-test",
                "cluster": {"server": server, "certificate-authority-data": _b64(pki.ca_crt)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": _b64(pki.crt(user)),
                    "client-key-data": _b64(pki.key(user)),
                },
            }
        ],
        "contexts": [{"name": "kaos-test", "context": {"cluster": "kaos-test", "user": user}}],
        "current-context": "kaos-test",
    }


# --------------------------------------------------------------------- the cluster


@dataclass
class _Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    kwok: int

    @classmethod
    def allocate(cls) -> _Ports:
        return cls(*_free_ports(6))


@dataclass
class LocalCluster:
    """A private control plane in ``workdir``: ``start()`` it, ``stop()`` it.

    With ``detach`` the processes survive this Python process (``hack/test-cluster up``)
    and are found again through ``workdir/state.json``; otherwise they get SIGKILL when
    it dies, so no orphan outlives a killed test run.

    With ``real_node`` the cluster gets one real node (``tests.support.realnode``: kubelet,
    containerd, runc, CNI, kube-proxy, DNS) instead of kwok's simulated ones, and the API
    server listens on the host end of the node's link instead of loopback.
    """

    binaries: Binaries
    workdir: Path
    nodes: int = 1
    detach: bool = False
    timeout: float = 90.0
    log: Callable[[str], None] = lambda message: None
    real_node: bool = False
    _node: RealNode | None = field(default=None, init=False)
    _procs: list[TrackedProcess] = field(default_factory=list, init=False)
    _started: float = field(default=0.0, init=False)

    # -- lifecycle --------------------------------------------------------------

    def start(self) -> Cluster:
        self._started = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            return self._start()
        except BaseException:
            self.stop(remove=False)
            raise

    def stop(self, *, remove: bool = True, grace: float = 5.0) -> None:
        """Kill every component (TERM, then KILL after ``grace``); drop the etcd data,
        and with ``remove`` the whole working directory."""
        node, self._node = self._node, None
        if node is not None:
            node.stop()
        procs, self._procs = self._procs, []
        _terminate(procs, grace)
        shutil.rmtree(self.workdir / "etcd-data", ignore_errors=True)
        if remove:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- detached mode ----------------------------------------------------------

    @property
    def state_file(self) -> Path:
        return self.workdir / "state.json"

    def _save_state(self, cluster: Cluster) -> None:
        state = {
            "kubeconfig": str(cluster.kubeconfig),
            "server": cluster.server,
            "nodes": list(cluster.node_names),
            "real_node": self._node.to_json() if self._node is not None else None,
            "processes": [p.to_json() for p in self._procs],
        }
        self.state_file.write_text(json.dumps(state, indent=2) + "\n")

    @classmethod
    def attach(cls, binaries: Binaries, workdir: Path) -> tuple[LocalCluster, Cluster] | None:
        """The detached cluster recorded in ``workdir``, if its processes still run."""
        try:
            state = json.loads((workdir / "state.json").read_text())
        except (OSError, ValueError):
            return None
        local = cls(binaries, workdir, detach=True)
        if state.get("real_node"):
            from tests.support.realnode import NodeBinaries, RealNode

            local.real_node = True
            local._node = RealNode.from_json(NodeBinaries.locate(), state["real_node"])
        local._procs = [TrackedProcess.from_json(p) for p in state.get("processes", [])]
        handle = Cluster(
            kubeconfig=Path(state["kubeconfig"]),
            server=state["server"],
            workdir=workdir,
            helm=binaries.helm,
            bin_dir=binaries.bin_dir,
            node_names=tuple(state.get("nodes", ())),
        )
        return local, handle

    def running(self) -> bool:
        node_runs = self._node is None or self._node.running()
        return bool(self._procs) and all(p.alive() for p in self._procs) and node_runs

    # -- startup ----------------------------------------------------------------

    def _start(self) -> Cluster:
        self.binaries.require()
        ports = _Ports.allocate()
        pki = _Pki(self.workdir / "pki")
        host = "127.0.0.1"
        if self.real_node:
            from tests.support.realnode import NodeBinaries, RealNode

            node_binaries = NodeBinaries.locate()
            if gone := node_binaries.missing():
                raise BinariesMissing(f"the real node lacks {', '.join(gone)}")
            self._node = RealNode(node_binaries, self.workdir / "node", detach=self.detach,
                                  log=self.log)  # fmt: skip
            host = self._node.prepare_network()
            self.nodes = 0  # pods go to the real node only
        pki.create(extra_sans=[f"IP:{host}"] if host != "127.0.0.1" else [])
        server = f"https://{host}:{ports.apiserver}"
        kubeconfigs = {}
        for user in pki.CLIENTS:
            path = self.workdir / f"{user}.kubeconfig"
            path.write_text(json.dumps(_kubeconfig(server, pki, user), indent=2) + "\n")
            path.chmod(0o600)
            kubeconfigs[user] = path
        self._step("certificates and kubeconfigs")

        etcd = self._spawn("etcd", self._etcd_args(ports))
        _wait(self, "etcd /health", [etcd], lambda: _http_get_ok(
            f"http://127.0.0.1:{ports.etcd_client}/health", None
        ))  # fmt: skip
        self._step("etcd ready")

        apiserver = self._spawn("kube-apiserver", self._apiserver_args(ports, pki, host))
        api = _ApiClient(server, pki)
        _wait(self, "kube-apiserver /readyz", [etcd, apiserver], lambda: api.ok("/readyz"))
        self._step("kube-apiserver ready")

        admin = kubeconfigs["admin"]
        kcm = self._spawn("kube-controller-manager", self._kcm_args(ports, pki, kubeconfigs))
        sched = self._spawn("kube-scheduler", self._scheduler_args(ports, kubeconfigs))
        api.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", KWOK_PORTFORWARD_CRD)
        kwok = self._spawn("kwok", self._kwok_args(ports, pki, admin))
        nodes = [f"kwok-node-{i}" for i in range(self.nodes)]
        for name in nodes:
            api.create("/api/v1/nodes", _fake_node(name))
        everything = [etcd, apiserver, kcm, sched, kwok]
        _wait(self, "kube-scheduler /healthz", everything, lambda: _http_get_ok(
            f"https://127.0.0.1:{ports.scheduler}/healthz", _insecure_context()
        ))  # fmt: skip
        _wait(self, "default ServiceAccount and kube-root-ca.crt (controller-manager)",
              everything, lambda: api.ok("/api/v1/namespaces/default/serviceaccounts/default")
              and api.ok("/api/v1/namespaces/default/configmaps/kube-root-ca.crt"))  # fmt: skip
        _wait(self, f"nodes {', '.join(nodes)} Ready (kwok)", everything,
              lambda: all(api.node_ready(n) for n in nodes))  # fmt: skip
        self._step("controller-manager, scheduler and kwok ready")
        if self._node is not None:
            deadline = time.monotonic() + self._node.timeout
            self._node.start(pki, server, api, deadline)
            nodes = [REAL_NODE_NAME]
            self._step("real node ready")

        cluster = Cluster(
            kubeconfig=admin,
            server=server,
            workdir=self.workdir,
            helm=self.binaries.helm,
            bin_dir=self.binaries.bin_dir,
            node_names=tuple(nodes),
        )
        if self.detach:
            self._save_state(cluster)
        return cluster

    def _step(self, what: str) -> None:
        self.log(f"{time.monotonic() - self._started:6.2f}s {what}")

    def _spawn(self, name: str, argv: Sequence[str]) -> TrackedProcess:
        log = self.workdir / f"{name}.log"
        with open(log, "ab") as out:
            popen = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                start_new_session=True,
                preexec_fn=None if self.detach else _die_with_parent,
            )
        proc = TrackedProcess(name, argv[0], popen.pid, log, popen)
        self._procs.append(proc)
        return proc

    # -- command lines ----------------------------------------------------------

    def _etcd_args(self, ports: _Ports) -> list[str]:
        client = f"http://127.0.0.1:{ports.etcd_client}"
        peer = f"http://127.0.0.1:{ports.etcd_peer}"
        return [
            str(self.binaries.etcd),
            "--name=kaos-test",
            f"--data-dir={self.workdir / 'etcd-data'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=kaos-test={peer}",
            "--listen-metrics-urls=",
            "--unsafe-no-fsync",  # a test cluster's data dies with it anyway
            # A single member elects itself after one election timeout (1s by default).
            "--heartbeat-interval=50",
            "--election-timeout=250",
            "--auto-compaction-retention=1",
            "--quota-backend-bytes=1073741824",
            "--log-level=warn",
        ]

    def _apiserver_args(self, ports: _Ports, pki: _Pki, host: str) -> list[str]:
        if host == "127.0.0.1":
            # Endpoints may not point at loopback, where this API server is: do not
            # publish it as the `kubernetes` Service's endpoint.
            node_args = ["--endpoint-reconciler-type=none"]
        else:
            # A real node's pods reach it through the `kubernetes` Service; it reaches the
            # kubelet (logs, exec, port-forward) with a client certificate of its own.
            pki.issue_client("apiserver-kubelet-client",
                             "/O=system:masters/CN=kube-apiserver-kubelet-client")  # fmt: skip
            node_args = [
                f"--kubelet-client-certificate={pki.crt('apiserver-kubelet-client')}",
                f"--kubelet-client-key={pki.key('apiserver-kubelet-client')}",
                "--kubelet-preferred-address-types=InternalIP",
            ]
        return [
            str(self.binaries.kube_apiserver),
            f"--etcd-servers=http://127.0.0.1:{ports.etcd_client}",
            f"--bind-address={host}",
            f"--advertise-address={host}",
            f"--secure-port={ports.apiserver}",
            f"--cert-dir={pki.dir}",
            f"--tls-cert-file={pki.crt('apiserver')}",
            f"--tls-private-key-file={pki.key('apiserver')}",
            f"--client-ca-file={pki.ca_crt}",
            f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            # The aggregation layer, as kubeadm sets it up.
            f"--requestheader-client-ca-file={pki.front_proxy_ca_crt}",
            f"--requestheader-allowed-names={pki.FRONT_PROXY_CLIENT}",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki.crt(pki.FRONT_PROXY_CLIENT)}",
            f"--proxy-client-key-file={pki.key(pki.FRONT_PROXY_CLIENT)}",
            "--authorization-mode=Node,RBAC",
            # The defaults plus NodeRestriction, as kubeadm runs it.
            "--enable-admission-plugins=NodeRestriction",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--allow-privileged=true",
            *node_args,
            "--v=1",
        ]

    def _kcm_args(self, ports: _Ports, pki: _Pki, kubeconfigs: Mapping[str, Path]) -> list[str]:
        kc = kubeconfigs["controller-manager"]
        return [
            str(self.binaries.kube_controller_manager),
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports.controller_manager}",
            "--controllers=*",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pki.sa_key}",
            f"--root-ca-file={pki.ca_crt}",
            f"--cluster-signing-cert-file={pki.ca_crt}",
            f"--cluster-signing-key-file={pki.ca_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--leader-elect=false",
            "--v=1",
        ]

    def _scheduler_args(self, ports: _Ports, kubeconfigs: Mapping[str, Path]) -> list[str]:
        kc = kubeconfigs["scheduler"]
        return [
            str(self.binaries.kube_scheduler),
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports.scheduler}",
            "--leader-elect=false",
            "--v=1",
        ]

    def _kwok_args(self, ports: _Ports, pki: _Pki, kubeconfig: Path) -> list[str]:
        stages = sorted(self.binaries.kwok_stages.glob("*.yaml"))
        pod_log = self.workdir / POD_LOG_NAME
        pod_log.touch()
        logs = self.workdir / "kwok-logs.yaml"
        logs.write_text(json.dumps({
            "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "ClusterLogs",
            "metadata": {"name": "all-pods"},
            "spec": {"logs": [{"logsFile": str(pod_log), "follow": True}]},
        }) + "\n")  # fmt: skip
        key, value = KWOK_NODE_ANNOTATION
        return [
            str(self.binaries.kwok),
            f"--kubeconfig={kubeconfig}",
            *(f"--config={s}" for s in [*stages, logs]),
            "--manage-all-nodes=false",
            "--enable-crds=PortForward",
            f"--manage-nodes-with-annotation-selector={key}={value}",
            # Addresses the API server would dial for logs or exec: kwok's own server.
            "--node-ip=127.0.0.1",
            f"--node-port={ports.kwok}",
            f"--server-address=127.0.0.1:{ports.kwok}",
            f"--tls-cert-file={pki.crt('admin')}",
            f"--tls-private-key-file={pki.key('admin')}",
            f"--cidr={POD_CIDR}",
            "--node-lease-duration-seconds=40",
        ]


def _fake_node(name: str) -> dict[str, Any]:
    key, value = KWOK_NODE_ANNOTATION
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {key: value, "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/os": "linux",
                "kubernetes.io/hostname": name,
                "type": "kwok",
            },
        },
        # No taint: ordinary workloads (the operator, the chart) schedule as they are.
        "spec": {},
        "status": {
            "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
            "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"},
        },
    }


def _terminate(procs: Sequence[TrackedProcess], grace: float) -> None:
    """Stop the components newest first, so each goes while what it talks to still runs
    (an API server whose etcd is gone hangs in its shutdown); SIGKILL after ``grace``."""
    for p in reversed(procs):
        p.stop(grace)


def _wait(
    cluster: LocalCluster, what: str, watch: Sequence[TrackedProcess], ready: Callable[[], bool]
) -> None:
    """Poll ``ready`` until it holds; fail at once, with the log, if a component dies."""
    deadline = cluster._started + cluster.timeout
    while True:
        for p in watch:
            if not p.alive():
                raise StartupFailed(
                    f"{p.name} exited while waiting for {what}; log {p.log}:\n{p.log_tail()}"
                )
        with contextlib.suppress(OSError, ssl.SSLError, http.client.HTTPException):
            if ready():
                return
        if time.monotonic() > deadline:
            tails = "\n".join(f"--- {p.name} ({p.log}):\n{p.log_tail(15)}" for p in watch)
            raise StartupFailed(f"timed out after {cluster.timeout}s waiting for {what}\n{tails}")
        time.sleep(POLL_INTERVAL)


# ----------------------------------------------------------------- tiny API client


def _insecure_context() -> ssl.SSLContext:
    # Only for the health endpoints of the controller-manager and the scheduler, which
    # serve a self-signed certificate.
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _http_get_ok(url: str, context: ssl.SSLContext | None) -> bool:
    with urllib.request.urlopen(url, timeout=2, context=context) as resp:
        return bool(resp.status == 200)


class _ApiClient:
    """Just enough of the API for startup: GET, POST, as the admin user."""

    def __init__(self, server: str, pki: _Pki) -> None:
        self.host, port = server.removeprefix("https://").rsplit(":", 1)
        self.port = int(port)
        self.ctx = ssl.create_default_context(cafile=str(pki.ca_crt))
        self.ctx.load_cert_chain(str(pki.crt("admin")), str(pki.key("admin")))

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=5)
        try:
            data = None if body is None else json.dumps(body).encode()
            headers = {"Content-Type": "application/json", "Accept": "application/json"}
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            conn.close()
        try:
            return resp.status, json.loads(raw) if raw else None
        except ValueError:
            return resp.status, raw.decode(errors="replace")

    def ok(self, path: str) -> bool:
        return self.request("GET", path)[0] == 200

    def create(self, path: str, obj: Mapping[str, Any]) -> None:
        status, body = self.request("POST", path, obj)
        if status not in (200, 201, 409):
            raise StartupFailed(f"POST {path} answered {status}: {body}")

    def node_ready(self, name: str) -> bool:
        status, node = self.request("GET", f"/api/v1/nodes/{name}")
        if status != 200:
            return False
        conditions = node.get("status", {}).get("conditions") or []
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


# ---------------------------------------------------------------- test helpers


def wait_until(
    probe: Callable[[], T | None], *, timeout: float = 60.0, what: str = "condition"
) -> T:
    """Poll ``probe`` until it returns something truthy and return that; fail with the
    last value it returned when ``timeout`` passes. A wait with a deadline, not a sleep."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {value!r}")
        time.sleep(POLL_INTERVAL)


def processes_mentioning(text: str) -> list[int]:
    """Pids of running processes whose command line contains ``text`` (for leak checks)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if text in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


# ------------------------------------------------------------------ entry points


def default_state_dir() -> Path:
    cache = os.environ.get("KAOS_CACHE_DIR") or str(Path.home() / ".cache" / "kaos")
    return Path(cache) / "test-cluster"


_PRIVATE_PREFIX = "kaos-k8s-"


def _sweep_abandoned(parent: Path) -> None:
    """Remove private clusters' directories whose owner died without cleaning up (its
    components died with it): a killed test run should not leak disk into the next."""
    for workdir in parent.glob(f"{_PRIVATE_PREFIX}*"):
        try:
            owner = int((workdir / "owner.pid").read_text())
        except (OSError, ValueError):
            continue
        if not Path(f"/proc/{owner}").exists() and not processes_mentioning(str(workdir)):
            shutil.rmtree(workdir, ignore_errors=True)


@contextlib.contextmanager
def private_cluster(
    binaries: Binaries | None = None,
    *,
    nodes: int = 1,
    log: Callable[[str], None] = lambda message: None,
    keep: bool = False,
) -> Iterator[Cluster]:
    """A fresh control plane for the duration of the block, always torn down; with
    ``keep`` its directory (logs, certificates, kubeconfigs) stays for a post-mortem."""
    binaries = (binaries or Binaries.locate()).require()
    _sweep_abandoned(Path(tempfile.gettempdir()))
    workdir = Path(tempfile.mkdtemp(prefix=_PRIVATE_PREFIX))
    (workdir / "owner.pid").write_text(f"{os.getpid()}\n")
    local = LocalCluster(binaries, workdir, nodes=nodes, log=log)
    # A failed start has stopped everything and leaves the logs its error points to.
    cluster = local.start()
    try:
        yield cluster
    finally:
        local.stop(remove=not keep)
        if keep:
            log(f"kept {workdir}")


def _cli(argv: Sequence[str]) -> int:
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


if __name__ == "__main__":
    try:
        sys.exit(_cli(sys.argv[1:]))
    except ClusterError as exc:
        print(f"test-cluster: {exc}", file=sys.stderr)
        sys.exit(1)
