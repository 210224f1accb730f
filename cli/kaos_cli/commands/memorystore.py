"""``kaos memorystore``: the shared commands plus ``deploy`` of a local or external
MemoryStore."""

from __future__ import annotations

from typing import Any

import click

from kaos_cli.commands.common import CONTEXT_SETTINGS, Cx, common_options
from kaos_cli.commands.deploy import deploy, deploy_options, secret_ref
from kaos_cli.commands.resources import add_resource_commands
from kaos_cli.kinds import MEMORYSTORE
from kaos_cli.tools import EXIT_ENVIRONMENT, CliError


@click.group(
    "memorystore",
    context_settings=CONTEXT_SETTINGS,
    help="MemoryStores: the tiered memory service agents remember through.",
)
def memorystore_group() -> None:
    pass


add_resource_commands(memorystore_group, MEMORYSTORE)


@memorystore_group.command(
    "deploy",
    help="Create or update a MemoryStore: local (SQLite + Chroma on a volume) or external "
    "(PostgreSQL with pgvector through --connection-secret).",
)
@click.argument("name", required=False)
@click.option(
    "--storage", type=click.Choice(["local", "external"]), default="local", show_default=True
)
@click.option("--modelapi", default=None, help="ModelAPI for summarization and embedding")
@click.option("--model", default=None, help="model for both roles (default: the ModelAPI's)")
@click.option("--dimensions", type=int, default=None, help="embedding vector size")
@click.option("--connection-secret", default=None, metavar="SECRET[:KEY]", help="external DSN")
@click.option("--size", default=None, help="volume size (local), e.g. 1Gi")
@deploy_options
@common_options()
def memorystore_deploy(
    cx: Cx,
    name: str | None,
    storage: str,
    modelapi: str | None,
    model: str | None,
    dimensions: int | None,
    connection_secret: str | None,
    size: str | None,
    file_: str | None,
    wait: bool,
    timeout: float,
    dry_run: bool,
) -> int:
    def build() -> dict[str, Any]:
        if not modelapi:
            raise CliError("kaos memorystore deploy needs --modelapi NAME", EXIT_ENVIRONMENT)
        role: dict[str, Any] = {"modelAPI": modelapi, **({"model": model} if model else {})}
        embedding = {**role, **({"dimensions": dimensions} if dimensions else {})}
        store: dict[str, Any] = {"type": storage}
        if storage == "external":
            if not connection_secret:
                raise CliError("--storage external needs --connection-secret", EXIT_ENVIRONMENT)
            store["connectionSecret"] = secret_ref(connection_secret, "dsn")
        if size:
            store["size"] = size
        return {"storage": store, "models": {"summarization": role, "embedding": embedding}}

    return deploy(MEMORYSTORE, cx, name, file_, build, wait=wait, timeout=timeout, dry_run=dry_run)
