"""A real OpenID Connect identity provider for the user-identity tests: Ory Hydra v2 on
loopback, with the login and consent step it delegates to, as a gateway sees it.

Hydra (built and cached by ``hack/hydra-build``) runs ``serve all`` on the in-memory
SQLite DSN, its public endpoint over HTTPS (a CA of the fixture's own signs the loopback
certificate: the KAOS verifiers only accept ``https://`` issuers; ``Provider.ca_file``
is what a verifier must trust) and its admin endpoint over plain HTTP on loopback. It
issues JWT access tokens (``strategies.access_token: jwt``), so a verifier checks them
offline against the provider's JWKS, as it does ID tokens.

Hydra keeps no users: it hands each login to a login app and each consent to a consent
app. Both are here, one small aiohttp process (``python -m tests.support.oidc``): it
accepts the login of the subject named by the authorization request's ``login_hint`` when
that is one of ``USERS`` (alice, bob) or named like an agent's identity (a provider whose
users choose their names, for the reserved-principal tests) and rejects any other (the
client is redirected back with ``error=access_denied``), and grants the requested scopes
and access-token audience.

``Provider.token(user, audience=...)`` does what a gateway does: an OAuth2 client
(registered through the admin API with the audiences it may request) runs the
authorization-code flow by following the redirects with an HTTP client, then exchanges
the code at ``/oauth2/token``. What the tokens carry:

- ``sub`` names the user (``"alice"``), in the access token and the ID token alike;
- the access token's ``groups`` lists the user's groups (``USER_GROUPS``), as an identity
  provider's groups claim does (for RBAC by group, ``kaos_core.auth.invoke``);
- the access token's ``aud`` is the list of requested audiences (``["kaos"]``), the ID
  token's is the client id; ``iss`` is ``Provider.issuer`` in both;
- the access token also has ``client_id``, ``scp`` (granted scopes), ``jti``, ``iat``,
  ``nbf`` and ``exp``; both are signed RS256, by two key sets (``ACCESS_TOKEN_KEYS``,
  ``ID_TOKEN_KEYS``), both published at ``Provider.jwks_url``.

``Provider.rotate_keys()`` adds a fresh signing key (RSA 2048, made by the fixture and
stored through the admin API) to both sets (Hydra signs with the newest), and with
``retire_old=True`` also deletes the previous ones, so tokens signed before name a key id
the JWKS no longer has.
"""

from __future__ import annotations

import argparse
import os
import secrets
import ssl
import subprocess
import sys
import time
import urllib.parse
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import jwt
import yaml
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from tests.support.devissuer import ca_file, tls_files
from tests.support.procs import (
    REPO_ROOT,
    ServiceProcess,
    free_port,
    start_service,
    wait_http_ok,
)

BUILD_SCRIPT = REPO_ROOT / "hack" / "hydra-build"
LOOPBACK = "127.0.0.1"
# The only users the login app knows; Hydra has no user store of its own.
USERS = ("alice", "bob")
# Besides them, users named in the form of an agent's identity, as a provider whose users
# choose their own names would have: what the services must refuse as principals.
AGENT_NAMED_USER_PREFIX = "kaos://agent/"
# The groups each user's access token lists in its ``groups`` claim.
USER_GROUPS: dict[str, tuple[str, ...]] = {"alice": ("staff",), "bob": ("guests",)}
DEFAULT_AUDIENCE = "kaos"
# Hydra's own names for the key sets that sign JWT access tokens and ID tokens.
ACCESS_TOKEN_KEYS = "hydra.jwt.access-token"
ID_TOKEN_KEYS = "hydra.openid.id-token"
SIGNING_KEY_SETS = (ACCESS_TOKEN_KEYS, ID_TOKEN_KEYS)
DISCOVERY_PATH = "/.well-known/openid-configuration"
JWKS_PATH = "/.well-known/jwks.json"
CALLBACK_PATH = "/callback"
HTTP_TIMEOUT = 60.0
# More redirects than this in one authorization flow is a loop, not a login.
MAX_REDIRECTS = 10


class HydraMissing(RuntimeError):
    """The cached binary is not there: ``hack/hydra-build`` (``make services``) builds it."""


class LoginRefused(RuntimeError):
    """The authorization flow ended with an OAuth2 error (the login app refused the user)."""

    def __init__(self, error: str, description: str) -> None:
        super().__init__(f"{error}: {description}")
        self.error = error
        self.description = description


