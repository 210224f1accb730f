"""The key-encryption key in a key management service that speaks AWS KMS's API.

Each owner gets a KMS key of its own, created on the first wrap and found again by an alias
derived from a hash of the store and the owner (owners hold characters an alias may not,
and a hash keeps principal names out of the KMS account). A data key is wrapped by KMS
``Encrypt`` under the owner's key, with a hash of the owner as encryption context, so a
wrapped key only unwraps for the owner it was made for. The KMS keys rotate automatically
(``EnableKeyRotation`` at creation; ``rotate`` asks for one now): KMS keeps every version of
a key's material and each ciphertext names the version it was made with, so a rotation
re-encrypts nothing.

``destroy`` schedules the owner's key for deletion, which makes every ``Decrypt`` under it
fail at once, on every replica and for every backup's copy of the wrapped key (a replica
that holds the unwrapped data key in memory stops using it within ``check_seconds``: it
asks KMS to unwrap it again that often, so a key destroyed in the KMS by hand, outside a
forget, stops opening the owner's texts within that bound too); KMS removes
the material itself after the waiting period (``deletion_window_days``, 7 at least, during
which someone allowed ``kms:CancelKeyDeletion`` could still restore it). It then deletes the
alias, so the owner's next write gets a new key. Decrypt failing because the key is
scheduled for deletion or gone is ``KeyDestroyed``; a key disabled by hand, a refused
permission or a KMS that does not answer are errors (``KmsError``, ``KmsUnavailable``), never
an erasure.

Requests are AWS's JSON protocol (``POST /`` with ``X-Amz-Target: TrentService.<Operation>``)
signed with Signature Version 4 (``sign_v4``; the image has no AWS SDK, and one signing
routine does not justify one). Error messages name the operation and KMS's error type only,
never a key, a plaintext or KMS's own message.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import SplitResult, parse_qsl, quote, urlsplit

import aiohttp
from kaos_core.tracing import client_session

from kaos_memory.crypto.kek import KeyDestroyed, WrappedKey
from kaos_memory.errors import StorageError, StorageUnavailable

log = logging.getLogger(__name__)

KMS_PREFIX = "kms:"
# How long an unwrapped data key is used before KMS is asked to unwrap it again.
DEFAULT_CHECK_SECONDS = 5.0
# An alias name's characters (AWS: alphanumerics, '/', '_', '-'; 'aws/' is reserved).
ALIAS_PREFIX_RE = re.compile(r"^(?!aws/)[A-Za-z0-9_-]+(/[A-Za-z0-9_-]+)*$")
_CONTENT_TYPE = "application/x-amz-json-1.1"
_CONTEXT_KEY = "kaos-owner"
# Errors that say "later": KMS's own retryable errors.
_RETRYABLE = frozenset(
    {
        "ThrottlingException",
        "KMSInternalException",
        "DependencyTimeoutException",
        "LimitExceededException",
    }
)
# Decrypt's refusals that may mean the key is scheduled for deletion or gone; the key's
# state decides (a key disabled by hand is not an erasure).
_MAYBE_GONE = frozenset({"KMSInvalidStateException", "DisabledException", "AccessDeniedException"})
_GONE_STATES = frozenset({"PendingDeletion", "PendingReplicaDeletion"})


class KmsError(StorageError):
    """The KMS refused a call (configuration, permission, a key in an unusable state)."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code


class KmsUnavailable(KmsError, StorageUnavailable):
    """The KMS did not answer, failed, or asked to slow down: the same call may succeed later."""


# --- Signature Version 4 ------------------------------------------------------------------


@dataclass(frozen=True)
class AwsCredentials:
    access_key_id: str
    secret_access_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)


_DEFAULT_PORTS = {"http": 80, "https": 443}


def _host(url: SplitResult) -> str:
    host = url.hostname or ""
    port = url.port
    return host if port is None or port == _DEFAULT_PORTS.get(url.scheme) else f"{host}:{port}"


