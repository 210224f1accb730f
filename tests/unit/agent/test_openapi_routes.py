"""Every route the agent's application serves is in its OpenAPI document
(``docs/openapi/agent.json``), with the same method and path, and the document names no
route the application does not serve: the document is what schemathesis fuzzes and what
clients read, so a route left out of it is untested and undocumented."""

from __future__ import annotations

from kaos_agent.app import create_app
from kaos_agent.openapi import agent_document
from kaos_agent.settings import AgentSettings

ENV = {"AGENT_NAME": "routes", "MODEL_API_URL": "http://127.0.0.1:9/v1", "MODEL_NAME": "m"}
# Served for aiohttp's own reasons, not an API: HEAD beside every GET.
IMPLICIT = {"HEAD"}


def test_every_served_route_is_documented_and_nothing_else() -> None:
    app = create_app(AgentSettings.from_env(ENV))
    served = {
        (route.method.lower(), route.resource.canonical)
        for route in app.router.routes()
        if route.resource is not None and route.method not in IMPLICIT
    }
    documented = {
        (method, path) for path, methods in agent_document()["paths"].items() for method in methods
    }
    assert served == documented
