"""A local service-account issuer for the secured posture off a cluster (``make run
--secure``, ``hack/bench/memory``): what a cluster's API server does for projected tokens,
on loopback.

``DevIssuer`` holds an RSA key, serves its OIDC discovery document and key set
(``/.well-known/openid-configuration``, ``/openid/v1/jwks``) over HTTPS from a separate
process (``python -m tests.support.devissuer``; a CA of its own signs the loopback
certificate, and the services trust that CA as a pod trusts the cluster's), and mints
tokens with the claims kube-apiserver
puts in a projected service-account token (``iss``, ``aud``, ``sub``
``system:serviceaccount:<ns>:<sa>``, ``exp``/``nbf``/``iat``, ``kubernetes.io`` with the
namespace, ServiceAccount and pod). The services verify those tokens with their real
``jwks`` verifier, discovery included: nothing in them knows the issuer is local. Tests
of verification run against the test cluster's real API server instead
(``tests/e2e/cluster``); this stands in only where no cluster runs.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import json
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.support.jwt_craft import jwks, sa_claims, sign
from tests.support.procs import REPO_ROOT, ServiceProcess, free_port

JWKS_PATH = "/openid/v1/jwks"
DISCOVERY_PATH = "/.well-known/openid-configuration"
LOOPBACK = "127.0.0.1"


def ca_file(root: Path) -> Path:
    """Where an issuer rooted at ``root`` writes the CA its HTTPS certificate chains to."""
    return root / "ca.crt"


def _key() -> RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pem_key(key: RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def tls_files(root: Path) -> tuple[Path, Path]:
    """A CA (``ca_file(root)``) and a loopback server certificate it signed, with its key:
    ``(certificate chain, key)``."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key, leaf_key = _key(), _key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kaos dev issuer CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, LOOPBACK)]))
        .issuer_name(ca_name)
        .public_key(leaf_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(LOOPBACK))]),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    root.mkdir(parents=True, exist_ok=True)
    ca_file(root).write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    chain, key = root / "tls.crt", root / "tls.key"
    chain.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key.touch(mode=0o600)
    key.write_bytes(_pem_key(leaf_key))
    return chain, key


class DevIssuer:
    """An issuer key, the process that publishes it, and tokens signed with it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.key: RSAPrivateKey = _key()
        self.port = free_port()
        self.proc: ServiceProcess | None = None

    @property
    def url(self) -> str:
        """The issuer (``iss``), also where its discovery document is served."""
        return f"https://{LOOPBACK}:{self.port}"

    @property
    def ca_file(self) -> Path:
        return ca_file(self.root)

    def start(self, timeout: float = 30.0) -> DevIssuer:
        """Start the serving process; return once its discovery document answers."""
        self.root.mkdir(parents=True, exist_ok=True)
        keys = self.root / "jwks.json"
        keys.write_text(json.dumps(jwks(self.key)))
        chain, key = tls_files(self.root)
        argv = [sys.executable, "-m", "tests.support.devissuer", "--port", str(self.port)]
        argv += ["--jwks", str(keys), "--cert", str(chain), "--key", str(key)]
        log_path = self.root / "devissuer.log"
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=REPO_ROOT,
            )
        self.proc = ServiceProcess("devissuer", proc, self.port, log_path)
        context = ssl.create_default_context(cafile=str(self.ca_file))
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the local issuer exited: {self.proc.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + DISCOVERY_PATH, context=context) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.proc.kill()
                raise RuntimeError(f"the local issuer did not answer: {self.proc.log_tail()}")
            time.sleep(0.05)  # polling interval of a readiness wait, not a synchronisation

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        code = self.proc.stop(timeout=10)
        self.proc = None
        return code

    def mint(
        self, namespace: str, service_account: str, audience: str, *, lifetime: int = 3600
    ) -> str:
        """A projected token of ``namespace/service_account`` for ``audience``."""
        claims = sa_claims(
            namespace,
            service_account,
            now=time.time(),
            audience=audience,
            issuer=self.url,
            lifetime=lifetime,
            pod=f"{service_account}-pod",
        )
        return sign(claims, self.key)

    def write_token(self, path: Path, namespace: str, service_account: str, audience: str) -> Path:
        """Mint a token into ``path`` (mode 0600), as kubelet writes a projected one."""
        path.parent.mkdir(parents=True, exist_ok=True)
        staged = path.with_suffix(".new")
        staged.touch(mode=0o600)
        staged.write_text(self.mint(namespace, service_account, audience))
        staged.replace(path)
        return path


def serve(port: int, keys: dict[str, Any], cert: Path, key: Path) -> None:
    """Serve the discovery document and the key set on ``https://127.0.0.1:port``."""
    from aiohttp import web

    issuer = f"https://{LOOPBACK}:{port}"
    discovery = {
        "issuer": issuer,
        "jwks_uri": issuer + JWKS_PATH,
        "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
    }

    async def get_discovery(_: web.Request) -> web.Response:
        return web.json_response(discovery)

    async def get_jwks(_: web.Request) -> web.Response:
        return web.json_response(keys, content_type="application/jwk-set+json")

    app = web.Application()
    app.router.add_get(DISCOVERY_PATH, get_discovery)
    app.router.add_get(JWKS_PATH, get_jwks)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    web.run_app(app, host=LOOPBACK, port=port, ssl_context=tls, print=None, access_log=None)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="a local service-account issuer")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--jwks", type=Path, required=True)
    parser.add_argument("--cert", type=Path, required=True)
    parser.add_argument("--key", type=Path, required=True)
    args = parser.parse_args(argv)
    serve(args.port, json.loads(args.jwks.read_text()), args.cert, args.key)


if __name__ == "__main__":
    main()
