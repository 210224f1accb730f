"""Generate the CRD manifests from the pydantic models.

    python -m kaos_core.crds.generate --out charts/kaos/crds      # write
    python -m kaos_core.crds.generate --check charts/kaos/crds    # exit 1 on drift

``hack/gen-crds`` runs the first form; a unit test runs the comparison in memory, so a
model change without regenerated YAML fails the build with the command that fixes it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from kaos_core.crds.agent import Agent
from kaos_core.crds.common import GROUP, VERSION, CustomObject, KindInfo
from kaos_core.crds.mcpserver import MCPServer
from kaos_core.crds.memorystore import MemoryStore
from kaos_core.crds.modelapi import ModelAPI
from kaos_core.crds.schema import structural_schema

KINDS: tuple[type[CustomObject], ...] = (Agent, ModelAPI, MCPServer, MemoryStore)
REGENERATE = "hack/gen-crds (python -m kaos_core.crds.generate --out charts/kaos/crds)"
HEADER = (
    "# Generated from the pydantic models in core/kaos_core/crds by kaos_core.crds.generate.\n"
    f"# Do not edit: change the models and run {REGENERATE}.\n"
)


def crd_document(info: KindInfo) -> dict[str, Any]:
    """The apiextensions.k8s.io/v1 CustomResourceDefinition of one kind."""
    root: dict[str, Any] = {
        "type": "object",
        "description": info.description,
        "properties": {
            "apiVersion": {"type": "string", "description": f"{GROUP}/{VERSION}"},
            "kind": {"type": "string", "description": info.kind},
            # The API server refuses anything but the type here (it supplies ObjectMeta,
            # which kubectl explain describes).
            "metadata": {"type": "object"},
            "spec": structural_schema(info.spec),
            "status": structural_schema(info.status),
        },
        "required": ["spec"],
    }
    columns = [
        {
            "name": c.name,
            "type": c.type,
            "jsonPath": c.json_path,
            **({"description": c.description} if c.description else {}),
            **({"priority": c.priority} if c.priority else {}),
        }
        for c in info.printer_columns
    ]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": info.crd_name,
            "labels": {"app.kubernetes.io/part-of": "kaos"},
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": info.kind,
                "listKind": f"{info.kind}List",
                "plural": info.plural,
                "singular": info.singular,
                "shortNames": list(info.short_names),
                "categories": ["kaos"],
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                    "schema": {"openAPIV3Schema": root},
                }
            ],
        },
    }


def file_name(info: KindInfo) -> str:
    return f"{GROUP}_{info.plural}.yaml"


def render_all() -> dict[str, str]:
    """File name -> YAML text of every CRD."""
    return {
        file_name(k.info): HEADER
        + yaml.safe_dump(crd_document(k.info), sort_keys=True, width=100, allow_unicode=True)
        for k in KINDS
    }


def drift(out: Path) -> list[str]:
    """Files under ``out`` that differ from what the models generate (empty: none)."""
    problems: list[str] = []
    rendered = render_all()
    for name, text in rendered.items():
        path = out / name
        if not path.exists():
            problems.append(f"{path}: missing")
        elif path.read_text() != text:
            problems.append(f"{path}: differs from the models")
    for path in sorted(out.glob(f"{GROUP}_*.yaml")):
        if path.name not in rendered:
            problems.append(f"{path}: no model generates it")
    return problems


def write_all(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    rendered = render_all()
    for stale in out.glob(f"{GROUP}_*.yaml"):
        if stale.name not in rendered:
            stale.unlink()
    written = []
    for name, text in rendered.items():
        path = out / name
        path.write_text(text)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--out", type=Path, help="write the CRD YAML files into this directory")
    group.add_argument("--check", type=Path, help="exit 1 when files here drift from the models")
    args = parser.parse_args(argv)
    if args.check is not None:
        problems = drift(args.check)
        for p in problems:
            print(p, file=sys.stderr)
        if problems:
            print(f"regenerate with {REGENERATE}", file=sys.stderr)
        return 1 if problems else 0
    for path in write_all(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
