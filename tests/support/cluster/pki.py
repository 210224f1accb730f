"""The cluster's certificates, made with the ``openssl`` command, and its kubeconfigs."""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.support.cluster.errors import StartupFailed

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
