"""The KMS settings (``kaos_memory.settings.kms``): ``KAOS_MEMORY_ENCRYPTION_KEK=kms`` without
the KMS's region or credentials stops the service at load with one line naming them, bad
values are refused by name, and complete settings make a client of the KMS they name."""

from __future__ import annotations

import os

import pytest
from kaos_memory.settings import SettingsError, load_memory_settings

from tests.support.kms import LocalKms

KMS = "KAOS_MEMORY_ENCRYPTION_KMS_"


def test_the_kms_kek_without_its_settings_does_not_load() -> None:
    with pytest.raises(SettingsError) as refused:
        load_memory_settings({"KAOS_MEMORY_ENCRYPTION_KEK": "kms", f"{KMS}REGION": "eu-west-2"})
    assert str(refused.value) == (
        "invalid settings: KAOS_MEMORY_ENCRYPTION_KEK=kms needs"
        f" {KMS}ACCESS_KEY_ID, {KMS}SECRET_ACCESS_KEY"
    )


@pytest.mark.parametrize(
    ("variables", "named"),
    [
        ({f"{KMS}ALIAS_PREFIX": "aws/kaos"}, f"{KMS}ALIAS_PREFIX='aws/kaos'"),
        ({f"{KMS}ALIAS_PREFIX": "kaos memory"}, f"{KMS}ALIAS_PREFIX='kaos memory'"),
        ({f"{KMS}DELETION_WINDOW_DAYS": "1"}, f"{KMS}DELETION_WINDOW_DAYS='1'"),
        ({f"{KMS}KEY_CHECK_SECONDS": "-1"}, f"{KMS}KEY_CHECK_SECONDS='-1'"),
        ({f"{KMS}ENDPOINT": "kms.local:4599"}, f"{KMS}ENDPOINT='kms.local:4599'"),
        ({f"{KMS}ACCESS_KEY_ID": "AKID"}, f"{KMS}ACCESS_KEY_ID and {KMS}SECRET_ACCESS_KEY"),
    ],
)
def test_bad_kms_settings_are_refused_by_name(variables: dict[str, str], named: str) -> None:
    with pytest.raises(SettingsError, match=named.replace("(", r"\(")):
        load_memory_settings(variables)


def test_the_secret_key_stays_out_of_the_settings_repr() -> None:
    settings = load_memory_settings(
        {f"{KMS}ACCESS_KEY_ID": "AKID", f"{KMS}SECRET_ACCESS_KEY": "the-secret-key"}
    )
    assert "the-secret-key" not in repr(settings)


async def test_complete_settings_make_a_client_of_the_kms_they_name(kms: LocalKms) -> None:
    settings = load_memory_settings(kms.env())
    assert settings.encryption.enabled
    backend = settings.kms.kek(store="kaos-tests/settings/kaos_memory")
    try:
        data_key = os.urandom(32)
        wrapped = await backend.wrap("kaos_memory/principal:alice", data_key)
        assert await backend.unwrap("kaos_memory/principal:alice", wrapped) == data_key
    finally:
        await backend.close()
    aws = load_memory_settings({**kms.env(), f"{KMS}ENDPOINT": ""}).kms.kek(store="s")
    assert aws.endpoint == "https://kms.eu-west-2.amazonaws.com/"
    # How long an unwrapped key is used before the KMS is asked again: the keyring's bound.
    assert (backend.check_seconds, aws.check_seconds) == (5.0, 5.0)
    every_use = load_memory_settings({**kms.env(), f"{KMS}KEY_CHECK_SECONDS": "0"})
    assert every_use.kms.kek(store="s").check_seconds == 0
