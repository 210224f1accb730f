"""``kaos modelapi``: the shared commands plus ``deploy`` for a LiteLLM proxy or a hosted
Ollama. The flags cover the common cases; anything else is a manifest (``deploy -f FILE``),
so the CLI never grows a flag per CRD field."""

from __future__ import annotations

from typing import Any

import click

from kaos_cli.commands.common import CONTEXT_SETTINGS, Cx, common_options
from kaos_cli.commands.deploy import deploy, deploy_options, secret_ref
from kaos_cli.commands.resources import add_resource_commands
from kaos_cli.kinds import MODELAPI
from kaos_cli.tools import EXIT_ENVIRONMENT, CliError


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
