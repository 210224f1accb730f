"""The chart's MemoryStore key Secrets (values ``memoryKeys``): a key-encryption key the
memory service can use as it finds it, an erasure-receipt signing key it accepts, one pair
per namespace, kept on uninstall, and the values that refuse.

``helm template`` does no lookups, so here every render draws new keys; that an upgrade
renders back the Secret already in the cluster is tested against the API server in
``tests/e2e/chart/test_memory_keys_lookup.py``.
"""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import pytest
from kaos_core.memory.receipt import private_key_from_pem
from kaos_memory.crypto.kek import SecretFileKek

from tests.fixtures.helm import Helm, find_object, kinds
from tests.integration.chart.test_schema import SCHEMA_ERROR, failure

BOTH = ("memoryKeys.kek.create=true", "memoryKeys.receiptKey.create=true")
KEEP = {"helm.sh/resource-policy": "keep"}


def _key_secrets(objects: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (o["metadata"]["namespace"], o["metadata"]["name"]): o
        for o in objects
        if o["kind"] == "Secret" and "-memory-" in o["metadata"]["name"]
    }


def _decoded(secret: dict[str, Any]) -> dict[str, bytes]:
    return {k: base64.b64decode(v) for k, v in secret["data"].items()}


def _mounted(secret: dict[str, Any], directory: Path) -> Path:
    """The Secret as the kubelet mounts it: one file per key."""
    directory.mkdir()
    for name, content in _decoded(secret).items():
        (directory / name).write_bytes(content)
    return directory


def test_no_key_secret_unless_asked_for(helm: Helm) -> None:
    assert _key_secrets(helm.template()) == {}
    assert _key_secrets(helm.template("memoryKeys.kek.create=true")).keys() == {
        ("kaos-system", "kaos-memory-kek")
    }
    assert _key_secrets(helm.template("memoryKeys.receiptKey.create=true")).keys() == {
        ("kaos-system", "kaos-memory-receipt-key")
    }


def test_the_kek_secret_is_a_versioned_kek_the_memory_service_reads(
    helm: Helm, tmp_path: Path
) -> None:
    kek = find_object(helm.template(*BOTH), "Secret", "kaos-memory-kek")

    assert kek["metadata"]["annotations"] == KEEP
    assert kek["metadata"]["labels"]["app.kubernetes.io/component"] == "memory-keys"
    data = _decoded(kek)
    assert sorted(data) == ["current", "v1"]
    assert data["current"] == b"v1"
    assert len(base64.b64decode(data["v1"], validate=True)) == 32
    # What the pod gets (spec.encryption.kekSecret mounted as a directory) seals and opens.
    store = SecretFileKek(_mounted(kek, tmp_path / "kek"))
    assert store.load() == "v1"
    wrapped = asyncio.run(store.wrap("alice", b"k" * 32))
    assert wrapped.kek_id.endswith("v1")
    assert asyncio.run(store.unwrap("alice", wrapped)) == b"k" * 32


def test_the_receipt_key_secret_is_an_ed25519_pkcs8_key(helm: Helm) -> None:
    secret = find_object(helm.template(*BOTH), "Secret", "kaos-memory-receipt-key")

    assert secret["metadata"]["annotations"] == KEEP
    data = _decoded(secret)
    assert sorted(data) == ["receipt-key.pem"]
    # The same check the memory service makes at start (KAOS_MEMORY_RECEIPT_KEY_FILE).
    key = private_key_from_pem(data["receipt-key.pem"])
    assert key.sign(b"receipt")


def test_each_namespace_gets_keys_of_its_own(helm: Helm) -> None:
    objects = helm.template(*BOTH, "memoryKeys.extraNamespaces={team-a,team-b}")
    secrets = _key_secrets(objects)

    assert sorted(secrets) == [
        (ns, name)
        for ns in ("kaos-system", "team-a", "team-b")
        for name in ("kaos-memory-kek", "kaos-memory-receipt-key")
    ]
    assert all(s["metadata"]["annotations"] == KEEP for s in secrets.values())
    keks = {_decoded(s)["v1"] for (_, name), s in secrets.items() if name.endswith("-kek")}
    pems = {_decoded(s)["receipt-key.pem"] for (_, n), s in secrets.items() if "receipt" in n}
    assert (len(keks), len(pems)) == (3, 3)


def test_without_a_secret_in_the_cluster_each_render_draws_new_keys(helm: Helm) -> None:
    first, second = (
        _decoded(find_object(helm.template(*BOTH), "Secret", "kaos-memory-kek")) for _ in range(2)
    )
    assert first["v1"] != second["v1"]


def test_names_can_be_chosen(helm: Helm) -> None:
    objects = helm.template(
        *BOTH, "memoryKeys.kek.name=store-kek", "memoryKeys.receiptKey.name=store-receipts"
    )
    assert {"Secret/store-kek", "Secret/store-receipts"} <= kinds(objects)


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("memoryKeys.kek.create=yes", "at '/memoryKeys/kek/create': got string, want boolean"),
        ("memoryKeys.receiptKey.create=1", "at '/memoryKeys/receiptKey/create'"),
        ("memoryKeys.kek.name=Not_A_Name", "at '/memoryKeys/kek/name'"),
        ("memoryKeys.receiptKey.name=-bad", "at '/memoryKeys/receiptKey/name'"),
        ("memoryKeys.extraNamespaces={Team_A}", "at '/memoryKeys/extraNamespaces/0'"),
        ("memoryKeys.kek.version=v2", "additional properties 'version' not allowed"),
        ("memoryKeys.enabled=true", "at '/memoryKeys': additional properties 'enabled'"),
    ],
)
def test_schema_refuses_bad_values(helm: Helm, assignment: str, message: str) -> None:
    stderr = failure(helm, *BOTH, assignment)

    assert SCHEMA_ERROR in stderr
    assert message in stderr


def test_namespaces_without_a_key_to_create_fail_the_install(helm: Helm) -> None:
    stderr = failure(helm, "memoryKeys.extraNamespaces={team-a}")

    assert "memoryKeys.extraNamespaces needs memoryKeys.kek.create=true" in stderr
    assert SCHEMA_ERROR not in stderr
