"""Erasure of the conversational tiers: every session an ``ErasureSelector`` reaches.

The sessions are found through the attribution index. One transaction records the
tombstone (the scope, its time, the sessions it reached, and the ``erase`` lease of the
replica finishing it) with its audit record, and deletes each session's turns, digests,
fold rows (so late fold work finds them gone), attribution and session rows. Fold leases
stay: they are how the erasure sees work still in flight on those sessions, on any
replica. While the tombstone is pending, ``PENDING`` keeps fold work off its sessions
(see ``folds``).
"""

from __future__ import annotations

from kaos_memory.crypto.keyring import principal_owner
from kaos_memory.scope import Attribution, Scope
from kaos_memory.storage.audit import UNKNOWN_ACTOR, Actor
from kaos_memory.storage.base import Erased, ErasureSelector, Tombstone
from kaos_memory.storage.sql import audit
from kaos_memory.storage.sql import keys as key_table
from kaos_memory.storage.sql.dialect import Tx
from kaos_memory.storage.sql.leases import acquire, holds, release

# Whether a pending erasure reached the session ``{key}`` names (an SQL expression).
PENDING = (
    "EXISTS (SELECT 1 FROM kaos_mem_erased_keys ek JOIN kaos_mem_erasures e"
    " ON e.id = ek.erasure_id WHERE ek.key = {key} AND e.done_at IS NULL)"
)
_CHUNK = 500


def _keys(tx: Tx, selector: ErasureSelector) -> list[str]:
    if selector.key is not None:
        return [selector.key]
    where, params = ["grp = %s"], [selector.group]
    if selector.principal is not None:
        where.append("principal = %s")
        params.append(selector.principal)
    if selector.agent is not None:
        where.append("agent = %s")
        params.append(selector.agent)
    rows = tx.all(
        f"SELECT DISTINCT key FROM kaos_mem_attribution WHERE {' AND '.join(where)}",
        tuple(params),
    )
    return [r[0] for r in rows]


# A tombstone reaches the conversations the service's ``_erasure_selector`` chose: a
# session erasure the principal's own key of that session id, an agent erasure the agent's
# sessions (of the principal, when it names one), a user erasure the principal's, a store
# erasure the group's.
_COVERS = (
    "SELECT 1 FROM kaos_mem_erasures WHERE grp = %s AND erased_at > %s AND ("
    " level = 'store'"
    " OR (level = 'user' AND principal = %s)"
    " OR (level = 'agent' AND agent = %s AND (principal IS NULL OR principal = %s))"
    " OR (level = 'session' AND session = %s"
    " AND COALESCE(principal, '') = COALESCE(%s, ''))"
    ") LIMIT 1"
)


def erased_since(tx: Tx, attribution: Attribution, said_at: float) -> bool:
    """Whether an erasure recorded after ``said_at`` reaches the attribution's conversation:
    its turns, written now, would outlive a forget that came after them."""
    principal = attribution.principal
    row = tx.one(
        _COVERS,
        (
            attribution.group,
            said_at,
            principal,
            attribution.agent,
            principal,
            attribution.session,
            principal,
        ),
    )
    return row is not None


