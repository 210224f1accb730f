"""spec.receipts.keySecret: the Secret's one key is mounted read-only as the file the memory
service signs erasure receipts with; without it nothing is mounted and the store keeps the
key it generates."""

from __future__ import annotations

from kaos_operator.desired import desired_memorystore_objects

from tests.support.operator_objects import by_kind, env_of, store
from tests.unit.operator.test_desired_memorystore import EXTERNAL, ctx

KEY_SECRET = {"keySecret": {"name": "mem-receipts", "key": "ed25519.pem"}}


def test_the_key_secret_is_mounted_as_the_receipt_key_file() -> None:
    s = store("mem", receipts=KEY_SECRET, **EXTERNAL)
    dep = by_kind(desired_memorystore_objects(s, ctx()))["Deployment"]
    pod = dep["spec"]["template"]["spec"]

    assert env_of(dep)["KAOS_MEMORY_RECEIPT_KEY_FILE"] == "/etc/kaos/receipts/receipt-key.pem"
    assert pod["volumes"][-1] == {
        "name": "receipt-key",
        "secret": {
            "secretName": "mem-receipts",
            "items": [{"key": "ed25519.pem", "path": "receipt-key.pem"}],
            "defaultMode": 0o440,
        },
    }
    assert pod["containers"][0]["volumeMounts"][-1] == {
        "name": "receipt-key",
        "mountPath": "/etc/kaos/receipts",
        "readOnly": True,
    }


def test_without_a_key_secret_nothing_is_mounted() -> None:
    for spec in ({}, {"receipts": {}}):
        dep = by_kind(desired_memorystore_objects(store("mem", **spec), ctx()))["Deployment"]
        pod = dep["spec"]["template"]["spec"]
        assert "KAOS_MEMORY_RECEIPT_KEY_FILE" not in env_of(dep)
        assert [v["name"] for v in pod["volumes"]] == ["data"]