def _canonical_query(url: SplitResult) -> str:
    pairs = sorted(
        (quote(k, safe="-_.~"), quote(v, safe="-_.~"))
        for k, v in parse_qsl(url.query, keep_blank_values=True)
    )
    return "&".join(f"{k}={v}" for k, v in pairs)


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def sign_v4(
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    credentials: AwsCredentials,
    region: str,
    service: str,
    when: datetime,
) -> dict[str, str]:
    """The headers that sign a request with AWS Signature Version 4: ``Host``,
    ``X-Amz-Date``, ``X-Amz-Security-Token`` (with a session token) and ``Authorization``.
    Every header of ``headers`` is signed with them."""
    parsed = urlsplit(url)
    stamp = when.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    added = {"Host": _host(parsed), "X-Amz-Date": stamp}
    if credentials.session_token:
        added["X-Amz-Security-Token"] = credentials.session_token
    signed = {name.lower(): " ".join(value.split()) for name, value in {**headers, **added}.items()}
    names = sorted(signed)
    canonical = "\n".join(
        [
            method.upper(),
            quote(parsed.path or "/", safe="/-_.~"),
            _canonical_query(parsed),
            *(f"{name}:{signed[name]}" for name in names),
            "",
            ";".join(names),
            hashlib.sha256(body).hexdigest(),
        ]
    )
    scope = f"{stamp[:8]}/{region}/{service}/aws4_request"
    to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = f"AWS4{credentials.secret_access_key}".encode()
    for part in (stamp[:8], region, service, "aws4_request"):
        key = _hmac(key, part)
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    added["Authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={credentials.access_key_id}/{scope}, "
        f"SignedHeaders={';'.join(names)}, Signature={signature}"
    )
    return added


# --- the backend --------------------------------------------------------------------------


def default_endpoint(region: str) -> str:
    return f"https://kms.{region}.amazonaws.com/"


def _error_type(doc: Any, header: str | None) -> str:
    """KMS's error type (``NotFoundException``), from the body's ``__type`` or the header,
    without the namespace before it or the URL after it that some servers add."""
    raw = doc.get("__type") if isinstance(doc, dict) else None
    text = raw if isinstance(raw, str) else header or ""
    return text.split("#")[-1].split(":")[0]


