"""Applying desired objects: server-side apply, skipped when nothing changed, and pruning.

Every applied object carries the hash of its desired form in an annotation. When the
cached live object already carries the same hash the apply is skipped: the desired state
is unchanged since the last apply, so the request would change nothing. Objects an owner
no longer wants (a PodDisruptionBudget after scaling to one replica, the ConfigMap of a
ModelAPI switched to Hosted) are deleted, since apply only ever adds or updates.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from typing import Any

from kaos_operator.kube import KubeClient, Obj, ResourceType, type_of

HASH_ANNOTATION = "kaos.tools/applied-hash"

LiveLookup = Callable[[ResourceType, str, str], Obj | None]


def desired_hash(obj: Obj) -> str:
    canonical = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:20]


def stamped(obj: Obj) -> Obj:
    """``obj`` with the hash annotation of its own content."""
    digest = desired_hash(obj)
    meta = dict(obj["metadata"])
    meta["annotations"] = {**meta.get("annotations", {}), HASH_ANNOTATION: digest}
    return {**obj, "metadata": meta}


def controller_uid(obj: Obj) -> str | None:
    for ref in obj.get("metadata", {}).get("ownerReferences", []) or []:
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


def conflicts(desired: Iterable[Obj], owner_uid: str, live: LiveLookup) -> list[str]:
    """Desired objects whose name is taken by an object another resource controls."""
    out = []
    for obj in desired:
        meta = obj["metadata"]
        current = live(type_of(obj), meta["namespace"], meta["name"])
        if current is not None and controller_uid(current) not in (None, owner_uid):
            out.append(f"{obj['kind']} {meta['name']}")
    return out


async def apply_all(client: KubeClient, desired: Iterable[Obj], live: LiveLookup) -> int:
    """Apply each object whose desired form changed; the number of applies made."""
    applied = 0
    for obj in desired:
        out = stamped(obj)
        meta = out["metadata"]
        rt = type_of(out)
        current = live(rt, meta["namespace"], meta["name"])
        annotations: dict[str, Any] = (current or {}).get("metadata", {}).get("annotations") or {}
        if (
            current is not None
            and annotations.get(HASH_ANNOTATION) == meta["annotations"][HASH_ANNOTATION]
        ):
            continue
        await client.apply(out, rt=rt)
        applied += 1
    return applied


async def prune(
    client: KubeClient, owned: Iterable[tuple[ResourceType, Obj]], desired: Iterable[Obj]
) -> int:
    """Delete objects in ``owned`` that are not in ``desired``; the number deleted."""
    wanted = {(o["kind"], o["metadata"]["name"]) for o in desired}
    deleted = 0
    for rt, obj in owned:
        meta = obj["metadata"]
        if (rt.kind, meta["name"]) not in wanted:
            await client.delete(rt, meta["namespace"], meta["name"])
            deleted += 1
    return deleted
