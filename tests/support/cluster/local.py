"""A private control plane of local processes: started in order, waited for, stopped."""

from __future__ import annotations

import contextlib
import http.client
import json
import shutil
import ssl
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tests.support.cluster.apiclient import _ApiClient, _http_get_ok, _insecure_context
from tests.support.cluster.binaries import Binaries
from tests.support.cluster.errors import BinariesMissing, StartupFailed
from tests.support.cluster.handle import Cluster
from tests.support.cluster.kwok import (
    KWOK_NODE_ANNOTATION,
    KWOK_PORTFORWARD_CRD,
    POD_CIDR,
    POD_LOG_NAME,
    _fake_node,
)
from tests.support.cluster.pki import _kubeconfig, _Pki
from tests.support.cluster.processes import (
    POLL_INTERVAL,
    TrackedProcess,
    _die_with_parent,
    _free_ports,
)

if TYPE_CHECKING:
    from tests.support.realnode import RealNode

SERVICE_CIDR = "10.96.0.0/16"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
# The real node's name (tests.support.realnode.NODE_NAME; kept here to import lazily).
REAL_NODE_NAME = "kaos-node"


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

    With ``detach`` the processes survive this Python process (``hack/test-cluster up``);
    otherwise they get SIGKILL when it dies, so no orphan outlives a killed test run. Either
    way ``workdir/state.json`` records them, for ``attach``.

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
        # Detached, this is how `hack/test-cluster down` finds the processes again; attached
        # too, so that the kind suite stops its cluster the way `make cluster-down` does.
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
                # An aggregated API (KEDA's external metrics) is reached at its Service's
                # endpoint: the host has no route to Service addresses, only to the node's.
                "--enable-aggregator-routing=true",
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
            *_CONTROLLER_TUNING,
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
            *_CLIENT_RATE,
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


# The control plane's own clients are rate-limited on their side (the controller-manager at
# 20 requests/s by default, the scheduler at 50): with a thousand Deployments that limit, not
# the API server or the machine, paced the whole bring-up. Large clusters raise it; so does
# this one, so that what the operator benchmark measures is the operator.
_CLIENT_RATE = ("--kube-api-qps=500", "--kube-api-burst=1000")
_CONTROLLER_TUNING = (
    *_CLIENT_RATE,
    "--concurrent-deployment-syncs=20",
    "--concurrent-replicaset-syncs=20",
    "--concurrent-service-endpoint-syncs=20",
    # Autoscalers act within a test's patience: a look every 5 s (upstream 15 s), and a
    # scale-down once the load has been gone 30 s (upstream 5 minutes).
    "--horizontal-pod-autoscaler-sync-period=5s",
    "--horizontal-pod-autoscaler-downscale-stabilization=30s",
)


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
