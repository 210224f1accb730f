"""``kaos ui``: serve the console on loopback and open it in the browser.

The console acts with the user's kubeconfig identity (it can read every agent's memory
and erase it), so it binds 127.0.0.1 only; another address needs ``--allow-remote`` and
the refusal says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import sys
import threading
import webbrowser

import click
from aiohttp import web

from kaos_cli.commands.common import CONTEXT_SETTINGS, complete_contexts, complete_namespaces
from kaos_cli.kubectl.aio import Cluster
from kaos_cli.kubectl.sync import Kube
from kaos_cli.tools import EXIT_ENVIRONMENT, CliError
from kaos_cli.ui.server import create_app
from kaos_cli.ui.state import UiConfig

DEFAULT_PORT = 8765
REMOTE_REFUSAL = (
    "refusing to bind {address}: the console acts with your kubeconfig identity, so anyone "
    "who can reach {address} could read every agent's memory and erase it as you. It binds "
    "127.0.0.1 only; pass --allow-remote to bind {address} anyway"
)


def is_loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def check_address(address: str, allow_remote: bool) -> str:
    """The address to bind; ``CliError`` (exit 2) for a non-loopback one without the flag."""
    if address == "localhost":
        return "127.0.0.1"
    if not is_loopback(address) and not allow_remote:
        raise CliError(REMOTE_REFUSAL.format(address=address), EXIT_ENVIRONMENT)
    return address


def bind(address: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((address, port))
    except OSError as exc:
        sock.close()
        raise CliError(
            f"cannot listen on {address}:{port}: {exc.strerror}", EXIT_ENVIRONMENT
        ) from exc
    sock.listen(128)
    return sock


async def serve(sock: socket.socket, config: UiConfig, cluster: Cluster, url: str) -> None:
    runner = web.AppRunner(create_app(config, cluster), access_log=None)
    await runner.setup()
    try:
        await web.SockSite(runner, sock).start()
        print(f"KAOS console on {url} (Ctrl-C to stop)", flush=True)
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


@click.command(
    "ui",
    context_settings=CONTEXT_SETTINGS,
    help="Open the KAOS console: every agent, ModelAPI, MCP server and MemoryStore live, "
    "chat with an agent, look inside a MemoryStore. Served on 127.0.0.1 with your kubeconfig "
    "identity; agents and memory services are reached through the Kubernetes API.",
)
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True,
              help="port to listen on (0: any free port)")  # fmt: skip
@click.option("--address", default="127.0.0.1", show_default=True,
              help="address to listen on (loopback only unless --allow-remote)")  # fmt: skip
@click.option("--allow-remote", is_flag=True,
              help="allow a non-loopback --address (anyone reaching it acts as you)")  # fmt: skip
@click.option("--no-browser", is_flag=True, help="do not open the browser")
@click.option("-n", "--namespace", default=None, shell_complete=complete_namespaces,
              help="show one namespace (default: every namespace)")  # fmt: skip
@click.option("--context", default=None, metavar="NAME", shell_complete=complete_contexts,
              help="kubeconfig context (default: the current one)")  # fmt: skip
def ui_command(
    port: int,
    address: str,
    allow_remote: bool,
    no_browser: bool,
    namespace: str | None,
    context: str | None,
) -> int:
    host = check_address(address, allow_remote)
    kube = Kube(context=context)
    kubectl = kube.kubectl
    sock = bind(host, port)
    bound = int(sock.getsockname()[1])
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{bound}/"
    hosts = {f"{shown}:{bound}"}
    if is_loopback(host):
        hosts |= {f"localhost:{bound}", f"127.0.0.1:{bound}"}
    config = UiConfig(
        context=kube.current_context(),
        namespace=namespace,
        hosts=frozenset(hosts) if is_loopback(host) else None,
    )
    if not is_loopback(host):
        print(
            f"warning: the console on {url} is reachable from other machines and acts as "
            "you (--allow-remote)",
            file=sys.stderr,
        )
    if not no_browser:
        threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(sock, config, Cluster(kubectl, context), url))
    print("console stopped", file=sys.stderr)
    return 0
