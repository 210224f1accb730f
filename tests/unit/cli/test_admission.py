"""A manifest the API server refuses: every reason it gave, in the user's field names,
never Go's internals. The refusals are kubectl's words as the test cluster's API server
gave them (``tests/e2e/cli/test_cli_messages.py`` checks the same against it live)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kaos_cli.kubectl.admission import problems
from kaos_cli.main import main

from tests.unit.cli.fakes import FakeKubectl


def agent(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kaos.tools/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": name},
        "spec": spec,
    }


SKIPPED = (
    "* <nil>: Invalid value: null: some validation rules were not checked because the object "
    "was invalid; correct the existing errors to complete validation\n"
)
BOUNDS = agent(
    "support-bot5",
    {
        "modelAPI": "llm",
        "config": {"taskConfig": {"maxToolCalls": 5000}, "memory": {"type": "store"}},
    },
)
BOUNDS_REFUSED = (
    'The Agent "support-bot5" is invalid: \n'
    '* spec.config.memory.type: Unsupported value: "store": supported values: "local", "remote"\n'
    "* spec.config.taskConfig.maxToolCalls: Invalid value: 5000: "
    "spec.config.taskConfig.maxToolCalls in body should be less than or equal to 1000\n" + SKIPPED
)
TYPES = agent(
    "support-bot6",
    {
        "modelAPI": "llm",
        "config": {"instructions": True, "taskConfig": {"maxToolCalls": "many"}},
    },
)
TYPES_BY_APPLY = (
    "Error from server: failed to create typed patch object (default/support-bot6; "
    "kaos.tools/v1alpha1, Kind=Agent): errors:\n"
    "  .spec.config.taskConfig.maxToolCalls: expected numeric (int or float), got string\n"
    "  .spec.config.instructions: expected string, got &value.valueUnstructured{Value:true}\n"
)
TYPES_BY_CREATE = (
    'The Agent "support-bot6" is invalid: \n'
    '* spec.config.taskConfig.maxToolCalls: Invalid value: "string": '
    'spec.config.taskConfig.maxToolCalls in body must be of type integer: "string"\n'
    '* spec.config.instructions: Invalid value: "boolean": spec.config.instructions in body '
    'must be of type string: "boolean"\n' + SKIPPED
)
UNKNOWN = agent(
    "support-bot8",
    {"modelAPI": "llm", "modelz": "x", "mcpServers": "notalist", "config": {"instructions": 5}},
)
UNKNOWN_BY_APPLY = (
    "Error from server: failed to create typed patch object (default/support-bot8; "
    "kaos.tools/v1alpha1, Kind=Agent): .spec.modelz: field not declared in schema\n"
)
UNKNOWN_BY_CREATE = (
    'Warning: unknown field "spec.modelz"\n'
    'The Agent "support-bot8" is invalid: \n'
    '* spec.config.instructions: Invalid value: "integer": spec.config.instructions in body must '
    'be of type string: "integer"\n'
    '* spec.mcpServers: Invalid value: "string": spec.mcpServers in body must be of type array: '
    '"string"\n' + SKIPPED
)
RULES = agent(
    "support-bot11",
    {
        "modelAPI": "llm",
        "mcpServers": ["a", "a"],
        "replicas": -1,
        "config": {"memory": {"type": "local", "memoryStore": "x"}},
    },
)
RULES_BY_APPLY = (
    "Error from server: failed to create typed patch object (default/support-bot11; "
    'kaos.tools/v1alpha1, Kind=Agent): .spec.mcpServers: duplicate entries for key [="a"]\n'
)
RULES_BY_CREATE = (
    'The Agent "support-bot11" is invalid: \n'
    "* spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal "
    "to 0\n"
    '* spec.mcpServers[1]: Duplicate value: "a"\n'
    "* spec.config.memory: Invalid value: memory type remote requires memoryStore; type local "
    "forbids it\n"
)
NOT_CHECKED = "(more rules are checked once these are fixed)"


@pytest.mark.parametrize(
    ("stderr", "document", "reasons"),
    [
        (
            BOUNDS_REFUSED,
            BOUNDS,
            [
                'spec.config.memory.type: unsupported value "store" (supported: "local", "remote")',
                "spec.config.taskConfig.maxToolCalls: should be less than or equal to 1000 "
                "(got 5000)",
                NOT_CHECKED,
            ],
        ),
        (
            TYPES_BY_APPLY,
            TYPES,
            [
                "spec.config.instructions: expected a string, got a boolean",
                "spec.config.taskConfig.maxToolCalls: expected a number, got a string",
            ],
        ),
        (
            TYPES_BY_CREATE,
            TYPES,
            [
                "spec.config.instructions: expected a string, got a boolean",
                "spec.config.taskConfig.maxToolCalls: expected an integer, got a string",
                NOT_CHECKED,
            ],
        ),
        (UNKNOWN_BY_APPLY, UNKNOWN, ["spec.modelz: unknown field"]),
        (
            UNKNOWN_BY_CREATE,
            UNKNOWN,
            [
                "spec.config.instructions: expected a string, got a number",
                "spec.mcpServers: expected a list, got a string",
                "spec.modelz: unknown field",
                NOT_CHECKED,
            ],
        ),
        (RULES_BY_APPLY, RULES, ['spec.mcpServers: "a" is listed twice']),
        (
            RULES_BY_CREATE,
            RULES,
            [
                "spec.config.memory: memory type remote requires memoryStore; type local "
                "forbids it",
                'spec.mcpServers[1]: duplicate value "a"',
                "spec.replicas: should be greater than or equal to 0 (got -1)",
            ],
        ),
        (
            # Several causes on one line, as kubectl prints a refusal among several objects.
            'Error from server (Invalid): Agent.kaos.tools "support-bot5" is invalid: '
            "[spec.config.taskConfig.maxToolCalls: Invalid value: 5000: "
            "spec.config.taskConfig.maxToolCalls in body should be less than or equal to 1000, "
            'spec.config.memory.type: Unsupported value: "store": supported values: "local", '
            '"remote", <nil>: Invalid value: null: some validation rules were not checked '
            "because the object was invalid; correct the existing errors to complete validation]",
            BOUNDS,
            [
                'spec.config.memory.type: unsupported value "store" (supported: "local", "remote")',
                "spec.config.taskConfig.maxToolCalls: should be less than or equal to 1000 "
                "(got 5000)",
                NOT_CHECKED,
            ],
        ),
        ("Required value without a refusal around it", BOUNDS, []),
        (
            'Error from server (Forbidden): agents.kaos.tools is forbidden: User "bob" cannot '
            'patch resource "agents"',
            BOUNDS,
            [],
        ),
    ],
)
def test_each_reason_in_the_users_field_names(
    stderr: str, document: dict[str, Any], reasons: list[str]
) -> None:
    assert problems(stderr, document) == reasons
    assert not any("value.valueUnstructured" in r or "in body" in r for r in reasons)


def test_a_refused_object_among_others_lists_its_reasons_and_the_rest_are_applied(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    manifest = tmp_path / "bots.yaml"
    manifest.write_text(yaml.safe_dump_all([UNKNOWN, agent("fine", {"modelAPI": "llm"})]))
    kubectl.on("apply", "--server-side", stdin="support-bot8", stderr=UNKNOWN_BY_APPLY, rc=1)
    kubectl.on("create", "--dry-run=server", stdin="support-bot8", stderr=UNKNOWN_BY_CREATE, rc=1)
    kubectl.on("apply", "--server-side", stdin="name: fine", stdout="agent.kaos.tools/fine\n")

    assert main(["agent", "deploy", "-f", str(manifest), "-n", "team"]) == 1
    out, err = capsys.readouterr()
    assert out == "agent.kaos.tools/fine applied\n"
    assert err.splitlines() == [
        "error: 1 of 2 objects were refused (the others were applied):",
        "  Agent support-bot8 is invalid (see: kubectl explain agent):",
        "    spec.config.instructions: expected a string, got a number",
        "    spec.mcpServers: expected a list, got a string",
        "    spec.modelz: unknown field",
        "    (more rules are checked once these are fixed)",
    ]


def test_one_refused_object_is_its_reasons(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    manifest = tmp_path / "bot.yaml"
    manifest.write_text(yaml.safe_dump(TYPES))
    kubectl.on("apply", "--server-side", stderr=TYPES_BY_APPLY, rc=1)
    kubectl.on("create", "--dry-run=server", "--validate=warn", stderr=TYPES_BY_CREATE, rc=1)
    assert main(["agent", "deploy", "-f", str(manifest), "-n", "team", "--wait"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        "error: Agent support-bot6 is invalid (see: kubectl explain agent):",
        "  spec.config.instructions: expected a string, got a boolean",
        "  spec.config.taskConfig.maxToolCalls: expected an integer, got a string",
        "  (more rules are checked once these are fixed)",
    ]
    # Nothing was created: the dry run only validated.
    assert [c[:2] for c in kubectl.calls()] == [
        ["apply", "--server-side"],
        ["create", "--dry-run=server"],
    ]
