"""``make run --secure``: the local stack in the secured posture, planned and played.

The plan is checked against the operator's own pod specs (the same security variables,
only pod paths and the in-cluster API server overlaid); then the whole conversation of
``hack/run_local.py --secure`` runs as a user would start it, and its transcript must show
forged and replayed identities refused, the real one served, end users' tokens from
a real OIDC provider (Ory Hydra) required and a forged principal refused, and every later step
(window, tool, delegation between verified agents, digest, facts, isolation, forget)
passing on verified identities.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kaos_core.auth import names
from kaos_operator.settings import OperatorSettings, Posture

from tests.support.localstack import OVERLAY, load_samples, plan_stack
from tests.support.procs import REPO_ROOT


def test_a_secured_plan_is_the_pods_security_env_with_local_files(tmp_path: Path) -> None:
    settings = OperatorSettings.from_env({})
    posture = Posture(
        security_enabled=True, token_verification="jwks", service_account_issuer="https://x"
    )
    plan = plan_stack(
        load_samples("local"),
        data_root=tmp_path / "data",
        dsn=None,
        images=settings.images,
        posture=posture,
        secure_dir=tmp_path / "secured",
    )
    store = plan["MemoryStore/memory-local"]
    coordinator, researcher = plan["Agent/coordinator"], plan["Agent/researcher"]
    (tools,) = [spec for key, spec in plan.items() if key.startswith("MCPServer/")]
    for spec in (store, coordinator, researcher, tools):
        # The pod's variables, security included; only OVERLAY keys differ, none to a pod path.
        pod_fields = {k for k, v in spec.cluster.items() if v.startswith("<pod field ")}
        assert set(spec.desired) == set(spec.cluster) - pod_fields, spec.key
        assert set(spec.overlay) <= set(OVERLAY), spec.key
        assert not any(
            v.startswith(("/var/run/secrets", "/etc/kaos")) for v in spec.overlay.values()
        )
    assert store.desired[names.MEMORY_AUTH_MODE] == "jwks"
    # kaos-mcp verifies its callers too, and the agents present their kaos.dev/mcp tokens.
    assert tools.desired[names.MCP_AUTH_MODE] == "jwks"
    assert coordinator.overlay[names.AGENT_MCP_TOKEN_FILE].endswith("/tokens/coordinator/mcp")
    assert researcher.desired[names.AGENT_AUTH_ISSUER] == "https://x"
    assert coordinator.overlay[names.AGENT_AUTH_API_SERVER] == ""

    def callers(spec_files: dict[str, str]) -> set[str]:
        (content,) = spec_files.values()
        return {c["serviceAccount"] for c in json.loads(content)["callers"]}

    # The callers ConfigMaps the operator would write: the store admits both agents, the
    # researcher the coordinator (its agentNetwork.access), the coordinator nobody.
    assert callers(store.files) == {"coordinator", "researcher"}
    assert callers(researcher.files) == {"coordinator"}
    assert callers(coordinator.files) == set()
    assert callers(tools.files) == {"researcher"}  # the agent that lists it


def test_make_run_secure_refuses_forged_identities_and_serves_real_ones() -> None:
    run = subprocess.run(
        [sys.executable, "hack/run_local.py", "--secure"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    out = run.stdout
    assert run.returncode == 0, out[-4000:] + run.stderr[-2000:]
    # make test builds Ory Hydra (make services), so the users part runs here too.
    assert "(local memory, secured posture, verified users)" in out
    for line in (
        "X-Agent-Identity: coordinator, no token: HTTP 401 missing_token",
        "the coordinator's claims signed with another key: HTTP 401 invalid_token",
        "the researcher's own token, claiming to be the coordinator: HTTP 403 identity_mismatch",
        "agent-audience token replayed at the memory service: HTTP 401 invalid_token",
        "the coordinator's own memory token: HTTP 200",
        "no token: HTTP 401 missing_token",
        "no user token: HTTP 401 missing_user_token",
        "alice's token with X-Principal: bob: HTTP 400 principal_header_refused",
        "alice's token edited to say bob (signature kept): HTTP 401 invalid_token",
        "✔ the coordinator delegated over A2A",
        "✔ 'Lisbon' is nowhere in the store's files",
    ):
        assert line in out, line
    assert "✘" not in out
    # No token ever reaches the transcript (the token files' contents are credentials).
    tokens = [w for w in out.split() if w.count(".") == 2 and len(w) > 200]
    assert tokens == []