def hydra_binary() -> Path:
    """The pinned Hydra: ``KAOS_HYDRA`` if set, else where ``hack/hydra-build`` puts it."""
    configured = os.environ.get("KAOS_HYDRA")
    if configured:
        path = Path(configured)
    else:
        out = subprocess.run(
            [str(BUILD_SCRIPT), "--print-env"], check=True, capture_output=True, text=True
        ).stdout
        env = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        path = Path(env["KAOS_HYDRA"])
    if not os.access(path, os.X_OK):
        raise HydraMissing(
            f"{path} is missing: run hack/hydra-build (or make services) to build Ory Hydra"
        )
    return path


@dataclass(frozen=True)
class Tokens:
    """What the token endpoint answered for one authorization-code flow (the tokens are
    credentials: kept out of the repr, so out of assertion messages and logs)."""

    id_token: str = field(repr=False)
    access_token: str = field(repr=False)
    # When the access token expires (seconds since the epoch, from ``expires_in``).
    expires: float
    scope: str


@dataclass(frozen=True)
class _Client:
    client_id: str
    secret: str = field(repr=False)


def _config(
    *,
    public_port: int,
    admin_port: int,
    login_url: str,
    cert: Path,
    key: Path,
) -> dict[str, Any]:
    issuer = f"https://{LOOPBACK}:{public_port}"
    return {
        "dsn": "memory",
        "serve": {
            "public": {
                "host": LOOPBACK,
                "port": public_port,
                "tls": {"enabled": True, "cert": {"path": str(cert)}, "key": {"path": str(key)}},
            },
            "admin": {"host": LOOPBACK, "port": admin_port},
        },
        "urls": {
            "self": {"issuer": issuer, "public": issuer},
            "login": f"{login_url}/login",
            "consent": f"{login_url}/consent",
            "error": f"{login_url}/error",
        },
        "strategies": {"access_token": "jwt"},
        "secrets": {"system": [secrets.token_hex(32)]},
        # Client secrets are hashed with PBKDF2; upstream's default cost makes every token
        # exchange slow for no benefit on a throwaway in-memory store.
        "oauth2": {
            "hashers": {"algorithm": "pbkdf2", "pbkdf2": {"iterations": 1}},
            # The consent's access-token claims Hydra may put at the top level (else only
            # under ``ext``), as identity providers put groups.
            "allowed_top_level_claims": ["groups"],
        },
        "log": {"level": "warn", "leak_sensitive_values": False},
        # No usage reporting (there is no internet here anyway).
        "sqa": {"opt_out": True},
    }


