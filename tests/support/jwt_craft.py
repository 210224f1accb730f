"""Crafting service-account tokens with chosen claims, and the forgeries a verifier must
refuse, for the verifier's unit tests and the memory service's tests on the test cluster
(which signs with the cluster's own service-account key)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from jwt.algorithms import RSAAlgorithm

ISSUER = "https://kubernetes.default.svc.cluster.local"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def key_id(private: RSAPrivateKey) -> str:
    """The key id kube-apiserver gives a key: SHA-256 of the public key's DER, base64url."""
    der = private.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return b64url(hashlib.sha256(der).digest())


def jwks(private: RSAPrivateKey, kid: str | None = None) -> dict[str, Any]:
    jwk = RSAAlgorithm.to_jwk(private.public_key(), as_dict=True)
    jwk.update({"kid": kid or key_id(private), "alg": "RS256", "use": "sig"})
    return {"keys": [jwk]}


def sa_claims(
    namespace: str,
    service_account: str,
    *,
    now: float,
    audience: str | list[str] = "kaos.dev/memory",
    issuer: str = ISSUER,
    lifetime: int = 600,
    pod: str | None = "agent-pod-0",
) -> dict[str, Any]:
    k8s: dict[str, Any] = {
        "namespace": namespace,
        "serviceaccount": {"name": service_account, "uid": "0000-sa"},
    }
    if pod is not None:
        k8s["pod"] = {"name": pod, "uid": "0000-pod"}
    return {
        "iss": issuer,
        "aud": [audience] if isinstance(audience, str) else audience,
        "sub": f"system:serviceaccount:{namespace}:{service_account}",
        "iat": int(now),
        "nbf": int(now),
        "exp": int(now) + lifetime,
        "kubernetes.io": k8s,
    }


def sign(claims: dict[str, Any], private: RSAPrivateKey, *, kid: str | None = None) -> str:
    return jwt.encode(claims, private, algorithm="RS256", headers={"kid": kid or key_id(private)})


def unsigned(token: str) -> str:
    """The token's payload under ``alg: none``, without a signature."""
    _, payload, _ = token.split(".")
    return f"{b64url(json.dumps({'alg': 'none', 'typ': 'JWT'}).encode())}.{payload}."


def tampered(token: str, **changes: Any) -> str:
    """The token with claims changed and the original signature kept."""
    header, payload, signature = token.split(".")
    claims = json.loads(b64url_decode(payload))
    claims.update(changes)
    return ".".join([header, b64url(json.dumps(claims).encode()), signature])


def hs256_with_public_key(claims: dict[str, Any], private: RSAPrivateKey) -> str:
    """An HMAC "signed" with the issuer's public key (PEM) as the secret: the classic
    algorithm-confusion forgery (PyJWT refuses to make one, so it is made by hand)."""
    pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT", "kid": key_id(private)}).encode())
    payload = b64url(json.dumps(claims).encode())
    mac = hmac.new(pem, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{b64url(mac)}"
