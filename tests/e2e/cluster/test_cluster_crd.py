"""CustomResourceDefinitions on the test cluster validate as on a real one, CEL rules
(``x-kubernetes-validations``) included."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

pytestmark = pytest.mark.cluster

RULE_MESSAGE = "minReplicas must not exceed maxReplicas"


def widget_crd(group: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {
                                        "minReplicas": {"type": "integer"},
                                        "maxReplicas": {"type": "integer"},
                                    },
                                    "x-kubernetes-validations": [
                                        {
                                            "rule": "self.minReplicas <= self.maxReplicas",
                                            "message": RULE_MESSAGE,
                                        }
                                    ],
                                }
                            },
                        }
                    },
                }
            ],
        },
    }


def widget(group: str, name: str, low: int, high: int) -> dict[str, Any]:
    return {
        "apiVersion": f"{group}/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"minReplicas": low, "maxReplicas": high},
    }


async def wait_established(ext: client.ApiextensionsV1Api, name: str) -> None:
    w = watch.Watch()
    async with w.stream(
        ext.list_custom_resource_definition,
        field_selector=f"metadata.name={name}",
        timeout_seconds=60,
    ) as events:
        async for event in events:
            conditions = event["object"].status.conditions or []
            if any(c.type == "Established" and c.status == "True" for c in conditions):
                return
    raise AssertionError(f"CRD {name} not Established within 60s")


async def create_when_served(
    objects: client.CustomObjectsApi, group: str, namespace: str, body: dict[str, Any]
) -> Any:
    """Create ``body``; an Established CRD can take a moment to be routed (404 until then)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return await objects.create_namespaced_custom_object(
                group, "v1", namespace, "widgets", body
            )
        except ApiException as exc:
            if exc.status != 404 or time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.2)  # polling interval of a wait with a deadline


async def test_cel_rule_rejects_an_invalid_object_with_its_message(
    k8s_api: Any, k8s_namespace: str
) -> None:
    group = f"t{uuid.uuid4().hex[:8]}.kaos.test"
    ext = client.ApiextensionsV1Api(k8s_api)
    objects = client.CustomObjectsApi(k8s_api)
    body: Any = widget_crd(group)  # the client takes plain dicts as well as models
    crd = await ext.create_custom_resource_definition(body)
    try:
        await wait_established(ext, crd.metadata.name)
        created = await create_when_served(
            objects, group, k8s_namespace, widget(group, "fine", 1, 3)
        )
        assert created["spec"] == {"minReplicas": 1, "maxReplicas": 3}

        with pytest.raises(ApiException) as rejected:
            await objects.create_namespaced_custom_object(
                group, "v1", k8s_namespace, "widgets", widget(group, "inverted", 5, 2)
            )

        assert rejected.value.status == 422
        assert rejected.value.body is not None
        status = json.loads(rejected.value.body)
        assert status["reason"] == "Invalid"
        assert RULE_MESSAGE in status["message"]
        causes = status["details"]["causes"]
        assert any(RULE_MESSAGE in c.get("message", "") for c in causes), causes
    finally:
        await ext.delete_custom_resource_definition(crd.metadata.name)