class Provider:
    """Hydra, its login/consent app, and the OAuth2 clients that get users' tokens."""

    def __init__(self, root: Path, binary: Path | None = None) -> None:
        self.root = root
        self.binary = binary
        self.public_port = free_port()
        self.admin_port = free_port()
        self.login_port = free_port()
        self.hydra: ServiceProcess | None = None
        self.login_app: ServiceProcess | None = None
        self._clients: dict[tuple[tuple[str, ...], int | None], _Client] = {}
        self._discovery: dict[str, Any] | None = None

    # -- where things are -------------------------------------------------------------

    @property
    def public_url(self) -> str:
        return f"https://{LOOPBACK}:{self.public_port}"

    @property
    def admin_url(self) -> str:
        """Hydra's admin API (plain HTTP, loopback only): what a test uses to manage it."""
        return f"http://{LOOPBACK}:{self.admin_port}"

    @property
    def login_url(self) -> str:
        return f"http://{LOOPBACK}:{self.login_port}"

    @property
    def redirect_uri(self) -> str:
        return self.login_url + CALLBACK_PATH

    @property
    def ca_file(self) -> Path:
        """The CA the public endpoint's certificate chains to (PEM)."""
        return ca_file(self.root)

    @property
    def discovery(self) -> dict[str, Any]:
        if self._discovery is None:
            with self._public() as http:
                response = http.get(self.public_url + DISCOVERY_PATH)
            response.raise_for_status()
            self._discovery = response.json()
        return self._discovery

    @property
    def issuer(self) -> str:
        """``iss`` of every token, exactly as the discovery document states it."""
        return str(self.discovery["issuer"])

    @property
    def discovery_url(self) -> str:
        return self.issuer.rstrip("/") + DISCOVERY_PATH

    @property
    def jwks_url(self) -> str:
        return str(self.discovery["jwks_uri"])

    def ssl_context(self) -> ssl.SSLContext:
        """A client context trusting only the provider's CA."""
        return ssl.create_default_context(cafile=str(self.ca_file))

    # -- lifecycle ----------------------------------------------------------------------

    def start(self, timeout: float = 90.0) -> Provider:
        """Start Hydra and the login app; return once Hydra serves its discovery document
        over TLS and the login app answers."""
        binary = self.binary or hydra_binary()
        self.root.mkdir(parents=True, exist_ok=True)
        cert, key = tls_files(self.root)
        config = self.root / "hydra.yaml"
        config.touch(mode=0o600)  # it holds the system secret
        config.write_text(
            yaml.safe_dump(
                _config(
                    public_port=self.public_port,
                    admin_port=self.admin_port,
                    login_url=self.login_url,
                    cert=cert,
                    key=key,
                )
            )
        )
        try:
            self.login_app = start_service(
                "oidc-login",
                [
                    sys.executable,
                    "-m",
                    "tests.support.oidc",
                    "--port",
                    str(self.login_port),
                    "--admin",
                    self.admin_url,
                ],
                port=self.login_port,
                log_dir=self.root,
                ready_path="/healthz",
                timeout=timeout,
            )
            self.hydra = self._start_hydra(binary, config, timeout)
            self._wait_public(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_hydra(self, binary: Path, config: Path, timeout: float) -> ServiceProcess:
        # Hydra reads its settings from the environment too (``LOG_LEVEL``, ``DSN``, ...):
        # nothing of the caller's may reach it beyond what a process needs.
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "TMPDIR", "TZ")}
        env["SQA_OPT_OUT"] = "true"
        log_path = self.root / "hydra.log"
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [str(binary), "serve", "all", "--config", str(config), "--sqa-opt-out"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=self.root,
            )
        hydra = ServiceProcess("hydra", proc, self.admin_port, log_path)
        try:
            wait_http_ok(f"{self.admin_url}/health/ready", proc, timeout, self.admin_port)
        except Exception as exc:
            hydra.kill()
            raise RuntimeError(f"Hydra failed to start: {exc}\n{hydra.log_tail()}") from exc
        return hydra

    def _wait_public(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            try:
                with self._public() as http:
                    response = http.get(self.public_url + DISCOVERY_PATH)
                # Ready means the signing keys are published too, or the first token
                # would wait for Hydra to generate them (RSA 4096).
                if response.status_code == 200 and self._keys_published():
                    self._discovery = response.json()
                    return
                last = f"HTTP {response.status_code}"
            except httpx.HTTPError as exc:
                last = str(exc)
            time.sleep(0.05)  # polling interval of a readiness wait, not a synchronisation
        tail = self.hydra.log_tail() if self.hydra else ""
        raise TimeoutError(f"Hydra's discovery document did not answer: {last}\n{tail}")

    def _keys_published(self) -> bool:
        # Hydra makes the ID-token key set at boot, in the background, and the
        # access-token one only when it signs its first JWT access token: store one now
        # (through the admin API, as ``rotate_keys`` does).
        if not self._key_set_exists(ACCESS_TOKEN_KEYS):
            self._add_key(ACCESS_TOKEN_KEYS, f"kaos-{secrets.token_hex(6)}")
        return self._key_set_exists(ID_TOKEN_KEYS)

    def _key_set_exists(self, key_set: str) -> bool:
        with httpx.Client(base_url=self.admin_url, timeout=HTTP_TIMEOUT) as http:
            response = http.get(f"/admin/keys/{key_set}")
        if response.status_code == 404:
            return False
        response.raise_for_status()
        return bool(response.json()["keys"])

    def stop(self) -> None:
        for proc in (self.hydra, self.login_app):
            if proc is not None:
                proc.stop(timeout=10)
        self.hydra = self.login_app = None

    # -- HTTP helpers -------------------------------------------------------------------

    def _public(self) -> httpx.Client:
        return httpx.Client(verify=self.ssl_context(), follow_redirects=False, timeout=HTTP_TIMEOUT)

    def admin(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One call to Hydra's admin API; raises on an error status."""
        with httpx.Client(base_url=self.admin_url, timeout=HTTP_TIMEOUT) as http:
            response = http.request(method, path, **kwargs)
        if response.is_error:
            raise RuntimeError(
                f"Hydra admin {method} {path}: HTTP {response.status_code} {response.text}"
            )
        return response

    # -- clients and tokens -------------------------------------------------------------

    def client(self, audience: Sequence[str], lifetime: int | None = None) -> _Client:
        """The OAuth2 client allowed to request ``audience`` (registered once per audience
        list and token lifetime)."""
        wanted = (tuple(sorted(audience)), lifetime)
        if wanted in self._clients:
            return self._clients[wanted]
        secret = secrets.token_urlsafe(24)
        created = self.admin(
            "POST",
            "/admin/clients",
            json={
                "client_name": f"kaos-gateway {' '.join(wanted[0])}",
                "client_secret": secret,
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "scope": "openid offline_access profile",
                "audience": list(wanted[0]),
                "redirect_uris": [self.redirect_uri],
                "token_endpoint_auth_method": "client_secret_basic",
            },
        ).json()
        client = _Client(client_id=created["client_id"], secret=secret)
        if lifetime is not None:
            span = f"{lifetime}s"
            self.admin(
                "PUT",
                f"/admin/clients/{client.client_id}/lifespans",
                json={
                    "authorization_code_grant_access_token_lifespan": span,
                    "authorization_code_grant_id_token_lifespan": span,
                },
            )
        self._clients[wanted] = client
        return client

    def token(
        self,
        user: str,
        audience: str | Sequence[str] = DEFAULT_AUDIENCE,
        *,
        lifetime: int | None = None,
        scopes: Sequence[str] = ("openid",),
    ) -> Tokens:
        """``user``'s tokens for ``audience``, through the authorization-code flow as a
        gateway runs it. ``lifetime`` (seconds) shortens both tokens' validity.
        Raises ``LoginRefused`` when the login app refuses ``user``."""
        audiences = [audience] if isinstance(audience, str) else list(audience)
        client = self.client(audiences, lifetime)
        state, nonce = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
        query = urllib.parse.urlencode(
            {
                "client_id": client.client_id,
                "response_type": "code",
                "scope": " ".join(scopes),
                "redirect_uri": self.redirect_uri,
                "state": state,
                "nonce": nonce,
                "audience": " ".join(audiences),
                "login_hint": user,
            }
        )
        url = f"{self.discovery['authorization_endpoint']}?{query}"
        # One cookie jar per flow, as one browser session: Hydra binds the flow to CSRF
        # cookies on its public host.
        with self._public() as http:
            for _ in range(MAX_REDIRECTS):
                response = http.get(url)
                location = response.headers.get("location")
                if response.status_code not in (302, 303) or not location:
                    raise RuntimeError(
                        f"authorization flow stopped at {url.split('?')[0]}: "
                        f"HTTP {response.status_code} {response.text[:500]}"
                    )
                url = urllib.parse.urljoin(url, location)
                if url.startswith(self.redirect_uri):
                    break
            else:
                raise RuntimeError(f"authorization flow did not come back in {MAX_REDIRECTS}")
            answer = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))
            if answer.get("state") != state:
                raise RuntimeError("authorization flow came back with another state")
            if "error" in answer:
                raise LoginRefused(answer["error"], answer.get("error_description", ""))
            started = time.time()
            response = http.post(
                self.discovery["token_endpoint"],
                data={
                    "grant_type": "authorization_code",
                    "code": answer["code"],
                    "redirect_uri": self.redirect_uri,
                },
                auth=(client.client_id, client.secret),
            )
        if response.is_error:
            raise RuntimeError(f"token exchange: HTTP {response.status_code} {response.text}")
        body = response.json()
        # The ID token must answer this very request (the signature is the tests' job).
        if jwt.decode(body["id_token"], options={"verify_signature": False}).get("nonce") != nonce:
            raise RuntimeError("the ID token does not carry this flow's nonce")
        return Tokens(
            id_token=body["id_token"],
            access_token=body["access_token"],
            expires=started + float(body["expires_in"]),
            scope=body.get("scope", ""),
        )

    # -- signing keys -------------------------------------------------------------------

    def jwks(self) -> dict[str, Any]:
        """The public key set, as a verifier fetches it (over TLS, from ``jwks_url``)."""
        with self._public() as http:
            response = http.get(self.jwks_url)
        response.raise_for_status()
        keys: dict[str, Any] = response.json()
        return keys

    def signing_kids(self, key_set: str = ACCESS_TOKEN_KEYS) -> list[str]:
        """The key ids in one of Hydra's signing key sets (admin API)."""
        keys = self.admin("GET", f"/admin/keys/{key_set}").json()["keys"]
        return [str(k["kid"]) for k in keys]

    def _add_key(self, key_set: str, kid: str) -> None:
        """Store a new RS256 signing key in ``key_set`` through the admin API (Hydra's
        "bring your own key": ``PUT /admin/keys/{set}/{kid}``). The key is made here, not
        by Hydra: Hydra makes RSA-4096 keys inside the request, which on a busy CPU outlives
        its admin server's 10 s write timeout (the connection drops, the key lands anyway)."""
        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = RSAAlgorithm.to_jwk(private, as_dict=True)
        jwk.update({"kid": kid, "alg": "RS256", "use": "sig"})
        self.admin("PUT", f"/admin/keys/{key_set}/{kid}", json=jwk)

    def rotate_keys(
        self, *, retire_old: bool = False, key_sets: Sequence[str] = SIGNING_KEY_SETS
    ) -> dict[str, str]:
        """Add a new RS256 signing key to each set in ``key_sets`` (Hydra signs new tokens
        with the newest key); with ``retire_old`` delete the previous keys too, so the JWKS
        no longer has the key ids of tokens signed before. Returns the new kid per set."""
        new: dict[str, str] = {}
        for key_set in key_sets:
            old = self.signing_kids(key_set)
            kid = f"kaos-{secrets.token_hex(6)}"
            self._add_key(key_set, kid)
            new[key_set] = kid
            if retire_old:
                for stale in old:
                    self.admin("DELETE", f"/admin/keys/{key_set}/{stale}")
        return new


