"""Bad values fail ``helm template`` (and so ``helm install``) with a clear message: the
schema's for wrong types, ranges and unknown keys; the chart's ``fail`` for values that
contradict each other."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml

from tests.fixtures.helm import CHART_DIR, Helm

SCHEMA_ERROR = "values don't meet the specifications of the schema(s)"


def failure(helm: Helm, *sets: str) -> str:
    proc = helm.template_text(*sets, check=False)
    assert proc.returncode != 0, f"helm template {sets} should fail but rendered"
    return proc.stderr


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("operator.replicas=-1", "at '/operator/replicas': minimum: got -1, want 0"),
        ("posture.mode=strict", "at '/posture': additional properties 'mode' not allowed"),
        ("posture=strict", "at '/posture': got string, want object"),
        (
            "posture.securityEnabled=maybe",
            "at '/posture/securityEnabled': got string, want boolean",
        ),
        ("posture.userIssuer=http://insecure.example.com", "at '/posture/userIssuer'"),
        ("posture.tokenVerification=trust-me", "at '/posture/tokenVerification': value must be"),
        ("posture.serviceAccountIssuer=http://plain.example", "at '/posture/serviceAccountIssuer'"),
        ("operatr.replicas=1", "at '': additional properties 'operatr' not allowed"),
        ("images.pullPolicy=Sometimes", "at '/images/pullPolicy': value must be one of"),
        ("operator.logLevel=LOUD", "at '/operator/logLevel'"),
        ("operator.port=80", "at '/operator/port': minimum"),
        ("operator.watchNamespace=Not_A_Namespace", "at '/operator/watchNamespace'"),
        ("devPgvector.enabled=yes-please", "at '/devPgvector/enabled'"),
        ("devPgvector.password=short", "at '/devPgvector/password'"),
        ("devPgvector.persistence.size=lots", "at '/devPgvector/persistence/size'"),
        (
            "operator.metrics.serviceMonitor.interval=often",
            "at '/operator/metrics/serviceMonitor/interval'",
        ),
    ],
)
def test_schema_rejects_bad_values_with_its_message(
    helm: Helm, assignment: str, message: str
) -> None:
    stderr = failure(helm, assignment)

    assert SCHEMA_ERROR in stderr
    assert message in stderr


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (
            ("operator.replicas=2", "operator.leaderElection.enabled=false"),
            "operator.replicas > 1 needs operator.leaderElection.enabled=true",
        ),
        (
            ("posture.userIssuer=https://issuer.example.com",),
            "posture.userIssuer needs posture.securityEnabled=true",
        ),
        (
            ("operator.podDisruptionBudget.minAvailable=1",),
            "set only one of minAvailable and maxUnavailable",
        ),
        (
            ("operator.podDisruptionBudget.maxUnavailable=null",),
            "operator.podDisruptionBudget.enabled needs minAvailable or maxUnavailable",
        ),
        (
            (
                "operator.metrics.service.enabled=false",
                "operator.metrics.serviceMonitor.enabled=true",
            ),
            "operator.metrics.serviceMonitor.enabled needs operator.metrics.service.enabled=true",
        ),
        (
            ("operator.serviceAccount.create=false",),
            "operator.serviceAccount.create=false needs operator.serviceAccount.name",
        ),
        (
            ("operator.watchNamespace=kube-system",),
            "operator.watchNamespace must not be kube-system",
        ),
        (
            ("devPgvector.connectionSecret.extraNamespaces={team-a}",),
            "devPgvector.connectionSecret.extraNamespaces needs devPgvector.enabled=true",
        ),
    ],
)
def test_contradictory_values_fail_with_one_line(
    helm: Helm, sets: tuple[str, ...], message: str
) -> None:
    stderr = failure(helm, *sets)

    assert message in stderr
    assert SCHEMA_ERROR not in stderr


def test_zero_replicas_is_allowed(helm: Helm) -> None:
    """0 parks the operator without uninstalling; only negative counts are refused."""
    assert helm.template("operator.replicas=0")


def _walk(schema: dict[str, Any], path: str = "") -> list[str]:
    """Paths of object schemas that list properties but allow unknown ones."""
    loose = []
    if "properties" in schema and schema.get("additionalProperties") is not False:
        loose.append(path or "/")
    for name, sub in schema.get("properties", {}).items():
        if isinstance(sub, dict):
            loose += _walk(sub, f"{path}/{name}")
    for name, sub in schema.get("definitions", {}).items():
        loose += _walk(sub, f"#/definitions/{name}")
    return loose


def test_schema_forbids_unknown_keys_at_every_level() -> None:
    schema = json.loads((CHART_DIR / "values.schema.json").read_text())

    assert _walk(schema) == []


def _leaf_paths(values: Any, prefix: str = "") -> list[str]:
    if isinstance(values, dict) and values:
        return [p for k, v in values.items() for p in _leaf_paths(v, f"{prefix}.{k}".lstrip("."))]
    return [prefix]


def _commented_keys(lines: list[str]) -> set[str]:
    """Dotted paths of the keys in values.yaml with a comment on the line above."""
    stack: list[tuple[int, str]] = []
    commented = set()
    for i, line in enumerate(lines):
        match = re.match(r"^( *)([A-Za-z][\w.-]*):", line)
        if not match:
            continue
        indent = len(match.group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, match.group(2)))
        if i > 0 and lines[i - 1].strip().startswith("#"):
            commented.add(".".join(key for _, key in stack))
    return commented


def test_every_value_is_documented_in_values_yaml() -> None:
    """Each value has a comment just above it, or (for structured defaults such as
    resources) one of its ancestors below the top-level section does."""
    text = (CHART_DIR / "values.yaml").read_text()
    commented = _commented_keys(text.splitlines())
    undocumented = []
    for path in _leaf_paths(yaml.safe_load(text)):
        parts = path.split(".")
        candidates = [".".join(parts[:n]) for n in range(len(parts), 1, -1)] or [path]
        if not any(c in commented for c in candidates):
            undocumented.append(path)
    assert undocumented == []
