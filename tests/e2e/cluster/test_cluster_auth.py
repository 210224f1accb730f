"""Service-account tokens on the test cluster are signed and verified as on a real one:
a TokenRequest yields a token that a TokenReview accepts, and a forged one is refused."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from kubernetes_asyncio import client

pytestmark = pytest.mark.cluster


def _b64url_decode(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _b64url_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def tampered(token: str) -> str:
    """The token with its subject changed and the original signature kept."""
    header, payload, signature = token.split(".")
    claims = json.loads(_b64url_decode(payload))
    claims["sub"] = "system:serviceaccount:kube-system:generic-garbage-collector"
    return ".".join([header, _b64url_encode(json.dumps(claims).encode()), signature])


def unsigned(token: str) -> str:
    """The token re-issued with ``alg: none`` and no signature."""
    _, payload, _ = token.split(".")
    header = _b64url_encode(json.dumps({"alg": "none", "typ": "JWT"}).encode())
    return f"{header}.{payload}."


async def review(api: Any, token: str) -> Any:
    auth = client.AuthenticationV1Api(api)
    body = client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token))
    return (await auth.create_token_review(body)).status


async def request_token(api: Any, namespace: str, name: str) -> str:
    core = client.CoreV1Api(api)
    await core.create_namespaced_service_account(
        namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=name))
    )
    spec = client.V1TokenRequestSpec(
        audiences=["https://kubernetes.default.svc.cluster.local"], expiration_seconds=600
    )
    answer = await core.create_namespaced_service_account_token(
        name, namespace, client.AuthenticationV1TokenRequest(spec=spec)
    )
    return str(answer.status.token)


async def test_token_request_yields_a_token_that_token_review_accepts(
    k8s_api: Any, k8s_namespace: str
) -> None:
    token = await request_token(k8s_api, k8s_namespace, "robot")

    status = await review(k8s_api, token)

    assert status.authenticated is True, status.error
    assert status.user.username == f"system:serviceaccount:{k8s_namespace}:robot"
    assert "system:serviceaccounts" in status.user.groups


@pytest.mark.parametrize("forge", [tampered, unsigned], ids=["tampered", "unsigned"])
async def test_a_forged_token_is_rejected(k8s_api: Any, k8s_namespace: str, forge: Any) -> None:
    token = await request_token(k8s_api, k8s_namespace, "robot")

    status = await review(k8s_api, forge(token))

    assert not status.authenticated
    assert status.user is None or not status.user.username
