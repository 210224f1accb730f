"""The Secret KEK: versions, rotation without re-encryption, and refusals."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kaos_memory.crypto.kek import (
    KekError,
    KeyUnreadable,
    SecretFileKek,
    WrappedKey,
    new_kek_version,
)


def _kek_dir(root: Path, *versions: str) -> Path:
    for version in versions:
        (root / version).write_text(new_kek_version())
    (root / "current").write_text(versions[-1])
    return root


async def test_rotation_wraps_with_the_new_version_and_still_unwraps_the_old(
    tmp_path: Path,
) -> None:
    kek = SecretFileKek(_kek_dir(tmp_path, "v1"))
    data_key = os.urandom(32)
    old = await kek.wrap("g/principal:alice", data_key)
    assert old.kek_id == "secret:v1"

    (tmp_path / "v2").write_text(new_kek_version())
    (tmp_path / "current").write_text("v2")
    new = await kek.wrap("g/principal:alice", data_key)
    assert new.kek_id == "secret:v2"
    assert await kek.unwrap("g/principal:alice", old) == data_key
    assert await kek.unwrap("g/principal:alice", new) == data_key
    # A fresh process reads the rotated directory the same way.
    assert await SecretFileKek(tmp_path).unwrap("g/principal:alice", old) == data_key


async def test_a_wrapped_key_unwraps_only_for_its_owner(tmp_path: Path) -> None:
    kek = SecretFileKek(_kek_dir(tmp_path, "v1"))
    wrapped = await kek.wrap("g/principal:alice", os.urandom(32))
    with pytest.raises(KeyUnreadable):
        await kek.unwrap("g/principal:bob", wrapped)


async def test_a_removed_version_or_another_kek_is_unreadable_not_destroyed(tmp_path: Path) -> None:
    kek = SecretFileKek(_kek_dir(tmp_path, "v1"))
    wrapped = await kek.wrap("o", os.urandom(32))
    with pytest.raises(KeyUnreadable):
        await SecretFileKek(tmp_path).unwrap("o", WrappedKey("secret:v9", wrapped.blob))
    with pytest.raises(KeyUnreadable):
        await kek.unwrap("o", WrappedKey("kms:arn", wrapped.blob))


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({}, "no current file"),
        ({"current": ""}, "names no version"),
        ({"current": "v1"}, "unreadable"),
        ({"current": "v1", "v1": "not base64!"}, "unreadable"),
        ({"current": "v1", "v1": "c2hvcnQ="}, "not 32 bytes"),
    ],
)
def test_a_malformed_kek_directory_is_refused(
    tmp_path: Path, files: dict[str, str], message: str
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(KekError, match=message):
        SecretFileKek(tmp_path).load()
