"""Domain errors that cross the HTTP boundary.

Handlers raise these; exactly one middleware (``kaos_core.http.middleware``) maps them
to the JSON error shape of the memory contract, with the headers the error carries (a
401's ``WWW-Authenticate`` challenge, a 405's ``Allow``). Nothing else turns an exception
into a response, so no exception text leaks to clients by accident.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Self


class KaosError(Exception):
    """Root of every error that becomes an HTTP answer."""

    status: int = 500
    code: str = "internal_error"
    # The request's body may still be (partly) in flight, unread: the answer closes the
    # connection instead of keeping it for another request.
    closes_connection: bool = False

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        headers: Iterable[tuple[str, str]] = (),
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        # The answer's headers, in order; a name may repeat (two challenges).
        self.headers: list[tuple[str, str]] = list(headers)

    def with_header(self, name: str, value: str) -> Self:
        """This error, its answer carrying one more header (for ``raise exc.with_header``
        where the edge knows what the raiser did not, such as the realm of a challenge)."""
        self.headers.append((name, value))
        return self


class BadRequest(KaosError):
    status = 400
    code = "bad_request"


class MalformedBody(BadRequest):
    """The body is not a document at all (not UTF-8, not JSON): JSON-RPC's parse error."""

    code = "malformed_json"


class Forbidden(KaosError):
    status = 403
    code = "forbidden"


class MethodNotAllowed(KaosError):
    status = 405
    code = "method_not_allowed"


class RequestTimeout(KaosError):
    """The body did not arrive in time (a slow or stalled sender)."""

    status = 408
    code = "request_timeout"
    closes_connection = True


class PayloadTooLarge(KaosError):
    status = 413
    code = "payload_too_large"
    closes_connection = True


class UnsupportedMediaType(KaosError):
    status = 415
    code = "unsupported_media_type"


class TooManyRequests(KaosError):
    """The service is at its limit; the caller decides when to retry (``Retry-After``)."""

    status = 429
    code = "too_many_requests"


class StrictFailure(KaosError):
    """A store failed under ``failure_mode: strict``: the caller asked to know."""

    status = 500
    code = "strict_failure"
