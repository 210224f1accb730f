"""One data key per owner: created on first use, wrapped by the KEK in the conversation
store's key table, unwrapped into a bounded in-memory cache, destroyed by a principal's
forget.

An owner is the principal a text belongs to, else the agent that wrote it, else the store
(``owner_of``). The key table (``KeyTable``: SQLite in local mode, PostgreSQL in external
mode) holds per owner a random key id and the wrapped key. Sealing (``DataKey.seal``) and
opening (``Keyring.open``) are synchronous and cheap once the key is cached (one AES-GCM
object per key); the first use of a key costs one key-table read and one unwrap.

A cached key is used for at most the KEK's ``check_seconds`` (``Keyring.revalidate``) before
it is checked again: its row read again and the key unwrapped again, so a key another
replica's forget deleted, or one destroyed in the KMS outside KAOS, stops opening anything
within that bound on every replica (at once with a bound of 0, at the cost of a check on
every use). A write also checks the key row in its own transaction (the window's turns).
A text whose key is gone (no row, or the KEK refuses to unwrap it) opens as ``None``: it
reads as erased. A check that cannot finish (the KMS does not answer) fails the read: a key
nobody could check is not trusted.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from kaos_memory.crypto import envelope
from kaos_memory.crypto.kek import (
    KEY_BYTES,
    KeyDestroyed,
    KeyEncryptionKey,
    KeyUnreadable,
    WrappedKey,
)
from kaos_memory.crypto.opened import Entry, OpenedTexts, split_record

log = logging.getLogger(__name__)

T = TypeVar("T")

# Unwrapped keys kept in memory.
DEFAULT_CAPACITY = 4096
# Opened texts kept in memory, in characters.
DEFAULT_TEXT_CACHE_BYTES = 32 * 2**20
STORE_OWNER = "store"


def owner_of(principal: str | None, agent: str | None) -> str:
    """The owner of a text: its principal, else its agent, else the store."""
    if principal:
        return f"principal:{principal}"
    if agent:
        return f"agent:{agent}"
    return STORE_OWNER


def principal_owner(principal: str) -> str:
    return owner_of(principal, None)


class KeyGone(Exception):
    """A write sealed under a key whose row is gone (shredded meanwhile): nothing was
    written; the writer takes the owner's current key and writes again."""


@dataclass(frozen=True)
class StoredKey:
    """A key-table row: the key id (hex), the owner, and the wrapped data key."""

    id: str
    group: str
    owner: str
    kek_id: str
    blob: bytes


class KeyTable(Protocol):
    async def find_key(self, group: str, owner: str) -> StoredKey | None: ...

    async def load_key(self, key_id: str) -> StoredKey | None: ...

    async def insert_key(self, key: StoredKey) -> StoredKey:
        """Insert unless the owner has a key; the owner's key after (the winner of a race)."""
        ...

    async def delete_key(self, group: str, owner: str) -> int: ...


class DataKey:
    """An owner's unwrapped data key: seals and opens that owner's texts."""

    __slots__ = ("_aead", "_blind", "_scope", "checked", "head", "id", "owner")

    def __init__(
        self, key_id: bytes, group: str, owner: str, secret: bytes, checked: float = 0.0
    ) -> None:
        self.id = key_id
        self.head = envelope.head(key_id)
        self.owner = owner
        self._aead = AESGCM(secret)
        self._scope = envelope.owner_scope(group, owner)
        self._blind = envelope.blind(secret, "kaos blind index").encode()
        # When its row was last read and it last unwrapped (the keyring's clock).
        self.checked = checked

    def seal(self, text: str, record: str) -> str:
        ad = envelope.associated(self._scope, record)
        return envelope.seal_under(self._aead, self.head, ad, text)

    def open(self, sealed: str, record: str) -> str:
        """The text; ``envelope.Unreadable`` when it is not this row's."""
        return envelope.open_sealed(self._aead, envelope.associated(self._scope, record), sealed)

    def blind(self, token: str) -> str:
        return envelope.blind(self._blind, token)


# Keys a batch found, by head (``Keyring.prepare``).
Batch = dict[str, DataKey]


