"""Kubernetes Events on a resource's transitions (phase changes), best effort.

An Event that cannot be written is logged and dropped: events explain, they never
decide, so they must not fail or delay a reconcile.
"""

from __future__ import annotations

import logging

from kaos_operator.kube import EVENTS, ApiError, KubeClient, Obj
from kaos_operator.status import rfc3339, utc_now

log = logging.getLogger(__name__)

COMPONENT = "kaos-operator"


class EventRecorder:
    def __init__(self, client: KubeClient, host: str = "") -> None:
        self._client = client
        self._host = host

    async def record(self, obj: Obj, type_: str, reason: str, message: str) -> None:
        meta = obj["metadata"]
        now = rfc3339(utc_now())
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": obj.get("apiVersion"),
                "kind": obj.get("kind"),
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "type": type_,
            "reason": reason,
            "message": message[:1024],
            "source": {"component": COMPONENT, "host": self._host},
            "reportingComponent": COMPONENT,
            "reportingInstance": self._host or COMPONENT,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            await self._client.create(EVENTS, meta["namespace"], event)
        except ApiError as exc:
            log.warning("event not recorded", extra={"reason": reason, "error": str(exc)})
