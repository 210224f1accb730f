"""spec.encryption.kekSecret: the whole Secret (the KEK's versions and ``current``) is
mounted read-only as the directory the memory service reads its KEK from, and sealing is
switched on; without it nothing is mounted and the service's default (off) stands."""

from __future__ import annotations

from kaos_operator.desired import desired_memorystore_objects

from tests.support.operator_objects import by_kind, env_of, store
from tests.unit.operator.test_desired_memorystore import EXTERNAL, ctx


def test_the_kek_secret_is_mounted_and_sealing_is_on() -> None:
    s = store("mem", encryption={"kekSecret": "mem-kek"}, **EXTERNAL)
    dep = by_kind(desired_memorystore_objects(s, ctx()))["Deployment"]
    pod = dep["spec"]["template"]["spec"]

    env = env_of(dep)
    assert env["KAOS_MEMORY_ENCRYPTION"] == "on"
    assert env["KAOS_MEMORY_ENCRYPTION_KEK_DIR"] == "/var/run/kaos/memory-kek"
    # Not one key by subPath: a rotated Secret has to reach the running pod.
    assert pod["volumes"][-1] == {
        "name": "kek",
        "secret": {"secretName": "mem-kek", "defaultMode": 0o440},
    }
    assert pod["containers"][0]["volumeMounts"][-1] == {
        "name": "kek",
        "mountPath": "/var/run/kaos/memory-kek",
        "readOnly": True,
    }


def test_disabled_encryption_mounts_nothing_and_says_off() -> None:
    s = store("mem", encryption={"kekSecret": "mem-kek", "enabled": False}, **EXTERNAL)
    dep = by_kind(desired_memorystore_objects(s, ctx()))["Deployment"]
    assert env_of(dep)["KAOS_MEMORY_ENCRYPTION"] == "off"
    assert "KAOS_MEMORY_ENCRYPTION_KEK_DIR" not in env_of(dep)
    assert [v["name"] for v in dep["spec"]["template"]["spec"]["volumes"]] == ["data"]


def test_without_a_kek_secret_nothing_is_mounted() -> None:
    for spec in ({}, {"encryption": {}}):
        dep = by_kind(desired_memorystore_objects(store("mem", **spec), ctx()))["Deployment"]
        assert "KAOS_MEMORY_ENCRYPTION" not in env_of(dep)
        assert [v["name"] for v in dep["spec"]["template"]["spec"]["volumes"]] == ["data"]
