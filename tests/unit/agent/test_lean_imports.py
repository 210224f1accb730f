"""An agent loads only the libraries its configuration uses: the MCP client (with the
``mcp`` and ``fastmcp`` libraries) only with MCP servers, the JWT library (with its
``cryptography``) only when it verifies tokens. Both are a large share of an idle agent's
memory. Checked in a fresh interpreter, since this one has imported everything."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
from kaos_agent.app import create_app
from kaos_agent.settings import AgentSettings
from kaos_agent.toolsets import mcp_http_client, mcp_toolset, mcp_toolsets
from kaos_agent.metrics import AgentMetrics
from prometheus_client import CollectorRegistry

settings = AgentSettings.from_env(json.loads(sys.argv[1]))
create_app(settings)
before = {m: m in sys.modules for m in ("pydantic_ai.mcp", "mcp", "jwt", "cryptography")}
made = mcp_toolsets(
    settings.tools, AgentMetrics.create(CollectorRegistry()), mcp_http_client(settings.tools)
)
after = "pydantic_ai.mcp" in sys.modules
made = [mcp_toolset(t.wrapped) is not None for t in made]
print(json.dumps({"before": before, "after": after, "made": made}))
"""

BASE = {
    "AGENT_NAME": "lean",
    "MODEL_API_URL": "http://127.0.0.1:9/v1",
    "MODEL_NAME": "m",
}


def probe(env: dict[str, str]) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(env)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_an_agent_without_mcp_servers_or_auth_imports_neither() -> None:
    result = probe(BASE)

    assert result["before"] == dict.fromkeys(
        ("pydantic_ai.mcp", "mcp", "jwt", "cryptography"), False
    )
    assert (result["after"], result["made"]) == (False, [])


def test_an_agent_with_an_mcp_server_gets_its_toolset() -> None:
    result = probe({**BASE, "MCP_SERVERS": "calc:http://127.0.0.1:9"})

    assert result["after"] is True
    assert result["made"] == [True]
