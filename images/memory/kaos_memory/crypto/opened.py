"""Opened texts kept in memory for the next read of their row (``Keyring.texts``).

A session's window is read on every turn of its conversation, and opening each of its turns
again every time would cost more than reading them. An entry is found by the record it
opened for, split in two: a space (``turn:<conversation key>/``, ``fact:``) and an id in it
(the turn's record id, the fact's id), so a read finds its session's entries once and each
turn by its short id, with no record built per row. ``space + rid`` is always exactly the
record the entry's text opened for, and an entry is used only when the stored text is the
same ciphertext it was opened from: a row whose ciphertext was replaced (re-sealed, moved,
written over) misses and is opened afresh, and whatever the cache holds, a read gives only
what opening that ciphertext for that record would give.

Bounded in characters (the oldest-used space gives up its oldest entries first). Used on
the event loop only: it is not thread-safe.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from types import MappingProxyType

# (the sealed text as stored, its plaintext)
Entry = tuple[str, str]

_NOTHING: Mapping[str, Entry] = MappingProxyType({})


def split_record(record: str) -> tuple[str, str]:
    """``record`` as (space, id): cut after its last ``/``, else after its first ``:``."""
    cut = record.rfind("/")
    if cut < 0:
        cut = record.find(":")
    return record[: cut + 1], record[cut + 1 :]


class OpenedTexts:
    def __init__(self, capacity: int) -> None:
        self._spaces: OrderedDict[str, OrderedDict[str, Entry]] = OrderedDict()
        self._size = 0
        self._capacity = capacity

    def space(self, space: str) -> Mapping[str, Entry]:
        """The entries of ``space`` by id (read them at once: a ``put`` may change them)."""
        found = self._spaces.get(space)
        if found is None:
            return _NOTHING
        self._spaces.move_to_end(space)
        return found

    def get(self, record: str, sealed: str) -> str | None:
        space, rid = split_record(record)
        hit = self._spaces.get(space, _NOTHING).get(rid)
        return hit[1] if hit is not None and hit[0] == sealed else None

    def put(self, space: str, rid: str, sealed: str, text: str) -> None:
        """Keep ``text``, what ``sealed`` opened to for the record ``space + rid``."""
        if len(text) > self._capacity // 64:
            return  # one large text would push out many small ones
        entries = self._spaces.get(space)
        if entries is None:
            entries = self._spaces[space] = OrderedDict()
        else:
            self._spaces.move_to_end(space)
        old = entries.pop(rid, None)
        if old is not None:
            self._size -= len(old[1])
        entries[rid] = (sealed, text)
        self._size += len(text)
        while self._size > self._capacity:
            name, oldest = next(iter(self._spaces.items()))
            _, (_, dropped) = oldest.popitem(last=False)
            self._size -= len(dropped)
            if not oldest:
                del self._spaces[name]

    def drop(self, head: str) -> None:
        """Drop every text sealed under the key ``head`` names (it is gone)."""
        for name in list(self._spaces):
            entries = self._spaces[name]
            for rid in [r for r, (sealed, _) in entries.items() if sealed.startswith(head)]:
                self._size -= len(entries.pop(rid)[1])
            if not entries:
                del self._spaces[name]

    def clear(self) -> None:
        self._spaces.clear()
        self._size = 0

    def __len__(self) -> int:
        return sum(len(e) for e in self._spaces.values())


__all__ = ["Entry", "OpenedTexts", "split_record"]