# -- the login and consent app (its own process) -------------------------------------------


def create_login_app(admin_url: str) -> Any:
    """The login and consent app Hydra redirects the user agent to."""
    from aiohttp import ClientSession, web

    http_key = web.AppKey("http", ClientSession)

    async def http_session(app: web.Application) -> AsyncIterator[None]:
        async with ClientSession(base_url=admin_url) as session:
            app[http_key] = session
            yield

    async def admin(
        request: web.Request, method: str, path: str, challenge: tuple[str, str], **kw: Any
    ) -> dict[str, Any]:
        async with request.app[http_key].request(
            method, path, params=dict([challenge]), **kw
        ) as response:
            if response.status >= 400:
                raise web.HTTPBadGateway(text=f"Hydra admin answered {response.status}")
            body: dict[str, Any] = await response.json()
            return body

    def challenge_of(request: web.Request, name: str) -> tuple[str, str]:
        value = request.query.get(name)
        if not value:
            raise web.HTTPBadRequest(text=f"{name} is required")
        return name, value

    async def login(request: web.Request) -> web.Response:
        challenge = challenge_of(request, "login_challenge")
        flow = await admin(request, "GET", "/admin/oauth2/auth/requests/login", challenge)
        user = flow.get("subject") if flow.get("skip") else None
        user = user or (flow.get("oidc_context") or {}).get("login_hint", "")
        if user in USERS or user.startswith(AGENT_NAMED_USER_PREFIX):
            done = await admin(
                request,
                "PUT",
                "/admin/oauth2/auth/requests/login/accept",
                challenge,
                json={"subject": user, "remember": False},
            )
        else:
            done = await admin(
                request,
                "PUT",
                "/admin/oauth2/auth/requests/login/reject",
                challenge,
                json={
                    "error": "access_denied",
                    "error_description": "unknown user",
                    "status_code": 403,
                },
            )
        raise web.HTTPFound(done["redirect_to"])

    async def consent(request: web.Request) -> web.Response:
        challenge = challenge_of(request, "consent_challenge")
        flow = await admin(request, "GET", "/admin/oauth2/auth/requests/consent", challenge)
        subject = flow.get("subject", "")
        done = await admin(
            request,
            "PUT",
            "/admin/oauth2/auth/requests/consent/accept",
            challenge,
            json={
                "grant_scope": flow.get("requested_scope") or [],
                "grant_access_token_audience": flow.get("requested_access_token_audience") or [],
                "remember": False,
                "session": {
                    "id_token": {"preferred_username": subject},
                    "access_token": {"groups": list(USER_GROUPS.get(subject, ()))},
                },
            },
        )
        raise web.HTTPFound(done["redirect_to"])

    async def callback(request: web.Request) -> web.Response:
        # Where the client is sent back; the gateway (Provider.token) reads the redirect.
        return web.Response(text="ok")

    async def error(request: web.Request) -> web.Response:
        return web.Response(status=400, text=request.query.get("error", "error"))

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.cleanup_ctx.append(http_session)
    app.router.add_get("/login", login)
    app.router.add_get("/consent", consent)
    app.router.add_get(CALLBACK_PATH, callback)
    app.router.add_get("/error", error)
    app.router.add_get("/healthz", healthz)
    return app


def main(argv: list[str] | None = None) -> None:
    from aiohttp import web

    parser = argparse.ArgumentParser(description="the OIDC test provider's login/consent app")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--admin", required=True, help="Hydra's admin API URL")
    args = parser.parse_args(argv)
    web.run_app(
        create_login_app(args.admin), host=LOOPBACK, port=args.port, print=None, access_log=None
    )


if __name__ == "__main__":
    main()
