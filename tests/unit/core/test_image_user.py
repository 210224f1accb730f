"""The images run as the uid the operator's pods and the chart's pods ask for.

A pod whose ``runAsUser`` differs from the image's user still starts, but then cannot write
the home directory or volumes the image prepared for its own user; nothing fails until a
library writes under ``$HOME`` in a real cluster. So the three places must agree.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from kaos_operator.desired.common import NONROOT_UID

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILES = [
    ROOT / "Dockerfile.base",
    ROOT / "images/memory/Dockerfile",
    ROOT / "images/agent/Dockerfile",
    ROOT / "images/operator/Dockerfile",
]


def test_every_image_runs_as_the_operators_uid() -> None:
    for path in DOCKERFILES:
        users = re.findall(r"^USER\s+(\S+)", path.read_text(), flags=re.MULTILINE)
        assert users, f"{path.name} sets no USER"
        assert users[-1] == f"{NONROOT_UID}:{NONROOT_UID}", f"{path}: USER {users[-1]}"


def test_the_chart_runs_its_pods_as_the_same_uid() -> None:
    values = yaml.safe_load((ROOT / "charts/kaos/values.yaml").read_text())
    found = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("runAsUser", "runAsGroup", "fsGroup"):
                    found.append((key, value))
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(values)
    assert found, "the chart sets no pod user"
    assert all(value == NONROOT_UID for _, value in found), found
