"""``kaos memory verify-receipt FILE``: check a forget's signed receipt, offline.

The receipt is the ``signed_receipt`` of a forget's answer (``kaos memory forget
--receipt-out FILE`` saves it). The store's public key comes from ``--key``: a file holding
the JWK or JWK Set, or the URL of the store's ``/.well-known/kaos-memory-receipt-key``;
without it, from the ``status.receiptKey`` of the MemoryStore the receipt names (read
through kubectl). The check itself needs no service: ``kaos_core.memory.receipt`` says how
a receipt is serialised and signed. Exit 0: valid; 1: not valid (one ``error:`` line says
why); 2: the key could not be had.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
import httpx
from kaos_core.memory.receipt import (
    MAX_RECEIPT_BYTES,
    ReceiptInvalid,
    canonical,
    parse_json,
    public_keys,
    verify,
)

from kaos_cli.commands.common import CONTEXT_SETTINGS, Cx, common_options
from kaos_cli.kinds import MEMORYSTORE
from kaos_cli.kubectl.sync import Kube
from kaos_cli.output import print_json, print_yaml
from kaos_cli.tools import EXIT_ENVIRONMENT, EXIT_FAILED, CliError

KEY_TIMEOUT = 15.0


def _read(path: str, what: str) -> bytes:
    try:
        if path == "-":
            return sys.stdin.buffer.read(MAX_RECEIPT_BYTES + 1)
        with Path(path).open("rb") as handle:
            return handle.read(MAX_RECEIPT_BYTES + 1)
    except OSError as exc:
        raise CliError(
            f"{what} {path}: {exc.strerror or 'cannot be read'}", EXIT_ENVIRONMENT
        ) from None


def _fetch(url: str) -> bytes:
    try:
        response = httpx.get(url, timeout=KEY_TIMEOUT, follow_redirects=False)
    except httpx.HTTPError as exc:
        raise CliError(
            f"--key {url}: cannot be fetched ({type(exc).__name__})", EXIT_ENVIRONMENT
        ) from None
    if response.status_code != 200:
        raise CliError(f"--key {url}: HTTP {response.status_code}", EXIT_ENVIRONMENT)
    return response.content[: MAX_RECEIPT_BYTES + 1]


def _store_key(cx: Cx, receipt: bytes) -> Any:
    """The JWK in the status of the MemoryStore the (unverified) receipt names."""
    try:
        doc = parse_json(receipt, "the receipt")
    except ReceiptInvalid as exc:
        raise CliError(str(exc), EXIT_FAILED) from None
    store = doc.get("store") if isinstance(doc, dict) else None
    if not isinstance(store, str) or store.count("/") != 1:
        raise CliError(
            "the receipt names no MemoryStore (namespace/name): give --key", EXIT_ENVIRONMENT
        )
    namespace, name = store.split("/")
    kube = Kube(context=cx.kube.context, namespace=namespace)
    found = kube.get(MEMORYSTORE.resource, name)
    key = (found.get("status") or {}).get("receiptKey")
    if not isinstance(key, dict):
        raise CliError(
            f"MemoryStore {store} has no status.receiptKey yet: give --key", EXIT_ENVIRONMENT
        )
    return key


def _keys(cx: Cx, key: str | None, receipt: bytes) -> Any:
    if key is None:
        return _store_key(cx, receipt)
    raw = _fetch(key) if key.startswith(("https://", "http://")) else _read(key, "--key")
    try:
        return parse_json(raw, "the key")
    except ReceiptInvalid as exc:
        raise CliError(f"--key {key}: {exc}", EXIT_ENVIRONMENT) from None


def verify_receipt(cx: Cx, receipt_file: str, key: str | None) -> int:
    receipt = _read(receipt_file, "receipt")
    jwk = _keys(cx, key, receipt)
    try:
        doc = verify(receipt, public_keys(jwk))
    except ReceiptInvalid as exc:
        raise CliError(f"receipt not valid: {exc}", EXIT_FAILED) from None
    if cx.fmt == "json":
        print_json(doc)
    elif cx.fmt == "yaml":
        print_yaml(doc)
    else:
        _print(doc)
    return 0


def _print(doc: dict[str, Any]) -> None:
    scope = doc.get("scope") or {}
    named = " ".join(
        f"{part}={scope[part]}" for part in ("principal", "agent", "session") if scope.get(part)
    )
    counts = doc.get("forgotten") or {}
    tiers = " ".join(f"{t}={counts.get(t)}" for t in ("short_term", "medium_term", "long_term"))
    print(f"valid: signed by {doc['store']!s} with key {doc['kid']}")
    print(f"erasure: {doc.get('erasure')} at {doc.get('issued_at')}")
    print(f"request: {doc.get('request_id')}")
    print(f"scope: {scope.get('level')}" + (f" {named}" if named else ""))
    print(f"forgotten: {tiers}")
    print(
        f"final: {'yes' if doc.get('final') else 'no (pending when signed)'}"
        f", key shredded: {'yes' if doc.get('key_shredded') else 'no'}"
    )


@click.command(
    "verify-receipt",
    context_settings=CONTEXT_SETTINGS,
    help="Check a forget's signed receipt offline (exit 0 valid, 1 not valid). The key: "
    "--key FILE (JWK or JWK Set) or URL (the store's /.well-known/kaos-memory-receipt-key); "
    "without it, the status.receiptKey of the MemoryStore the receipt names.",
)
@click.argument("receipt_file", metavar="FILE")
@click.option("--key", default=None, metavar="FILE_OR_URL", help="the store's public key")
@common_options(namespace_help="not used: the receipt names its store's namespace")
def verify_receipt_command(cx: Cx, receipt_file: str, key: str | None) -> int:
    return verify_receipt(cx, receipt_file, key)


def save_receipt(path: str, receipt: Any) -> None:
    """Write a forget's receipt to ``path`` in its signed (canonical) form, one line."""
    if receipt is None:
        raise CliError("the store answered without a signed receipt", EXIT_FAILED)
    data = canonical(receipt.model_dump(mode="json")) + b"\n"
    try:
        Path(path).write_bytes(data)
    except OSError as exc:
        raise CliError(f"--receipt-out {path}: {exc.strerror or 'cannot be written'}") from None


__all__ = ["save_receipt", "verify_receipt_command"]
