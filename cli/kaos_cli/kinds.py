"""``kaos modelapi|mcp|memorystore``: the shared commands plus each kind's ``deploy`` flags.

The flags cover the common cases; anything else is a manifest (``deploy -f FILE``), so
the CLI never grows a flag per CRD field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from kaos_cli.common import CONTEXT_SETTINGS, Cx, common_options
from kaos_cli.resources import (
    MCP,
    MEMORYSTORE,
    MODELAPI,
    add_resource_commands,
    deploy,
    deploy_options,
)
from kaos_cli.tools import EXIT_ENVIRONMENT, CliError


def secret_ref(value: str, default_key: str) -> dict[str, str]:
    name, _, key = value.partition(":")
    if not name:
        raise CliError(f"{value}: expected SECRET[:KEY]", EXIT_ENVIRONMENT)
    return {"name": name, "key": key or default_key}


@click.group(
    "modelapi",
    context_settings=CONTEXT_SETTINGS,
    help="ModelAPIs: the model endpoints agents and memory stores use (LiteLLM proxy or "
    "hosted Ollama).",
)
def modelapi_group() -> None:
    pass


add_resource_commands(modelapi_group, MODELAPI)


@modelapi_group.command(
    "deploy",
    help="Create or update a ModelAPI. Proxy: --model names the models to route, "
    "--api-base the upstream; Hosted: --model is the Ollama model.",
)
@click.argument("name", required=False)
@click.option("--mode", type=click.Choice(["Proxy", "Hosted"]), default="Proxy", show_default=True)
@click.option("--model", "models", multiple=True, help="model (repeatable for Proxy)")
@click.option("--api-base", default=None, help="upstream base URL (Proxy)")
@click.option("--api-key-secret", default=None, metavar="SECRET[:KEY]", help="API key (Proxy)")
@deploy_options
@common_options()
def modelapi_deploy(
    cx: Cx,
    name: str | None,
    mode: str,
    models: tuple[str, ...],
    api_base: str | None,
    api_key_secret: str | None,
    file_: str | None,
    wait: bool,
    timeout: float,
    dry_run: bool,
) -> int:
    def build() -> dict[str, Any]:
        if mode == "Hosted":
            if len(models) != 1:
                raise CliError("--mode Hosted needs exactly one --model", EXIT_ENVIRONMENT)
            return {"mode": "Hosted", "serverConfig": {"model": models[0]}}
        proxy: dict[str, Any] = {"models": list(models) or ["*"]}
        if api_base:
            proxy["apiBase"] = api_base
        if api_key_secret:
            proxy["apiKeySecretRef"] = secret_ref(api_key_secret, "api-key")
        return {"mode": "Proxy", "proxyConfig": proxy}

    return deploy(MODELAPI, cx, name, file_, build, wait=wait, timeout=timeout, dry_run=dry_run)


@click.group(
    "mcp",
    context_settings=CONTEXT_SETTINGS,
    help="MCPServers: tool servers agents call (python-string runtime).",
)
def mcp_group() -> None:
    pass


add_resource_commands(mcp_group, MCP)


@mcp_group.command(
    "deploy",
    help="Create or update an MCPServer whose tools are the functions of --source FILE "
    "(python-string runtime; each function's docstring is its tool's description).",
)
@click.argument("name", required=False)
@click.option("--source", type=click.Path(dir_okay=False), help="Python file with the tools")
@click.option("--params", default=None, help="the tools' Python source, inline")
@deploy_options
@common_options()
def mcp_deploy(
    cx: Cx,
    name: str | None,
    source: str | None,
    params: str | None,
    file_: str | None,
    wait: bool,
    timeout: float,
    dry_run: bool,
) -> int:
    def build() -> dict[str, Any]:
        text = params
        if source:
            try:
                text = Path(source).read_text()
            except OSError as exc:
                raise CliError(f"cannot read {source}: {exc.strerror}", EXIT_ENVIRONMENT) from exc
        if not text:
            raise CliError("kaos mcp deploy needs --source FILE or --params", EXIT_ENVIRONMENT)
        return {"runtime": "python-string", "params": text}

    return deploy(MCP, cx, name, file_, build, wait=wait, timeout=timeout, dry_run=dry_run)


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