class Keyring:
    """The data keys of one store group, over its key table and a KEK.

    Opened texts are kept in memory too (``texts``, ``text_cache_bytes`` characters): a
    session's window is read on every turn of the conversation. ``revalidate``: how long a
    cached key is used before it is checked again (the KEK's ``check_seconds`` unless
    given); ``clock``: monotonic seconds.
    """

    def __init__(
        self,
        group: str,
        table: KeyTable,
        kek: KeyEncryptionKey,
        *,
        capacity: int = DEFAULT_CAPACITY,
        revalidate: float | None = None,
        text_cache_bytes: int = DEFAULT_TEXT_CACHE_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.group = group
        self._table = table
        self.kek = kek
        self._capacity = capacity
        self.revalidate = kek.check_seconds if revalidate is None else revalidate
        self._clock = clock
        self._by_owner: OrderedDict[str, DataKey] = OrderedDict()
        self._by_head: OrderedDict[str, DataKey] = OrderedDict()
        # Heads of keys known to be gone (shredded): ids are random, one never comes back.
        self._gone: OrderedDict[str, None] = OrderedDict()
        self.texts = OpenedTexts(text_cache_bytes)
        self._creating: dict[str, asyncio.Future[DataKey]] = {}
        # Loads and checks of a key by head under way: asked at once, done once.
        self._loading: dict[str, asyncio.Future[DataKey | None]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        """Bind to the running event loop (worker threads reach the key table through it)."""
        self._loop = asyncio.get_running_loop()

    def kek_owner(self, owner: str) -> str:
        """The owner as the KEK knows it (group-qualified)."""
        return f"{self.group}/{owner}"

    # --- the caches ----------------------------------------------------------------------

    def _remember(self, key: DataKey) -> DataKey:
        self._by_owner[key.owner] = key
        self._by_owner.move_to_end(key.owner)
        self._by_head[key.head] = key
        self._by_head.move_to_end(key.head)
        while len(self._by_head) > self._capacity:
            _, old = self._by_head.popitem(last=False)
            if self._by_owner.get(old.owner) is old:
                del self._by_owner[old.owner]
        while len(self._by_owner) > self._capacity:
            self._by_owner.popitem(last=False)
        return key

    def _mark_gone(self, head: str) -> None:
        self._gone[head] = None
        while len(self._gone) > self._capacity:
            self._gone.popitem(last=False)
        self._drop(head)

    def _drop(self, head: str) -> None:
        """Forget the key ``head`` names and the texts it opened."""
        key = self._by_head.pop(head, None)
        if key is not None and self._by_owner.get(key.owner) is key:
            del self._by_owner[key.owner]
        self.texts.drop(head)

    def _fresh(self, key: DataKey) -> bool:
        return self._clock() - key.checked < self.revalidate

    def remember(self, space: str, rid: str, sealed: str, text: str) -> None:
        """Keep an opened (or just sealed) text for the next read of its row (the record
        ``space + rid``; ``OpenedTexts``)."""
        self.texts.put(space, rid, sealed, text)

    def opened(self, space: str) -> Mapping[str, Entry]:
        """The texts kept for the records of ``space``, by id: an entry serves a row only
        when the row holds the same sealed text. Call ``prepare`` on the rows first (it
        checks their keys)."""
        return self.texts.space(space)

    def evict(self, owner: str) -> None:
        """Forget the cached key of ``owner`` (its row was deleted or replaced)."""
        key = self._by_owner.pop(owner, None)
        if key is not None:
            self._by_head.pop(key.head, None)

    async def _unwrap(self, stored: StoredKey) -> DataKey | None:
        """The key; None when the KEK destroyed it. ``KeyUnreadable`` (a KEK that cannot
        unwrap it) propagates: nothing is decided on a misconfiguration."""
        try:
            secret = await self.kek.unwrap(
                self.kek_owner(stored.owner), WrappedKey(stored.kek_id, stored.blob)
            )
        except KeyDestroyed:
            self._mark_gone(envelope.head(bytes.fromhex(stored.id)))
            return None
        return DataKey(bytes.fromhex(stored.id), self.group, stored.owner, secret, self._clock())

    # --- sealing -------------------------------------------------------------------------

    def cached(self, owner: str) -> DataKey | None:
        """The owner's key when it is cached and checked within ``revalidate`` (what
        ``key_for`` answers without waiting), else None."""
        key = self._by_owner.get(owner)
        return key if key is not None and self._fresh(key) else None

    async def key_for(self, owner: str) -> DataKey:
        """The owner's data key, created (and wrapped, and stored) on first use."""
        key = self.cached(owner)
        if key is not None:
            return key
        # Held but due for its check (or not held): resolved once for every waiter.
        key = self._by_owner.get(owner)
        self._loop = asyncio.get_running_loop()
        pending = self._creating.get(owner)
        if pending is None:
            pending = asyncio.ensure_future(self._resolve(owner, key))
            self._creating[owner] = pending
            pending.add_done_callback(lambda _: self._creating.pop(owner, None))
        return await asyncio.shield(pending)

    async def _resolve(self, owner: str, cached: DataKey | None) -> DataKey:
        stored = await self._table.find_key(self.group, owner)
        if cached is not None and (stored is None or stored.id != cached.id.hex()):
            self.evict(owner)
            self._mark_gone(cached.head)  # shredded by a forget on another replica
            cached = None
        if stored is None:
            secret = os.urandom(KEY_BYTES)
            wrapped = await self.kek.wrap(self.kek_owner(owner), secret)
            candidate = StoredKey(
                id=os.urandom(envelope.KEY_ID_BYTES).hex(),
                group=self.group,
                owner=owner,
                kek_id=wrapped.kek_id,
                blob=wrapped.blob,
            )
            stored = await self._table.insert_key(candidate)
            if stored.id == candidate.id:
                return self._remember(
                    DataKey(bytes.fromhex(stored.id), self.group, owner, secret, self._clock())
                )
        # Unwrapped again even when cached: the KEK may have destroyed it meanwhile.
        key = await self._unwrap(stored)
        if key is None:
            # The owner's row holds a key the KMS destroyed (a copy restored after the
            # owner's forget, or destroyed in the KMS by hand): a new key replaces it; what
            # it sealed stays unreadable.
            await self._table.delete_key(self.group, owner)
            return await self._resolve(owner, None)
        if cached is not None:
            cached.checked = key.checked
            return self._remember(cached)
        return self._remember(key)

    def key_for_sync(self, owner: str) -> DataKey:
        """``key_for`` from a worker thread (never the event loop's)."""
        key = self.cached(owner)
        return key if key is not None else self._on_loop(self.key_for(owner))

    # --- opening -------------------------------------------------------------------------

    async def prepare(self, texts: Iterable[str | None]) -> Batch:
        """Load the keys ``texts`` are sealed with, and check again those cached longer
        than ``revalidate``: the batch ``open`` is given, so a key the bounded cache
        dropped meanwhile still opens its texts. A key found gone is left out (its texts
        read as erased); a check that cannot finish raises (``KmsUnavailable``, a storage
        error): nothing is opened with a key that could not be checked."""
        batch: Batch = {}
        prefix, size = envelope.PREFIX, envelope.HEAD_LEN
        last = None  # the head before: a read's texts are mostly one owner's
        for text in texts:
            if text is None or (last is not None and text.startswith(last)):
                continue
            if not text.startswith(prefix):
                continue
            head = last = text[:size]
            if head in batch or head in self._gone:
                continue
            key = self._by_head.get(head)
            if key is None or not self._fresh(key):
                key = await self._usable(head)
            if key is not None:
                batch[head] = key
        return batch

    async def _usable(self, head: str) -> DataKey | None:
        """The key ``head`` names, loaded or checked again; None when it is gone or this
        KEK cannot unwrap it. One load per head at a time."""
        self._loop = asyncio.get_running_loop()
        pending = self._loading.get(head)
        if pending is None:
            pending = asyncio.ensure_future(self._load(head))
            self._loading[head] = pending
            pending.add_done_callback(lambda _: self._loading.pop(head, None))
        return await asyncio.shield(pending)

    async def _load(self, head: str) -> DataKey | None:
        cached = self._by_head.get(head)
        if cached is not None and self._fresh(cached):
            return cached
        key_id = envelope.key_id_of(head)
        if key_id is None or head in self._gone:
            return None
        stored = await self._table.load_key(key_id.hex())
        if stored is None or stored.group != self.group:
            self._mark_gone(head)
            return None
        try:
            key = await self._unwrap(stored)
        except KeyUnreadable:
            # Not gone: a KEK that cannot unwrap it now (a version not yet mounted, another
            # replica's Secret). Its texts read as absent until it can; asked again next read.
            log.error("a data key does not unwrap with this KEK", extra={"key": stored.id})
            self._drop(head)
            return None
        if key is None:
            return None
        if cached is not None:
            cached.checked = key.checked
            key = cached
        return self._remember(key)

    def open(
        self, text: str, record: str, batch: Batch | None = None, *, keep: bool = True
    ) -> str | None:
        """The plaintext of a stored text (as it is when not sealed); None when it cannot
        be read (its key is gone, or it is not this row's): it reads as erased. Keys come
        from ``batch`` (``prepare``'s) or the cache; others count as gone. ``keep``: the
        opened text is cached (on the event loop only: the cache is not thread-safe)."""
        if not text.startswith(envelope.PREFIX):
            return text
        # A gone key's texts left this cache when it was marked gone (``_mark_gone``).
        found = self.texts.get(record, text)
        if found is not None:
            return found
        opened = self._open(text, record, batch)
        if keep and opened is not None:
            self.texts.put(*split_record(record), text, opened)
        return opened

    def _open(self, text: str, record: str, batch: Batch | None) -> str | None:
        head = text[: envelope.HEAD_LEN]
        if head in self._gone:
            return None
        key = (batch.get(head) if batch else None) or self._by_head.get(head)
        if key is None:
            return None
        try:
            return key.open(text, record)
        except envelope.Unreadable:
            log.warning("a sealed text does not open for its row", extra={"record": record})
            return None

    def open_sync(self, text: str, record: str, batch: Batch | None = None) -> str | None:
        """``open`` from a worker thread, with the keys of ``batch`` (``prepare_sync``'s),
        else loading (or checking) the key first when it is not cached (or not checked
        within ``revalidate``); the text cache is left alone."""
        if not text.startswith(envelope.PREFIX):
            return text
        if batch is None:
            head = text[: envelope.HEAD_LEN]
            key = self._by_head.get(head)
            if head not in self._gone and (key is None or not self._fresh(key)):
                self._on_loop(self._usable(head))
        return self._open(text, record, batch)

    def prepare_sync(self, texts: Iterable[str | None]) -> Batch:
        """``prepare`` from a worker thread: one load or check per key for many texts, on
        the event loop only when a key is not cached or is due a check."""
        prefix, size = envelope.PREFIX, envelope.HEAD_LEN
        wanted = [t for t in texts if t is not None and t.startswith(prefix)]
        batch: Batch = {}
        for text in wanted:
            head = text[:size]
            if head in batch or head in self._gone:
                continue
            key = self._by_head.get(head)
            if key is None or not self._fresh(key):
                return self._on_loop(self.prepare(wanted))
            batch[head] = key
        return batch

    # --- shredding -----------------------------------------------------------------------

    async def shred(self, owner: str) -> None:
        """Destroy ``owner``'s key outside the database (the KEK's part; the key row goes
        with the forget's tombstone) and forget it here. Idempotent."""
        key = self._by_owner.get(owner)
        self.evict(owner)
        if key is not None:
            self._mark_gone(key.head)
        await self.kek.destroy(self.kek_owner(owner))

    async def close(self) -> None:
        self._by_owner.clear()
        self._by_head.clear()
        self.texts.clear()
        await self.kek.close()

    def _on_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        loop = self._loop
        if loop is None or not loop.is_running():
            coro.close()
            raise RuntimeError("the keyring is not in use on an event loop")
        return asyncio.run_coroutine_threadsafe(coro, loop).result()


__all__ = [
    "Batch",
    "DataKey",
    "KeyGone",
    "KeyTable",
    "Keyring",
    "StoredKey",
    "owner_of",
    "principal_owner",
]
