"""The KMS that wraps data keys when ``KAOS_MEMORY_ENCRYPTION_KEK=kms``
(``kaos_memory.crypto.kms``): where it is, how requests to it are signed, how its keys are
named, how long a destroyed key waits before KMS deletes it, and how soon every replica stops
using a key destroyed in the KMS."""

from __future__ import annotations

from typing import ClassVar

from kaos_core.settings import SettingsGroup, setting
from pydantic import field_validator

from kaos_memory.crypto.kms import (
    ALIAS_PREFIX_RE,
    DEFAULT_CHECK_SECONDS,
    AwsCredentials,
    KmsKeyEncryptionKey,
)


class KmsSettings(SettingsGroup):
    """An AWS KMS, or a server speaking its API, holding one key per owner."""

    title: ClassVar[str] = "Encryption at rest: the KMS"

    region: str | None = setting(
        "with `KAOS_MEMORY_ENCRYPTION_KEK=kms` (required there): the KMS's region, signed into"
        " every request; it also names AWS's endpoint (`https://kms.<region>.amazonaws.com/`)"
        " when `KAOS_MEMORY_ENCRYPTION_KMS_ENDPOINT` is unset",
        env="ENCRYPTION_KMS_REGION",
        default=None,
        pattern=r"^[a-z0-9-]{1,32}$",
    )
    endpoint: str | None = setting(
        "the KMS's URL when it is not AWS's regional endpoint (a VPC endpoint, or a server"
        " that speaks AWS KMS's JSON API)",
        env="ENCRYPTION_KMS_ENDPOINT",
        default=None,
    )
    alias_prefix: str = setting(
        "the owners' keys are found by the alias `alias/<prefix>/<hash of the store and the"
        " owner>`; the store is the MemoryStore's namespace, name and group, so stores sharing"
        " an account never share a key. Changing it (or renaming the store) loses track of"
        " the existing keys: a forget then cannot destroy them",
        env="ENCRYPTION_KMS_ALIAS_PREFIX",
        default="kaos-memory",
    )
    access_key_id: str | None = setting(
        "the access key the requests are signed with (Signature Version 4), e.g. from a"
        " Secret through `secretKeyRef` (required with `KAOS_MEMORY_ENCRYPTION_KEK=kms`)",
        env="ENCRYPTION_KMS_ACCESS_KEY_ID",
        default=None,
    )
    secret_access_key: str | None = setting(
        "its secret key, from the same Secret (required with `KAOS_MEMORY_ENCRYPTION_KEK=kms`)",
        env="ENCRYPTION_KMS_SECRET_ACCESS_KEY",
        default=None,
        repr=False,
    )
    session_token: str | None = setting(
        "a session token for temporary credentials; read at start only, so it must outlive the pod",
        env="ENCRYPTION_KMS_SESSION_TOKEN",
        default=None,
        repr=False,
    )
    deletion_window_days: int = setting(
        "days KMS waits before it deletes a key a forget destroyed (KMS's bounds). The key"
        " refuses every Decrypt from the moment of the forget; within these days someone"
        " allowed `kms:CancelKeyDeletion` could still bring it back",
        env="ENCRYPTION_KMS_DELETION_WINDOW_DAYS",
        default=7,
        ge=7,
        le=30,
    )
    key_check_seconds: float = setting(
        "how long a replica uses an owner's data key it unwrapped before it asks the KMS to"
        " unwrap it again (one `Decrypt` per owner in use, per replica, at most this often)."
        " A key destroyed in the KMS outside a forget (a forget also deletes the records)"
        " makes the owner's records read as erased on every replica within this bound; `0`"
        " asks on every read and write that uses the key. A KMS that does not answer then"
        " makes those reads degraded (503 in strict mode): a key nobody could check is not"
        " used",
        env="ENCRYPTION_KMS_KEY_CHECK_SECONDS",
        default=DEFAULT_CHECK_SECONDS,
        ge=0,
        le=3600,
    )
    timeout_seconds: float = setting(
        "the longest one KMS request may take; a KMS that does not answer in time is a"
        " storage failure (the request is degraded, or 503 in strict mode)",
        env="ENCRYPTION_KMS_TIMEOUT_SECONDS",
        default=10.0,
        gt=0,
        le=120,
    )

    @field_validator("alias_prefix")
    @classmethod
    def _alias_prefix(cls, value: str) -> str:
        if not ALIAS_PREFIX_RE.match(value) or len(value) > 180:
            raise ValueError(
                "letters, digits, '_', '-' and inner '/', at most 180, not starting 'aws/'"
            )
        return value

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("https://", "http://")):
            raise ValueError("an http:// or https:// URL")
        return value

    def problems(self, prefix: str) -> list[str]:
        if (self.access_key_id is None) != (self.secret_access_key is None):
            return [
                f"{self.env_name('access_key_id', prefix)} and"
                f" {self.env_name('secret_access_key', prefix)} go together"
            ]
        return []

    def missing(self, prefix: str) -> list[str]:
        """What ``KAOS_MEMORY_ENCRYPTION_KEK=kms`` needs and is not set."""
        fields = ("region", "access_key_id", "secret_access_key")
        unset = [self.env_name(f, prefix) for f in fields if getattr(self, f) is None]
        return [f"{prefix}ENCRYPTION_KEK=kms needs {', '.join(unset)}"] if unset else []

    def kek(self, store: str) -> KmsKeyEncryptionKey:
        """The KEK of the store named ``store`` (its namespace, name and group)."""
        if self.region is None or self.access_key_id is None or self.secret_access_key is None:
            raise ValueError("the KMS settings are incomplete")
        return KmsKeyEncryptionKey(
            region=self.region,
            credentials=AwsCredentials(
                access_key_id=self.access_key_id,
                secret_access_key=self.secret_access_key,
                session_token=self.session_token,
            ),
            store=store,
            endpoint=self.endpoint,
            alias_prefix=self.alias_prefix,
            deletion_window_days=self.deletion_window_days,
            timeout=self.timeout_seconds,
            check_seconds=self.key_check_seconds,
        )
