"""What the CLI decides without a cluster: the manifests ``deploy`` builds from flags,
the samples it ships, the health it reads from a Lease, the tools it reads from a card,
the tables ``kaos memory`` prints."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kaos_cli.clients.agent import tools_from_card, tools_from_spec
from kaos_cli.commands.common import Cx
from kaos_cli.commands.memory import _print_read
from kaos_cli.commands.samples import description, samples_dir
from kaos_cli.commands.status import lease_health
from kaos_cli.kubectl.sync import Kube
from kaos_cli.main import main
from kaos_cli.objects import explain, since
from kaos_core.crds import Agent, MCPServer, MemoryStore, ModelAPI
from kaos_core.memory.contract import Fact, ListResponse, LongTerm, Provenance, RecallResponse
from pydantic import BaseModel

from tests.support.procs import REPO_ROOT

MODELS: dict[str, type[BaseModel]] = {
    "Agent": Agent,
    "ModelAPI": ModelAPI,
    "MCPServer": MCPServer,
    "MemoryStore": MemoryStore,
}


def dry_run(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main([*argv, "--dry-run", "-o", "json"]) == 0, capsys.readouterr().err
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    # What the flags build is a valid object of its kind: the CRD models are the schema.
    MODELS[document["kind"]].model_validate(document)
    return document


def test_agent_deploy_flags_build_a_valid_agent(capsys: pytest.CaptureFixture[str]) -> None:
    doc = dry_run(
        capsys,
        "agent",
        "deploy",
        "helper",
        "--modelapi",
        "llm",
        "--model",
        "openai/m",
        "--mcp",
        "tools",
        "--access",
        "peer",
        "--memorystore",
        "mem",
        "--memory-tools",
        "--instructions",
        "Be brief.",
    )
    assert doc["metadata"] == {"name": "helper"}
    assert doc["spec"] == {
        "modelAPI": "llm",
        "model": "openai/m",
        "mcpServers": ["tools"],
        "agentNetwork": {"expose": True, "access": ["peer"]},
        "config": {
            "instructions": "Be brief.",
            "memory": {"type": "remote", "memoryStore": "mem", "tools": "all"},
        },
    }


def test_other_kinds_deploy_flags(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    api = dry_run(capsys, "modelapi", "deploy", "llm", "--model", "openai/a", "--model", "b")
    assert api["spec"] == {"mode": "Proxy", "proxyConfig": {"models": ["openai/a", "b"]}}
    hosted = dry_run(capsys, "modelapi", "deploy", "llm", "--mode", "Hosted", "--model", "x:1b")
    assert hosted["spec"] == {"mode": "Hosted", "serverConfig": {"model": "x:1b"}}
    source = tmp_path / "tools.py"
    source.write_text("def shout(text: str) -> str:\n    return text.upper()\n")
    mcp = dry_run(capsys, "mcp", "deploy", "tools", "--source", str(source))
    assert mcp["spec"] == {"runtime": "python-string", "params": source.read_text()}
    store = dry_run(
        capsys,
        "memorystore",
        "deploy",
        "mem",
        "--storage",
        "external",
        "--modelapi",
        "llm",
        "--connection-secret",
        "pg",
        "--dimensions",
        "64",
    )
    assert store["spec"]["storage"] == {
        "type": "external",
        "connectionSecret": {"name": "pg", "key": "dsn"},
    }
    assert store["spec"]["models"]["embedding"] == {"modelAPI": "llm", "dimensions": 64}


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["agent", "deploy", "helper"], "needs --modelapi NAME"),
        (["agent", "deploy"], "needs NAME or -f FILE"),
        (
            ["memorystore", "deploy", "m", "--storage", "external", "--modelapi", "l"],
            "needs --connection-secret",
        ),
        (["mcp", "deploy", "t"], "needs --source FILE or --params"),
        (["agent", "deploy", "-f", "/nonexistent.yaml"], "cannot read /nonexistent.yaml"),
    ],
)
def test_deploy_usage_errors_are_one_line(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and says in err


def test_deploy_file_dry_run_prints_its_documents(capsys: pytest.CaptureFixture[str]) -> None:
    path = REPO_ROOT / "samples" / "agents.yaml"
    assert main(["agent", "deploy", "-f", str(path), "--dry-run"]) == 0
    printed = list(yaml.safe_load_all(capsys.readouterr().out))
    assert printed == [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_samples_list_is_the_repository_samples(capsys: pytest.CaptureFixture[str]) -> None:
    assert samples_dir({}) == REPO_ROOT / "samples"
    assert main(["samples", "list", "-o", "json"]) == 0
    listed = {s["name"]: s for s in json.loads(capsys.readouterr().out)}
    assert set(listed) == {p.stem for p in (REPO_ROOT / "samples").glob("*.yaml")}
    assert listed["agents"]["objects"] == ["Agent/researcher", "Agent/coordinator"]
    assert listed["modelapi"]["description"].startswith("A ModelAPI in Proxy mode")
    assert main(["samples", "list"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["NAME", "OBJECTS", "DESCRIPTION"]
    assert any(line.startswith("agents ") for line in table)


def test_samples_are_packaged_as_data_files() -> None:
    """The kaos-tools wheel carries samples/ under share/kaos/samples (no copy, no symlink
    in the tree)."""
    pyproject = (REPO_ROOT / "cli" / "pyproject.toml").read_text()
    assert '"share/kaos/samples" = ["../samples/*.yaml"]' in pyproject
    assert not any(p.is_symlink() for p in (REPO_ROOT / "samples").iterdir())
    assert description(REPO_ROOT / "samples" / "mcpserver.yaml").startswith("An MCPServer")


def test_unknown_sample_names_the_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["samples", "deploy", "nope"]) == 1
    err = capsys.readouterr().err
    assert "no sample nope: choose one of agents, devmodel" in err


NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("spec", "leader", "fresh"),
    [
        (
            {
                "holderIdentity": "op-1",
                "renewTime": "2026-01-01T11:59:58.000000Z",
                "leaseDurationSeconds": 15,
            },
            "op-1",
            True,
        ),
        (
            {
                "holderIdentity": "op-1",
                "renewTime": "2026-01-01T11:59:00.000000Z",
                "leaseDurationSeconds": 15,
            },
            "op-1",
            False,
        ),
        ({"holderIdentity": "", "leaseDurationSeconds": 15}, None, False),
    ],
)
def test_lease_health(spec: dict[str, Any], leader: str | None, fresh: bool) -> None:
    health = lease_health({"spec": spec}, NOW)
    assert (health["leader"], health["fresh"]) == (leader, fresh)
    assert lease_health(None, NOW)["fresh"] is False


def test_explain_names_the_failing_condition() -> None:
    obj = {
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "WaitingForDependencies",
                    "message": "MemoryStore mem not found",
                },
            ]
        }
    }
    assert explain(obj) == "Ready: WaitingForDependencies: MemoryStore mem not found"
    obj["status"]["conditions"].append(
        {
            "type": "DependenciesReady",
            "status": "False",
            "reason": "MemoryStoreNotFound",
            "message": "MemoryStore mem does not exist",
        }
    )
    assert explain(obj) == "DependenciesReady: MemoryStoreNotFound: MemoryStore mem does not exist"
    assert explain({"status": {"message": "why"}}) == "why"
    assert since("2026-01-01T11:58:00Z", NOW) == "2m"
    assert since(None, NOW) == "-"


def test_tools_from_card_and_from_spec() -> None:
    card = {
        "skills": [
            {"id": "chat", "name": "a", "tags": ["chat"]},
            {
                "id": "tool:shout",
                "name": "shout",
                "description": "Upper.",
                "tags": ["tool", "mcp:text"],
            },
            {"id": "delegate:b", "name": "delegate_to_b", "tags": ["delegation", "peer:b"]},
        ]
    }
    assert tools_from_card(card) == [
        {"name": "shout", "source": "mcp:text", "description": "Upper."},
        {"name": "delegate_to_b", "source": "peer:b", "description": ""},
    ]
    spec = {
        "mcpServers": ["text"],
        "agentNetwork": {"access": ["re-search"]},
        "config": {"memory": {"tools": "read"}},
    }
    rows = tools_from_spec({"spec": spec})
    assert [r["source"] for r in rows] == ["mcp:text", "peer:re-search", "memory"]
    assert rows[2]["name"] == "search_memory"
    # An object stored before tools became a mode: true offered both tools.
    legacy = tools_from_spec({"spec": {"config": {"memory": {"tools": True}}}})
    assert [r["name"] for r in legacy] == ["search_memory", "save_memory"]
    assert rows[1]["name"] == "delegate_to_re_search"


def test_memory_tables_show_each_facts_source(capsys: pytest.CaptureFixture[str]) -> None:
    said = Provenance(
        source="user",
        turns=[3],
        observed_at="2026-03-01T10:00:00Z",
        recorded_at="2026-03-01T10:00:05Z",
        model="dev/extractor",
    )
    facts = LongTerm(
        facts=[
            Fact(id="f1", text="Lisbon", user_id="alice", agent_id="kaos://agent/t/a",
                 session_id="s1", created_at="2026-03-01T10:00:05Z", score=0.5, provenance=said),
            Fact(id="f2", text="Likes tea", created_at="2025-01-01T00:00:00Z"),
        ]
    )  # fmt: skip

    def printed(response: RecallResponse, fmt: str, *, scored: bool) -> str:
        args = argparse.Namespace(
            cx=Cx(kube=Kube(), fmt=fmt), include=None, session=None, level="store"
        )
        _print_read(response, args, scored=scored)
        return capsys.readouterr().out

    # The source after the text; "-" for a fact stored before provenance was recorded.
    assert printed(ListResponse(long_term=facts), "table", scored=False).splitlines() == [
        "long-term facts (2):",
        "ID  TEXT       SOURCE  USER   AGENT             SESSION  CREATED",
        "f1  Lisbon     user    alice  kaos://agent/t/a  s1       2026-03-01T10:00:05Z",
        "f2  Likes tea  -       -      -                 -        2025-01-01T00:00:00Z",
    ]
    assert printed(RecallResponse(long_term=facts), "table", scored=True).splitlines()[1:3] == [
        "ID  TEXT       SOURCE  SCORE  USER   AGENT             SESSION  CREATED",
        "f1  Lisbon     user    0.500  alice  kaos://agent/t/a  s1       2026-03-01T10:00:05Z",
    ]
    # -o json: the contract response, with the whole provenance.
    dumped = json.loads(printed(ListResponse(long_term=facts), "json", scored=False))
    assert [f["provenance"] for f in dumped["long_term"]["facts"]] == [
        said.model_dump(mode="json"),
        None,
    ]
