"""Encryption at rest: whether texts are sealed under per-owner keys, and the key-encryption
key (KEK) that wraps those keys (``kaos_memory.crypto``)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from kaos_core.settings import SettingsGroup, setting

from kaos_memory.crypto.kek import KekError, SecretFileKek

EncryptionMode = Literal["auto", "on", "off"]
KekBackend = Literal["secret", "kms"]


class EncryptionSettings(SettingsGroup):
    """Per-owner AES-256-GCM sealing of every stored text, and where its KEK comes from."""

    title: ClassVar[str] = "Encryption at rest"

    mode: EncryptionMode = setting(
        "seal every text stored for an owner (window turns, digest versions, fact text, Mem0's"
        " message context) under that owner's data key (the principal's; the agent's where"
        " there is none): `auto` seals when a KEK is configured, `on` refuses to start"
        " without one, `off` stores text in the clear (texts sealed earlier then read as"
        " erased). A principal-level forget destroys the principal's key (crypto-shredding:"
        " copies of its text in backups and snapshots become unreadable)",
        env="ENCRYPTION",
        default="auto",
    )
    kek: KekBackend = setting(
        "what wraps the data keys: `secret`, a versioned KEK directory mounted from a"
        " Kubernetes Secret (`KAOS_MEMORY_ENCRYPTION_KEK_DIR`); `kms`, a key per owner in a"
        " KMS, destroyed by the owner's forget",
        env="ENCRYPTION_KEK",
        default="secret",
    )
    kek_dir: Path | None = setting(
        "the Secret KEK's directory: one file per version (`v1`, `v2`, ...: 32 random bytes,"
        " base64) and `current`, the version new keys are wrapped with. Rotation adds a"
        " version and points `current` at it; keys wrapped by older versions still unwrap"
        " (nothing is re-encrypted); read again when it changes, no restart needed",
        env="ENCRYPTION_KEK_DIR",
        default=None,
    )
    key_cache: int = setting(
        "unwrapped data keys kept in memory (least recently used go first); a key not held"
        " costs one key-table read and one unwrap on its next use",
        env="ENCRYPTION_KEY_CACHE",
        default=4096,
        ge=1,
    )

    @property
    def enabled(self) -> bool:
        if self.mode == "off":
            return False
        if self.mode == "on":
            return True
        return self.kek == "kms" or self.kek_dir is not None

    def problems(self, prefix: str) -> list[str]:
        if not self.enabled or self.kek != "secret":
            return []
        name = self.env_name("kek_dir", prefix)
        if self.kek_dir is None:
            return [f"{self.env_name('mode', prefix)}=on needs {name} (the Secret KEK)"]
        try:
            SecretFileKek(self.kek_dir).load()
        except KekError as exc:
            return [f"{name}={self.kek_dir}: {exc}"]
        return []
