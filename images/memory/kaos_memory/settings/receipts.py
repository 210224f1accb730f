"""Erasure receipts: where the store's signing key comes from (``kaos_memory.receipts``)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from kaos_core.memory.receipt import private_key_from_pem
from kaos_core.settings import SettingsGroup, setting


class ReceiptSettings(SettingsGroup):
    """The Ed25519 key every forget's receipt is signed with."""

    title: ClassVar[str] = "Erasure receipts"

    key_file: Path | None = setting(
        "an Ed25519 private key (PKCS#8 PEM, as `openssl genpkey -algorithm ed25519` writes"
        " it) every replica signs erasure receipts with, e.g. a mounted Secret's file; read"
        " at start, a missing or unreadable file stops the service. Unset: a key generated"
        " once per store group and kept in the conversation store (local mode: the SQLite"
        " file in the data dir; external mode: `kaos_mem_receipt_keys`), so every replica"
        " signs with the same key. The public key is served at"
        " `/.well-known/kaos-memory-receipt-key`",
        env="RECEIPT_KEY_FILE",
        default=None,
    )

    def problems(self, prefix: str) -> list[str]:
        if self.key_file is None:
            return []
        name = self.env_name("key_file", prefix)
        try:
            private_key_from_pem(self.key_file.read_bytes())
        except OSError as exc:
            return [f"{name}={self.key_file}: cannot be read ({exc.strerror or 'error'})"]
        except ValueError as exc:
            return [f"{name}={self.key_file}: {exc}"]
        return []
