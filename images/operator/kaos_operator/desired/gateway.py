"""A resource's HTTPRoute (Gateway API) when its spec has ``gatewayRoute``.

One rule: match the path prefix, strip it (the service sees the paths it serves, e.g.
``/v1/chat/completions`` or ``/mcp``), send to the resource's Service on its port, with
the route's timeouts. The route is owned by the resource like its Deployment, so it is
pruned when ``gatewayRoute`` goes away and deleted with the resource.
"""

from __future__ import annotations

from kaos_core.crds.common import CustomObject
from kaos_core.crds.gateway import GatewayRoute

from kaos_operator.desired.common import Obj, component_of, metadata
from kaos_operator.settings import GatewayRef

GATEWAY_GROUP = "gateway.networking.k8s.io"


def route_path(owner: CustomObject, route: GatewayRoute) -> str:
    """The path prefix: the route's own, else ``/<namespace>/<kind>/<name>``."""
    return route.path_prefix or f"/{owner.namespace}/{component_of(owner.kind)}/{owner.name}"


def http_route(owner: CustomObject, port: int, route: GatewayRoute, gateway: GatewayRef) -> Obj:
    parent: Obj = {
        "group": GATEWAY_GROUP,
        "kind": "Gateway",
        "name": gateway.name,
        "namespace": gateway.namespace or owner.namespace,
    }
    if gateway.section_name:
        parent["sectionName"] = gateway.section_name
    rule: Obj = {
        "matches": [{"path": {"type": "PathPrefix", "value": route_path(owner, route)}}],
        "filters": [
            {
                "type": "URLRewrite",
                "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}},
            }
        ],
        "backendRefs": [{"group": "", "kind": "Service", "name": owner.name, "port": port}],
    }
    if route.timeouts is not None:
        rule["timeouts"] = route.timeouts.to_wire()
    return {
        "apiVersion": f"{GATEWAY_GROUP}/v1",
        "kind": "HTTPRoute",
        "metadata": metadata(owner),
        "spec": {"parentRefs": [parent], "rules": [rule]},
    }


def route_objects(
    owner: CustomObject, port: int, route: GatewayRoute | None, gateway: GatewayRef | None
) -> list[Obj]:
    """The HTTPRoute when the resource asks for one and Gateway API is on; else none."""
    if route is None or gateway is None:
        return []
    return [http_route(owner, port, route, gateway)]