class KmsKeyEncryptionKey:
    """``KeyEncryptionKey`` with one KMS key per owner (see the module docstring).

    ``store`` names the store in the KMS account: two stores whose keys share an account and
    ``alias_prefix`` must differ here, or a forget in one would shred the other's key.
    Constructing it does no I/O; the HTTP session is made on the first call.
    """

    def __init__(
        self,
        *,
        region: str,
        credentials: AwsCredentials,
        store: str,
        endpoint: str | None = None,
        alias_prefix: str = "kaos-memory",
        deletion_window_days: int = 7,
        timeout: float = 10.0,
        check_seconds: float = DEFAULT_CHECK_SECONDS,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        if not ALIAS_PREFIX_RE.match(alias_prefix):
            raise ValueError(f"not an alias prefix: {alias_prefix!r}")
        if not 7 <= deletion_window_days <= 30:
            raise ValueError("deletion_window_days must be 7-30 (KMS's bounds)")
        if check_seconds < 0:
            raise ValueError("check_seconds must be 0 or more")
        self.region = region
        self.endpoint = endpoint or default_endpoint(region)
        self.store = store
        self.alias_prefix = alias_prefix
        self.deletion_window_days = deletion_window_days
        self.check_seconds = check_seconds
        self._credentials = credentials
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._clock = clock
        self._session: aiohttp.ClientSession | None = None

    # --- names ---------------------------------------------------------------------------

    def owner_hash(self, owner: str) -> str:
        return hashlib.sha256(f"{self.store}\0{owner}".encode()).hexdigest()

    def alias(self, owner: str) -> str:
        """The alias that finds ``owner``'s KMS key."""
        return f"alias/{self.alias_prefix}/{self.owner_hash(owner)}"

    @staticmethod
    def _context(owner: str) -> dict[str, str]:
        # The owner alone (not the store's name): renaming the store in the settings must
        # not make its wrapped keys unreadable.
        return {_CONTEXT_KEY: hashlib.sha256(owner.encode()).hexdigest()}

    # --- KeyEncryptionKey ----------------------------------------------------------------

    async def wrap(self, owner: str, data_key: bytes) -> WrappedKey:
        key_arn = await self._owner_key(owner)
        answer = await self._call(
            "Encrypt",
            {
                "KeyId": key_arn,
                "Plaintext": base64.b64encode(data_key).decode(),
                "EncryptionContext": self._context(owner),
            },
        )
        return WrappedKey(
            kek_id=KMS_PREFIX + str(answer.get("KeyId") or key_arn),
            blob=base64.b64decode(answer["CiphertextBlob"]),
        )

    async def unwrap(self, owner: str, wrapped: WrappedKey) -> bytes:
        if not wrapped.kek_id.startswith(KMS_PREFIX):
            raise KmsError(f"a data key wrapped by another key-encryption key ({wrapped.kek_id})")
        key_id = wrapped.kek_id[len(KMS_PREFIX) :]
        parts = key_id.split(":")
        if len(parts) > 3 and parts[0] == "arn" and parts[3] != self.region:
            # Another region's KMS would call the key not found: that is not an erasure.
            raise KmsError(f"a data key wrapped in another region ({parts[3]})")
        try:
            answer = await self._call(
                "Decrypt",
                {
                    "KeyId": key_id,
                    "CiphertextBlob": base64.b64encode(wrapped.blob).decode(),
                    "EncryptionContext": self._context(owner),
                },
            )
        except KmsUnavailable:
            raise
        except KmsError as exc:
            if exc.code == "NotFoundException" or (
                exc.code in _MAYBE_GONE and await self._gone(key_id)
            ):
                raise KeyDestroyed(
                    "the owner's KMS key is deleted or scheduled for deletion"
                ) from exc
            raise
        return base64.b64decode(answer["Plaintext"])

    async def destroy(self, owner: str) -> None:
        """Schedule the owner's key for deletion, then drop its alias. Idempotent: a second
        call (a forget resumed after a crash) finishes what the first left."""
        alias = self.alias(owner)
        meta = await self._describe(alias)
        if meta is None:
            return
        if meta.get("KeyState") not in _GONE_STATES:
            await self._schedule_deletion(str(meta["Arn"]))
        await self._call("DeleteAlias", {"AliasName": alias}, tolerate={"NotFoundException"})
        log.info("owner's KMS key destroyed", extra={"kms_key": meta.get("Arn"), "alias": alias})

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    # --- beyond the interface ------------------------------------------------------------

    async def rotate(self, owner: str) -> None:
        """Give the owner's key new material now (KMS ``RotateKeyOnDemand``); data keys
        wrapped before still unwrap."""
        await self._call("RotateKeyOnDemand", {"KeyId": self.alias(owner)})

    async def key_arn(self, owner: str) -> str | None:
        """The ARN of the owner's current key; None when the owner has none."""
        meta = await self._describe(self.alias(owner))
        return None if meta is None else str(meta["Arn"])

    # --- the owner's key -----------------------------------------------------------------

    async def _owner_key(self, owner: str) -> str:
        alias = self.alias(owner)
        meta = await self._describe(alias)
        if meta is not None and meta.get("KeyState") == "Enabled":
            return str(meta["Arn"])
        if meta is not None and meta.get("KeyState") not in _GONE_STATES:
            raise KmsError(f"the owner's KMS key is {meta.get('KeyState')}", "KeyState")
        if meta is not None:
            # A destroy stopped before it dropped the alias: finish it.
            await self._call("DeleteAlias", {"AliasName": alias}, tolerate={"NotFoundException"})
        return await self._create(alias)

    async def _create(self, alias: str) -> str:
        created = await self._call(
            "CreateKey",
            {
                "Description": "KAOS memory: one owner's key-encryption key",
                "KeyUsage": "ENCRYPT_DECRYPT",
                "KeySpec": "SYMMETRIC_DEFAULT",
                "Tags": [{"TagKey": "kaos.dev/memory-store", "TagValue": self.store[:256] or "-"}],
            },
        )
        arn = str(created["KeyMetadata"]["Arn"])
        await self._call("EnableKeyRotation", {"KeyId": arn})
        try:
            await self._call("CreateAlias", {"AliasName": alias, "TargetKeyId": arn})
        except KmsError as exc:
            if exc.code != "AlreadyExistsException":
                raise
        # Read back whichever way it went: the alias names our key (created, or our own
        # CreateAlias asked twice by ``_post``) or another replica's, which created the
        # owner's key first. A KMS whose alias creation is not atomic (Local KMS: two
        # CreateAlias at once both succeed, the last one standing) lands here too.
        meta = await self._describe(alias)
        if meta is not None and meta.get("Arn") == arn:
            log.info("owner's KMS key created", extra={"kms_key": arn, "alias": alias})
            return arn
        # Another replica's key is the owner's: use theirs, retire ours.
        await self._schedule_deletion(arn)
        if meta is None or meta.get("KeyState") != "Enabled":
            raise KmsUnavailable("the owner's KMS key changed while it was created")
        return str(meta["Arn"])

    async def _describe(self, key_id: str) -> dict[str, Any] | None:
        answer = await self._call("DescribeKey", {"KeyId": key_id}, tolerate={"NotFoundException"})
        meta = answer.get("KeyMetadata")
        return meta if isinstance(meta, dict) else None

    async def _gone(self, key_id: str) -> bool:
        meta = await self._describe(key_id)
        return meta is None or meta.get("KeyState") in _GONE_STATES

    async def _schedule_deletion(self, arn: str) -> None:
        # Already scheduled is KMSInvalidStateException: the deletion stands either way.
        await self._call(
            "ScheduleKeyDeletion",
            {"KeyId": arn, "PendingWindowInDays": self.deletion_window_days},
            tolerate={"KMSInvalidStateException"},
        )

    # --- the wire ------------------------------------------------------------------------

    async def _call(
        self,
        operation: str,
        payload: dict[str, Any],
        *,
        tolerate: frozenset[str] | set[str] = frozenset(),
    ) -> dict[str, Any]:
        """One KMS operation's answer; ``{}`` for a refusal named in ``tolerate``."""
        if self._session is None:
            self._session = client_session(timeout=self._timeout)
        body = json.dumps(payload).encode()
        headers = {"Content-Type": _CONTENT_TYPE, "X-Amz-Target": f"TrentService.{operation}"}
        headers.update(
            sign_v4(
                "POST",
                self.endpoint,
                headers,
                body,
                credentials=self._credentials,
                region=self.region,
                service="kms",
                when=self._clock(),
            )
        )
        status, raw, header_type = await self._post(operation, body, headers)
        try:
            doc: Any = json.loads(raw) if raw else {}
        except ValueError:
            doc = None
        if status == 200 and isinstance(doc, dict):
            return doc
        code = _error_type(doc, header_type)
        if code in tolerate and status < 500:
            return {}
        message = f"KMS {operation} answered HTTP {status}" + (f" {code}" if code else "")
        # 501: an operation this server does not implement, which asking again won't change.
        if (status >= 500 and status != 501) or status == 200 or code in _RETRYABLE:
            raise KmsUnavailable(message, code)
        raise KmsError(message, code)

    async def _post(
        self, operation: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, bytes, str | None]:
        assert self._session is not None
        # A disconnect is most often a pooled connection the KMS closed meanwhile (it
        # restarted, or idled it out): asked once more, on a new connection. Every call here
        # may be repeated (a repeated CreateKey leaves a key no alias names).
        for retry in (True, False):
            try:
                async with self._session.post(self.endpoint, data=body, headers=headers) as resp:
                    return resp.status, await resp.read(), resp.headers.get("x-amzn-ErrorType")
            except aiohttp.ServerDisconnectedError as exc:
                if retry:
                    continue
                raise KmsUnavailable(
                    f"KMS {operation}: {self.endpoint} closed the connection"
                ) from exc
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise KmsUnavailable(
                    f"KMS {operation}: no answer from {self.endpoint} ({type(exc).__name__})"
                ) from exc
        raise AssertionError("unreachable")


__all__ = [
    "DEFAULT_CHECK_SECONDS",
    "AwsCredentials",
    "KmsError",
    "KmsKeyEncryptionKey",
    "KmsUnavailable",
    "default_endpoint",
    "sign_v4",
]
