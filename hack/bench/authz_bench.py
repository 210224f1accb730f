"""What "who may talk to an agent" costs a chat turn once the decision is cached: the same
turns sent to two ``kaos-agent`` processes side by side, both verifying the user's token,
one with ``AGENT_RBAC`` off and one with it on (``kaos_core.auth.invoke``).

Users' tokens come from the local issuer of ``make run --secure``
(``tests/support/devissuer.py``: keys over HTTPS on loopback; the tokens carry a user's
claims instead of a ServiceAccount's). The API server is a stand-in answering every
SubjectAccessReview ``allowed`` over HTTPS in this process: a cached decision never reaches
it (the run prints how many reviews it answered), so what is measured is the edge's own
work. Both agents answer from one development model (it answers at once); requests
alternate between the two (the order flips every turn) so both see the same machine; a
warm-up is discarded. A second row times the cached check alone, in this process.

Run: ``python hack/bench/authz_bench.py [--turns N] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import ssl
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import devmodel, percentile  # noqa: E402
from kaos_core.auth.access import KubernetesAccess  # noqa: E402
from kaos_core.auth.invoke import ClaimMapping, InvokeAccess  # noqa: E402
from kaos_core.auth.oidc import VerifiedUser  # noqa: E402
from kaos_core.auth.verify import HttpsSource  # noqa: E402

from tests.support.devissuer import DevIssuer, ca_file, tls_files  # noqa: E402
from tests.support.jwt_craft import sign  # noqa: E402
from tests.support.procs import ServiceProcess, console_script, free_port, start_service  # noqa: E402

NAMESPACE, AGENT, AUDIENCE = "bench", "agent0", "kaos"
SAR_PATH = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


class ApiServer:
    """Answers every SubjectAccessReview ``allowed``; counts them."""

    def __init__(self) -> None:
        self.reviews = 0

    async def review(self, request: web.Request) -> web.Response:
        self.reviews += 1
        body = await request.json()
        return web.json_response({**body, "status": {"allowed": True}}, status=201)


@asynccontextmanager
async def api_server(root: Path, fake: ApiServer) -> AsyncIterator[str]:
    chain, key = tls_files(root)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(chain, key)
    app = web.Application()
    app.router.add_post(SAR_PATH, fake.review)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=context).start()
    try:
        yield f"https://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def user_token(issuer: DevIssuer, sub: str) -> str:
    now = int(time.time())
    claims = {"iss": issuer.url, "aud": AUDIENCE, "sub": sub, "iat": now, "nbf": now,
              "exp": now + 3600}  # fmt: skip
    return sign(claims, issuer.key)


def start_agent(
    name: str, root: Path, model: str, issuer: DevIssuer, api: str, rbac: bool
) -> ServiceProcess:
    port = free_port()
    token = root / f"{name}-api-token"
    token.write_text("bench")
    env = {
        "AGENT_NAME": name,
        "AGENT_HOST": "127.0.0.1",
        "AGENT_PORT": str(port),
        "AGENT_IDENTITY": f"kaos://agent/{NAMESPACE}/{AGENT}",
        "MODEL_API_URL": model,
        "MODEL_NAME": "devmodel",
        "MEMORY_TYPE": "none",
        "KAOS_LOG_LEVEL": "WARNING",
        "AGENT_AUTH_MODE": "jwks",
        "AGENT_AUTH_ISSUER": issuer.url,
        "AGENT_AUTH_API_SERVER": api,
        "AGENT_AUTH_CA_FILE": str(ca_file(root / "api")),
        "AGENT_AUTH_TOKEN_FILE": str(token),
        "AGENT_CALLERS_FILE": str(root / "no-callers.json"),
        "AGENT_USER_ISSUER": issuer.url,
        "AGENT_USER_AUDIENCE": AUDIENCE,
        "AGENT_USER_CA_FILE": str(issuer.ca_file),
        "AGENT_RBAC": "true" if rbac else "false",
        "AGENT_RBAC_USERNAME_PREFIX": "oidc:",
    }
    return start_service(name, [console_script("kaos-agent")], port=port, env=env, log_dir=root)


async def turn(http: aiohttp.ClientSession, agent: ServiceProcess, token: str) -> float:
    body = {"model": "agent", "messages": [{"role": "user", "content": "hello"}]}
    headers = {"Authorization": f"Bearer {token}", "X-Session-Id": f"s-{uuid.uuid4().hex}"}
    started = time.perf_counter()
    async with http.post(f"{agent.url}/v1/chat/completions", json=body, headers=headers) as r:
        await r.read()
        if r.status != 200:
            raise RuntimeError(f"{agent.name} answered {r.status}: {(await r.text())[:300]}")
    return (time.perf_counter() - started) * 1000


async def chat_rows(
    off: ServiceProcess, on: ServiceProcess, token: str, turns: int
) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"off": [], "on": []}
    async with aiohttp.ClientSession() as http:
        for _ in range(10):  # warm-up: connections, the key cache, the decision cache
            await turn(http, off, token)
            await turn(http, on, token)
        for i in range(turns):
            order = (("off", off), ("on", on)) if i % 2 == 0 else (("on", on), ("off", off))
            for label, agent in order:
                times[label].append(await turn(http, agent, token))
    return times


async def cached_check(api: str, ca: Path, n: int) -> list[float]:
    """The cached decision alone: ``InvokeAccess.check`` for one user, in microseconds."""
    kube = KubernetesAccess(HttpsSource(ca_file=ca, token_file=None), api, cache_seconds=300)
    access = InvokeAccess(
        kube, ClaimMapping(username_prefix="oidc:"), namespace=NAMESPACE, name=AGENT
    )
    user = VerifiedUser(principal="alice", issuer="https://issuer", expires_at=time.time() + 3600,
                        token="t", claims={"sub": "alice"})  # fmt: skip
    try:
        await access.check(user)
        out = []
        for _ in range(n):
            started = time.perf_counter()
            await access.check(user)
            out.append((time.perf_counter() - started) * 1e6)
        return out
    finally:
        await access.close()


async def run(turns: int, root: Path) -> dict[str, Any]:
    issuer = DevIssuer(root / "issuer").start()
    (root / "no-callers.json").write_text(json.dumps({"callers": []}))
    fake = ApiServer()
    agents: list[ServiceProcess] = []
    try:
        async with api_server(root / "api", fake) as api:
            with devmodel(8) as model:
                off = start_agent("agent-rbac-off", root, model.url, issuer, api, rbac=False)
                agents.append(off)
                on = start_agent("agent-rbac-on", root, model.url, issuer, api, rbac=True)
                agents.append(on)
                times = await chat_rows(off, on, user_token(issuer, "alice"), turns)
            check = await cached_check(api, ca_file(root / "api"), 10_000)
    finally:
        for agent in agents:
            agent.stop(timeout=10)
        issuer.stop()
    p50 = {k: percentile(v, 0.5) for k, v in times.items()}
    return {
        "turns": turns,
        "chat_ms": {k: {"p50": p50[k], "p95": percentile(v, 0.95)} for k, v in times.items()},
        "added_p50_ms": p50["on"] - p50["off"],
        "cached_check_us": {"p50": percentile(check, 0.5), "p95": percentile(check, 0.95)},
        # The agents' reviews after the warm-up's first: none means every turn was cached.
        "reviews": fake.reviews,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kaos-bench-authz-"))
    try:
        result = asyncio.run(run(args.turns, root))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    chat = result["chat_ms"]
    for label in ("off", "on"):
        row = chat[label]
        print(f"chat turn, AGENT_RBAC {label:<3}  p50 {row['p50']:.3f} ms"
              f"  p95 {row['p95']:.3f} ms")  # fmt: skip
    print(f"added at p50: {result['added_p50_ms']:+.3f} ms"
          f" ({result['turns']} turns each, alternating)")  # fmt: skip
    check = result["cached_check_us"]
    print(f"cached check alone: p50 {check['p50']:.1f} us  p95 {check['p95']:.1f} us")
    print(f"SubjectAccessReviews answered: {result['reviews']} (the rest were cached)")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
