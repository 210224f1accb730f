"""The conversational tables' part in retention and quotas (``kaos_memory.retention``,
``kaos_memory.quota``).

Retention selects sessions by their last write and records the facts it deleted by age
as a final store-level erasure with its audit record; the sessions themselves are erased
by ``erasure.erase`` like any forget. A write's quota is checked at the start of the
write's own transaction (``check_quota``), so a refused write rolls back having written
nothing, and the check is exact under concurrency: the agent's minute counter is one
conditional upsert (a row lock in PostgreSQL), and the principal's usage is read under a
per-principal lock (PostgreSQL's advisory lock; SQLite has one writer at a time).
"""

from __future__ import annotations

import math

from kaos_memory.scope import Attribution, Scope
from kaos_memory.storage.audit import Actor
from kaos_memory.storage.base import IdleSession, NewTurn
from kaos_memory.storage.limits import QuotaExceeded, WriteQuota
from kaos_memory.storage.sql import audit
from kaos_memory.storage.sql.dialect import Tx

# The write-rate window: a fixed calendar minute per agent.
RATE_WINDOW_SECONDS = 60
# Writes without an agent identity share this agent's counter (headers cannot be empty).
NO_AGENT = ""


def sessions_idle_since(tx: Tx, group: str, before: str, limit: int) -> list[IdleSession]:
    rows = tx.all(
        "SELECT key, session, last_at FROM kaos_mem_sessions"
        " WHERE grp = %s AND last_at < %s ORDER BY last_at, key LIMIT %s",
        (group, before, limit),
    )
    return [IdleSession(key=k, session=s, last_at=a) for k, s, a in rows]


def record_expiry(tx: Tx, group: str, actor: Actor, facts: int) -> int:
    """A final store-level tombstone (it reached no session, so nothing is fenced or
    resumed) and its audit record counting ``facts`` in the long-term tier."""
    row = tx.one(
        "INSERT INTO kaos_mem_erasures (grp, level, session, principal, agent, erased_at,"
        " done_at) VALUES (%s, %s, NULL, NULL, NULL, %s, %s) RETURNING id",
        (group, "store", tx.now, tx.now),
    )
    erasure_id = int(row[0])
    scope = Scope(level="store", group=group, session=None, principal=None, agent=None)
    audit_id = audit.record(tx, erasure_id, scope, actor, 0, 0)
    audit.add_long_term(tx, erasure_id, facts)
    return audit_id


def prune_write_rates(tx: Tx) -> int:
    minute = int(tx.now // RATE_WINDOW_SECONDS)
    return max(
        tx.execute("DELETE FROM kaos_mem_write_rates WHERE minute < %s", (minute,)).rowcount, 0
    )


def check_quota(tx: Tx, attribution: Attribution, turns: list[NewTurn], quota: WriteQuota) -> None:
    """Count the write against ``quota``; ``QuotaExceeded`` when it is over one. Runs first
    in the write's transaction: whatever it counted rolls back with a refused write."""
    if quota.agent_writes_per_minute is not None:
        _take_rate(tx, attribution, quota.agent_writes_per_minute)
    principal = attribution.principal
    if principal is None or (quota.principal_turns is None and quota.principal_bytes is None):
        return
    # Writers of one principal (any session, any replica) check and write one at a time.
    tx.lock_key(f"quota|{attribution.group}|{principal}")
    octets = tx.dialect.types.octets.format("t.content")
    row = tx.one(
        f"SELECT COUNT(*), COALESCE(SUM({octets}), 0) FROM kaos_mem_turns t"
        " WHERE t.principal = %s AND t.key IN (SELECT a.key FROM kaos_mem_attribution a"
        " WHERE a.grp = %s AND a.principal = %s)",
        (principal, attribution.group, principal),
    )
    stored_turns, stored_bytes = int(row[0]), int(row[1])
    limit = quota.principal_turns
    if limit is not None and stored_turns + len(turns) > limit:
        raise QuotaExceeded("turns", limit)
    limit = quota.principal_bytes
    incoming = sum(len(t.content.encode()) for t in turns)
    if limit is not None and stored_bytes + incoming > limit:
        raise QuotaExceeded("bytes", limit)


def _take_rate(tx: Tx, attribution: Attribution, per_minute: int) -> None:
    minute = int(tx.now // RATE_WINDOW_SECONDS)
    # One statement: the row lock orders concurrent writers, so the counter never passes
    # the limit; at the limit the update does not happen and no row comes back.
    taken = tx.one(
        "INSERT INTO kaos_mem_write_rates (grp, agent, minute, writes) VALUES (%s, %s, %s, 1)"
        " ON CONFLICT (grp, agent, minute) DO UPDATE SET writes = kaos_mem_write_rates.writes + 1"
        " WHERE kaos_mem_write_rates.writes < %s RETURNING writes",
        (attribution.group, attribution.agent or NO_AGENT, minute, per_minute),
    )
    if taken is None:
        window_end = (minute + 1) * RATE_WINDOW_SECONDS
        retry_after = max(1, math.ceil(window_end - tx.now))
        raise QuotaExceeded("write_rate", per_minute, retry_after)
