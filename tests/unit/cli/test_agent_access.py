"""``kaos agent grant|revoke``'s object names and arguments: the same grant is always the
same RoleBinding, users and groups of one name never share one, long Agent names fit, and
a malformed command line is a usage error. The commands against a real API server are in
tests/e2e/user_identity/test_user_rbac.py."""

from __future__ import annotations

import pytest
from kaos_cli.commands.agent_access import binding_name, parse_subject, role_name
from kaos_cli.tools import EXIT_ENVIRONMENT, CliError

MAX_NAME = 253


def test_binding_names_are_deterministic_per_agent_kind_and_subject() -> None:
    name = binding_name("billing", "User", "oidc:alice")
    assert name == binding_name("billing", "User", "oidc:alice")
    assert name.startswith("kaos-invoke-billing-user-")
    others = {
        binding_name("billing", "Group", "oidc:alice"),
        binding_name("billing", "User", "oidc:bob"),
        binding_name("billing2", "User", "oidc:alice"),
    }
    assert name not in others and len(others) == 3


def test_long_agent_names_fit_and_stay_apart() -> None:
    a, b = "a" * 253, "a" * 252 + "b"
    assert role_name(a) != role_name(b)
    assert max(len(binding_name(n, "Group", "g" * 300)) for n in (a, b)) <= MAX_NAME
    assert role_name("billing") == "kaos-invoke-billing"


def test_the_subject_and_agent_come_from_the_arguments() -> None:
    assert parse_subject(("oidc:alice", "billing"), None, "grant") == (
        "User",
        "oidc:alice",
        "billing",
    )
    assert parse_subject(("billing",), "oidc:finance", "grant") == (
        "Group",
        "oidc:finance",
        "billing",
    )


@pytest.mark.parametrize(
    ("args", "group"),
    [((), None), (("billing",), None), (("a", "b"), "g"), (("a", "b", "c"), None)],
)
def test_a_malformed_command_line_is_a_usage_error(
    args: tuple[str, ...], group: str | None
) -> None:
    with pytest.raises(CliError) as exc:
        parse_subject(args, group, "grant")
    assert exc.value.exit_code == EXIT_ENVIRONMENT
    assert exc.value.message == (
        "usage: kaos agent grant USER AGENT, or kaos agent grant --group GROUP AGENT"
    )


@pytest.mark.parametrize("name", ["", " ", " alice"])
def test_a_blank_or_padded_name_is_refused(name: str) -> None:
    with pytest.raises(CliError, match="non-empty without surrounding spaces"):
        parse_subject((name, "billing"), None, "grant")
