"""Signature Version 4 (``kaos_memory.crypto.kms.sign_v4``): the signatures AWS publishes in
its test suite (credentials ``AKIDEXAMPLE``, region ``us-east-1``, service ``service``,
2015-08-30T12:36:00Z), and the KMS client's requests as a server receives them: signed over
exactly what arrived on the wire (Local KMS checks no signature, so a server of the test's
own recomputes it). The same server answers KMS's error shapes, which the client sorts into
temporary (``KmsUnavailable``) and permanent (``KmsError``)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest
from aiohttp import web
from kaos_memory.crypto.kms import (
    AwsCredentials,
    KmsError,
    KmsKeyEncryptionKey,
    KmsUnavailable,
    sign_v4,
)

from tests.support.procs import free_port

SUITE = AwsCredentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
WHEN = datetime(2015, 8, 30, 12, 36, tzinfo=UTC)
SCOPE = "Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request"


def authorization(method: str, url: str, headers: dict[str, str], body: bytes) -> str:
    return sign_v4(
        method,
        url,
        headers,
        body,
        credentials=SUITE,
        region="us-east-1",
        service="service",
        when=WHEN,
    )["Authorization"]


@pytest.mark.parametrize(
    ("vector", "method", "url", "headers", "body", "signed", "signature"),
    [
        (
            "get-vanilla",
            "GET",
            "https://example.amazonaws.com/",
            {},
            b"",
            "host;x-amz-date",
            "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
        ),
        (
            "post-vanilla",
            "POST",
            "https://example.amazonaws.com/",
            {},
            b"",
            "host;x-amz-date",
            "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
        ),
        (
            "post-x-www-form-urlencoded",
            "POST",
            "https://example.amazonaws.com/",
            {"Content-Type": "application/x-www-form-urlencoded"},
            b"Param1=value1",
            "content-type;host;x-amz-date",
            "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a",
        ),
        (
            "get-vanilla-query-order-key-case",
            "GET",
            "https://example.amazonaws.com/?Param2=value2&Param1=value1",
            {},
            b"",
            "host;x-amz-date",
            "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500",
        ),
    ],
)
def test_the_signatures_aws_publishes(
    vector: str,
    method: str,
    url: str,
    headers: dict[str, str],
    body: bytes,
    signed: str,
    signature: str,
) -> None:
    assert authorization(method, url, headers, body) == (
        f"AWS4-HMAC-SHA256 {SCOPE}, SignedHeaders={signed}, Signature={signature}"
    )


def test_the_date_header_and_a_session_token_are_signed() -> None:
    out = sign_v4(
        "POST",
        "https://kms.eu-west-2.amazonaws.com/",
        {},
        b"{}",
        credentials=AwsCredentials("AKID", "secret", session_token="token"),
        region="eu-west-2",
        service="kms",
        when=WHEN,
    )
    assert out["X-Amz-Date"] == "20150830T123600Z"
    assert out["X-Amz-Security-Token"] == "token"
    assert out["Host"] == "kms.eu-west-2.amazonaws.com"
    assert "SignedHeaders=host;x-amz-date;x-amz-security-token," in out["Authorization"]
    assert "secret" not in repr(AwsCredentials("AKID", "secret", session_token="token"))


# --- a server that checks the signature -------------------------------------------------


@dataclass
class Checker:
    """What the server received, and what it answers next."""

    credentials: AwsCredentials
    verdicts: list[bool] = field(default_factory=list)
    answer: Callable[[str], web.Response] = lambda _op: web.json_response({})


def _verify(request: web.Request, body: bytes, credentials: AwsCredentials) -> bool:
    auth = request.headers.get("Authorization", "")
    signed = auth.split("SignedHeaders=", 1)[1].split(",", 1)[0].split(";")
    received = {
        name: request.headers[name] for name in signed if name not in ("host", "x-amz-date")
    }
    when = datetime.strptime(request.headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    url = f"http://{request.headers['Host']}{request.raw_path}"
    expected = sign_v4(
        request.method,
        url,
        received,
        body,
        credentials=credentials,
        region="eu-west-2",
        service="kms",
        when=when,
    )
    return expected["Authorization"] == auth


@pytest.fixture
async def checker() -> AsyncIterator[tuple[Checker, str]]:
    state = Checker(credentials=AwsCredentials("AKIDKAOS", "the-secret"))

    async def handle(request: web.Request) -> web.Response:
        body = await request.read()
        state.verdicts.append(_verify(request, body, state.credentials))
        return state.answer(request.headers["X-Amz-Target"].split(".", 1)[1])

    app = web.Application()
    app.router.add_post("/", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    try:
        yield state, f"http://127.0.0.1:{port}/"
    finally:
        await runner.cleanup()


def _client(endpoint: str, secret: str) -> KmsKeyEncryptionKey:
    return KmsKeyEncryptionKey(
        region="eu-west-2",
        credentials=AwsCredentials("AKIDKAOS", secret),
        store="kaos-tests/sigv4",
        endpoint=endpoint,
    )


def _refusal(code: str, status: int = 400) -> Callable[[str], web.Response]:
    return lambda _op: web.json_response({"__type": code, "message": "details"}, status=status)


async def test_requests_are_signed_over_what_arrives(checker: tuple[Checker, str]) -> None:
    state, endpoint = checker
    good, bad = _client(endpoint, "the-secret"), _client(endpoint, "another-secret")
    try:
        await good.destroy("kaos_memory/principal:alice")  # DescribeKey: {} is "no key"
        await bad.destroy("kaos_memory/principal:alice")
    finally:
        await good.close()
        await bad.close()
    assert state.verdicts == [True, False]


@pytest.mark.parametrize(
    ("answer", "error", "message"),
    [
        (_refusal("ThrottlingException"), KmsUnavailable, "HTTP 400 ThrottlingException"),
        (_refusal("KMSInternalException", 500), KmsUnavailable, "HTTP 500 KMSInternalException"),
        (lambda _op: web.Response(status=502, text="bad gateway"), KmsUnavailable, "HTTP 502"),
        (
            _refusal("com.amazonaws.kms#AccessDeniedException"),
            KmsError,
            "HTTP 400 AccessDeniedException",
        ),
        (lambda _op: web.Response(status=501, text="no"), KmsError, "HTTP 501"),
    ],
)
async def test_kms_errors_are_sorted_into_temporary_and_permanent(
    checker: tuple[Checker, str],
    answer: Callable[[str], web.Response],
    error: type[KmsError],
    message: str,
) -> None:
    state, endpoint = checker
    state.answer = answer
    client = _client(endpoint, "the-secret")
    data_key = os.urandom(32)
    try:
        with pytest.raises(KmsError) as raised:
            await client.wrap("kaos_memory/principal:alice", data_key)
    finally:
        await client.close()
    assert type(raised.value) is error
    assert str(raised.value) == f"KMS DescribeKey answered {message}"
    # KMS's own message stays out of the error.
    assert "details" not in str(raised.value)
