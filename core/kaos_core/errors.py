"""Domain errors that cross the HTTP boundary.

Handlers raise these; exactly one middleware (``kaos_core.http.middleware``) maps them
to the JSON error shape of the memory contract. Nothing else turns an exception into a
response, so no exception text leaks to clients by accident.
"""

from __future__ import annotations


class KaosError(Exception):
    """Root of every error that becomes an HTTP answer."""

    status: int = 500
    code: str = "internal_error"
    # The request's body may still be (partly) in flight, unread: the answer closes the
    # connection instead of keeping it for another request.
    closes_connection: bool = False

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class BadRequest(KaosError):
    status = 400
    code = "bad_request"


class MalformedBody(BadRequest):
    """The body is not a document at all (not UTF-8, not JSON): JSON-RPC's parse error."""

    code = "malformed_json"


class Forbidden(KaosError):
    status = 403
    code = "forbidden"


class NotFound(KaosError):
    status = 404
    code = "not_found"


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


class StrictFailure(KaosError):
    """A store failed under ``failure_mode: strict``: the caller asked to know."""

    status = 500
    code = "strict_failure"


class NotReady(KaosError):
    status = 503
    code = "not_ready"
