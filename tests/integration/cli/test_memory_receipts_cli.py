"""``kaos memory forget --receipt-out`` and ``kaos memory verify-receipt`` against a real
local memory service: the saved receipt checks offline (with the key saved to a file, or
fetched from the store's well-known URL), and one changed byte, or another store's key,
is exit 1 with one ``error:`` line."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from kaos_cli.main import main
from kaos_core.memory.contract import WELL_KNOWN_PATH
from kaos_core.memory.receipt import public_jwk

from tests.fixtures.memory import COLLECTION, MakeMemory
from tests.integration.cli.test_memory_cli import remember


def test_a_saved_receipt_verifies_offline_and_a_changed_byte_does_not(
    memory_factory: MakeMemory, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    server = memory_factory("local")
    remember(server, "s1", "alice", "My locker code is 4711")
    saved = tmp_path / "receipt.json"

    assert main(["memory", "forget", "--url", server.url, "--principal", "alice",
                 "--receipt-out", str(saved)]) == 0  # fmt: skip
    out = capsys.readouterr().out.splitlines()
    assert out[-2:] == [
        "receipt: audit record 1 (kaos memory audit)",
        f"signed receipt: {saved} (kaos memory verify-receipt)",
    ]
    data = saved.read_bytes()
    assert data.endswith(b"}\n") and data.count(b"\n") == 1
    receipt = json.loads(data)
    kid = receipt["kid"]

    # The key from the store's well-known URL, then from a file: no service needed.
    key_url = server.url + WELL_KNOWN_PATH
    assert main(["memory", "verify-receipt", str(saved), "--key", key_url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        f"valid: signed by {COLLECTION} with key {kid}",
        f"erasure: 1 at {receipt['issued_at']}",
        f"request: {receipt['request_id']}",
        "scope: user principal=alice",
        "forgotten: short_term=2 medium_term=0 long_term=0",
        "final: yes, key shredded: no",
    ]
    assert main(["memory", "verify-receipt", str(saved), "--key", key_url, "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["scope"]["principal"] == "alice"
    key_file = tmp_path / "store-key.json"
    key_file.write_bytes(httpx.get(key_url).content)
    assert server.stop() == 0  # offline from here on

    assert main(["memory", "verify-receipt", str(saved), "--key", str(key_file)]) == 0
    assert (
        capsys.readouterr().out.splitlines()[0] == f"valid: signed by {COLLECTION} with key {kid}"
    )

    # One changed byte: the erased count says 3 instead of 2.
    forged = tmp_path / "forged.json"
    forged.write_bytes(data.replace(b'"short_term":2', b'"short_term":3'))
    assert forged.read_bytes() != data and len(forged.read_bytes()) == len(data)
    assert main(["memory", "verify-receipt", str(forged), "--key", str(key_file)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert (
        captured.err.strip() == "error: receipt not valid: the signature does not match the receipt"
    )

    # Another store's key, and no key at all for a receipt that names no MemoryStore.
    other = tmp_path / "other.json"
    other.write_text(json.dumps(public_jwk(Ed25519PrivateKey.generate().public_key())))
    assert main(["memory", "verify-receipt", str(saved), "--key", str(other)]) == 1
    assert capsys.readouterr().err.strip() == (
        f"error: receipt not valid: signed with key {kid}, which the given key is not"
    )
    assert main(["memory", "verify-receipt", str(saved)]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: the receipt names no MemoryStore (namespace/name): give --key"
    )
    assert main(["memory", "verify-receipt", str(tmp_path / "missing.json"), "--key",
                 str(key_file)]) == 2  # fmt: skip
    assert capsys.readouterr().err.strip() == (
        f"error: receipt {tmp_path / 'missing.json'}: No such file or directory"
    )
