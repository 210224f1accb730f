"""Hostile HTTP requests at the byte level, and a raw client that sends them.

Schemathesis (``tests/integration/*/test_schemathesis.py``) sends requests an HTTP client can
express; what it never sends is what a probe of the edges found: JSON nested a thousand deep,
4,301-digit integers, a ``Content-Encoding: gzip`` claim on a plain body, identity
headers carrying control characters, non-UTF-8 bytes or given twice, NUL characters,
lone surrogates, truncated and oversize bodies, bodies shorter than their
``Content-Length``. The strategies here start from valid requests of a service (an
``Endpoint``) and apply one mutation; each ``RawRequest`` says what the service must do
with it (``Expect``). They go out over a plain socket, because aiohttp's client
normalises (or refuses to send) exactly the headers worth testing.

``check_exchange`` asserts the per-request properties every service shares: an answer
within the deadline, no 5xx, an error body that is JSON in the service's error shape and
names no Python exception, and a refusal for a request the generator marked hostile. A
request that is not valid HTTP/1.1 (a control byte in a header, a malformed
Content-Length or chunk size) may instead get the HTTP parser's own 4xx, which is text:
no application code has run. ``run_one`` adds the service's "no write" check.

The fuzzing bounds (``bounds``) say how to run a deeper hunt locally.
"""

from tests.support.hostile.bounds import SERVICE_ENV, fuzz_settings, max_examples
from tests.support.hostile.checks import check_exchange, refused, run_one
from tests.support.hostile.client import Exchange, send
from tests.support.hostile.documents import Path, Pattern
from tests.support.hostile.request import (
    SESSION_PLACEHOLDER,
    Endpoint,
    Expect,
    HeaderCase,
    RawRequest,
)
from tests.support.hostile.strategies import hostile_requests, issue_cases

__all__ = [
    "SERVICE_ENV",
    "SESSION_PLACEHOLDER",
    "Endpoint",
    "Exchange",
    "Expect",
    "HeaderCase",
    "Path",
    "Pattern",
    "RawRequest",
    "check_exchange",
    "fuzz_settings",
    "hostile_requests",
    "issue_cases",
    "max_examples",
    "refused",
    "run_one",
    "send",
]