def erase(
    tx: Tx,
    selector: ErasureSelector | None,
    scope: Scope,
    owner: str,
    ttl: float,
    actor: Actor = UNKNOWN_ACTOR,
) -> Erased:
    row = tx.one(
        "INSERT INTO kaos_mem_erasures (grp, level, session, principal, agent, erased_at)"
        " VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
        (scope.group, scope.level, scope.session, scope.principal, scope.agent, tx.now),
    )
    erasure_id = int(row[0])
    keys = [] if selector is None else _keys(tx, selector)
    sessions: list[str] = []
    turns = digests = 0
    for key in keys:
        found = tx.one("SELECT session FROM kaos_mem_attribution WHERE key = %s LIMIT 1", (key,))
        session = key.split("|run:", 1)[-1] if found is None else str(found[0])
        sessions.append(session)
        tx.execute(
            "INSERT INTO kaos_mem_erased_keys (erasure_id, key, session) VALUES (%s, %s, %s)",
            (erasure_id, key, session),
        )
        # Session row, then key lock: the order every writer takes them in.
        tx.execute("DELETE FROM kaos_mem_sessions WHERE key = %s", (key,))
        tx.lock_key(key)
        turns += max(tx.execute("DELETE FROM kaos_mem_turns WHERE key = %s", (key,)).rowcount, 0)
        digests += max(
            tx.execute("DELETE FROM kaos_mem_digests WHERE key = %s", (key,)).rowcount, 0
        )
        tx.execute("DELETE FROM kaos_mem_folds WHERE key = %s", (key,))
        tx.execute("DELETE FROM kaos_mem_attribution WHERE key = %s", (key,))
    tombstone = Tombstone(
        id=erasure_id,
        group=scope.group,
        level=scope.level,
        session=scope.session,
        principal=scope.principal,
        agent=scope.agent,
        erased_at=tx.now,
        keys=tuple(keys),
        sessions=tuple(sessions),
    )
    # A principal's forget destroys its data key with the tombstone, before anything else
    # is deleted: every copy of its sealed text anywhere (backups, WAL, a replica behind)
    # is unreadable from this commit on, whatever happens to the rest of the erasure.
    shredded = False
    if scope.level == "user" and scope.principal is not None:
        shredded = key_table.delete(tx, scope.group, principal_owner(scope.principal)) > 0
    acquire(tx, tombstone.lease_key, "erase", owner, ttl)
    # The audit record commits with the tombstone: no erasure without its record.
    audit_id = audit.record(tx, erasure_id, scope, actor, turns, digests)
    return Erased(
        turns=turns,
        digests=digests,
        tombstone=tombstone,
        audit_id=audit_id,
        key_shredded=shredded,
    )


def live_leases(tx: Tx, keys: list[str]) -> int:
    live = 0
    for start in range(0, len(keys), _CHUNK):
        chunk = keys[start : start + _CHUNK]
        marks = ", ".join("%s" for _ in chunk)
        row = tx.one(
            f"SELECT COUNT(*) FROM kaos_mem_leases WHERE key IN ({marks})"
            " AND kind IN ('digest', 'extract') AND expires >= %s",
            (*chunk, tx.now),
        )
        live += int(row[0])
    return live


def finish_erasure(tx: Tx, tombstone: Tombstone, owner: str) -> bool:
    key = tombstone.lease_key
    if not holds(tx, key, "erase", owner):
        return False
    tx.execute("UPDATE kaos_mem_erasures SET done_at = %s WHERE id = %s", (tx.now, tombstone.id))
    # The sessions were only needed to keep fold work off them while pending.
    tx.execute("DELETE FROM kaos_mem_erased_keys WHERE erasure_id = %s", (tombstone.id,))
    release(tx, key, "erase", owner)
    return True


def pending_erasures(tx: Tx, limit: int) -> list[Tombstone]:
    rows = tx.all(
        "SELECT e.id, e.grp, e.level, e.session, e.principal, e.agent, e.erased_at"
        " FROM kaos_mem_erasures e WHERE e.done_at IS NULL AND NOT EXISTS"
        " (SELECT 1 FROM kaos_mem_leases l WHERE l.key = 'erasure:' || CAST(e.id AS TEXT)"
        " AND l.kind = 'erase' AND l.expires >= %s) ORDER BY e.id LIMIT %s",
        (tx.now, limit),
    )
    out = []
    for eid, grp, level, session, principal, agent, at in rows:
        reached = tx.all(
            "SELECT key, session FROM kaos_mem_erased_keys WHERE erasure_id = %s ORDER BY key",
            (eid,),
        )
        out.append(
            Tombstone(
                id=int(eid),
                group=grp,
                level=level,
                session=session,
                principal=principal,
                agent=agent,
                erased_at=float(at),
                keys=tuple(k for k, _ in reached),
                sessions=tuple(s for _, s in reached),
            )
        )
    return out
