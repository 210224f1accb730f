"""The opened-text cache: an entry serves only the record it opened for and only the same
ciphertext; bounded; a gone key's texts leave it."""

from __future__ import annotations

from kaos_memory.crypto.opened import OpenedTexts, split_record


def test_a_record_splits_after_its_last_slash_else_its_first_colon() -> None:
    assert split_record("turn:g/s/0011aabb") == ("turn:g/s/", "0011aabb")
    assert split_record("digest:g/s/3") == ("digest:g/s/", "3")
    assert split_record("fact:7f0c") == ("fact:", "7f0c")
    for record in ("turn:g/s/0011aabb", "fact:7f0c", "message:a:b", "plain"):
        space, rid = split_record(record)
        assert space + rid == record


def test_an_entry_serves_its_record_and_ciphertext_only() -> None:
    texts = OpenedTexts(1024)
    texts.put("turn:k/", "r1", "~kx1:AAAA", "hello")

    assert texts.get("turn:k/r1", "~kx1:AAAA") == "hello"
    assert texts.space("turn:k/")["r1"] == ("~kx1:AAAA", "hello")
    # The row's ciphertext was replaced: not this entry's.
    assert texts.get("turn:k/r1", "~kx1:BBBB") is None
    # The same ciphertext in another row or session.
    assert texts.get("turn:k/r2", "~kx1:AAAA") is None
    assert texts.get("turn:other/r1", "~kx1:AAAA") is None
    assert texts.space("turn:other/") == {}


def test_the_oldest_used_space_gives_way_first() -> None:
    texts = OpenedTexts(64 * 4)  # one text may hold 4 characters
    texts.put("a/", "1", "~kx1:a1", "aaaa")
    texts.put("b/", "1", "~kx1:b1", "bbbb")
    texts.space("a/")  # read: a is the newer now
    for i in range(63):
        texts.put("c/", str(i), f"~kx1:c{i}", "cccc")

    # At most 256 characters held: b went first, then a.
    assert texts.get("b/1", "~kx1:b1") is None
    assert texts.get("a/1", "~kx1:a1") == "aaaa"
    texts.put("c/", "63", "~kx1:c63", "cccc")
    assert texts.get("a/1", "~kx1:a1") is None
    assert texts.get("c/0", "~kx1:c0") == "cccc"
    assert len(texts) == 64


def test_a_text_too_large_for_its_share_is_not_kept() -> None:
    texts = OpenedTexts(64 * 4)
    texts.put("a/", "1", "~kx1:a1", "x" * 5)
    assert texts.get("a/1", "~kx1:a1") is None


def test_dropping_a_key_drops_every_text_it_sealed() -> None:
    texts = OpenedTexts(1024)
    texts.put("turn:k/", "1", "~kx1:HEADaaaa", "one")
    texts.put("turn:k/", "2", "~kx1:OTHERbbb", "two")
    texts.put("fact:", "f", "~kx1:HEADcccc", "three")

    texts.drop("~kx1:HEAD")

    assert texts.get("turn:k/1", "~kx1:HEADaaaa") is None
    assert texts.get("fact:f", "~kx1:HEADcccc") is None
    assert texts.get("turn:k/2", "~kx1:OTHERbbb") == "two"
    assert len(texts) == 1
