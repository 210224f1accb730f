"""The receipt signing key setting: a key file is checked when the settings load, so a
store never starts signing with a key it cannot read."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ec import SECP256R1, generate_private_key
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from kaos_core.settings import SettingsError
from kaos_memory.settings import load_memory_settings


def test_no_key_file_by_default() -> None:
    assert load_memory_settings({}).receipts.key_file is None


def test_an_ed25519_pem_key_file_loads(tmp_path: Path) -> None:
    key = tmp_path / "key.pem"
    pem = Ed25519PrivateKey.generate().private_bytes(
        Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()
    )
    key.write_bytes(pem)
    settings = load_memory_settings({"KAOS_MEMORY_RECEIPT_KEY_FILE": str(key)})
    assert settings.receipts.key_file == key


def test_a_bad_key_file_names_the_variable_and_the_problem(tmp_path: Path) -> None:
    ec = tmp_path / "ec.pem"
    ec.write_bytes(
        generate_private_key(SECP256R1()).private_bytes(
            Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()
        )
    )
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a key")
    cases = {
        tmp_path / "missing.pem": "cannot be read (No such file or directory)",
        ec: "not an Ed25519 key (openssl genpkey -algorithm ed25519)",
        garbage: "not an unencrypted PKCS#8 PEM private key",
    }
    for path, problem in cases.items():
        with pytest.raises(SettingsError) as err:
            load_memory_settings({"KAOS_MEMORY_RECEIPT_KEY_FILE": str(path)})
        assert f"KAOS_MEMORY_RECEIPT_KEY_FILE={path}: {problem}" in str(err.value)
