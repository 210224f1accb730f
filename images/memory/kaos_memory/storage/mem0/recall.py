"""Which of a search's nearest facts a recall returns, and in what order.

The backend's nearest facts (the pool) are kept when they are above the recall threshold,
inside the scope (checked again in Python), seen by the read's view (current, true at a
time, or every version; never quarantined: ``temporal.visible``) and, for an agent's own
context, of a source the store's injection policy lists; the kept ones are re-ranked with
a lexical signal (``ranking``).
"""

from __future__ import annotations

from dataclasses import dataclass

from kaos_core.memory.contract import Fact

from kaos_memory.scope import Scope
from kaos_memory.storage.base import View
from kaos_memory.storage.mem0 import provenance, temporal
from kaos_memory.storage.mem0.terms import Hit, in_scope, to_fact
from kaos_memory.storage.ranking import fuse


@dataclass(frozen=True)
class Recalled:
    """What a recall asks for: ``top_k`` facts above ``threshold``, of ``sources`` (None:
    every source), as ``view`` sees them."""

    top_k: int
    threshold: float
    sources: frozenset[str] | None
    view: View


def ranked(scope: Scope, query: str, hits: list[Hit], asked: Recalled) -> list[Fact]:
    pool = [
        (fact_id, score, payload)
        for fact_id, score, payload in hits
        if payload is not None
        and payload.get("data")
        and score >= asked.threshold
        and in_scope(scope, payload)
        and temporal.visible(payload, asked.view)
        and (asked.sources is None or provenance.source_of(payload) in asked.sources)
    ]
    order = fuse(query, [str(p["data"]) for _, _, p in pool], [s for _, s, _ in pool])
    return [to_fact(pool[i][0], pool[i][2], fused) for i, fused in order[: asked.top_k]]
