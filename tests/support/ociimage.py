"""Minimal OCI image archives made without a container engine, for the real node.

The real node (``tests.support.realnode``) needs a pause image as containerd's sandbox
image and a tiny image of its own for its checks; Docker Hub cannot be reached here, so
both are written as OCI image layouts in a tar (what ``ctr images import`` reads), each
holding one uncompressed layer of static binaries. Deterministic: the same files give the
same digests, so an archive is rebuilt only when its inputs change.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar"


@dataclass(frozen=True)
class Entry:
    """One file of the image: its content from ``source`` (a file) or a symlink ``target``."""

    source: Path | None = None
    mode: int = 0o755
    target: str | None = None


def _tar_bytes(members: Sequence[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, None if data is None else io.BytesIO(data))
    return buf.getvalue()


def _info(name: str, kind: bytes, mode: int, size: int = 0, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.size = size
    info.linkname = link
    info.mtime = 0  # reproducible digests
    info.uid = info.gid = 0
    return info


def _layer(files: Mapping[str, Entry]) -> bytes:
    members: list[tuple[tarfile.TarInfo, bytes | None]] = []
    dirs: set[str] = set()
    for path in sorted(files):
        parts = path.strip("/").split("/")
        for depth in range(1, len(parts)):
            parent = "/".join(parts[:depth])
            if parent not in dirs:
                dirs.add(parent)
                members.append((_info(parent, tarfile.DIRTYPE, 0o755), None))
        name, entry = "/".join(parts), files[path]
        if entry.target is not None:
            members.append((_info(name, tarfile.SYMTYPE, 0o777, link=entry.target), None))
        else:
            assert entry.source is not None, path
            data = entry.source.read_bytes()
            members.append((_info(name, tarfile.REGTYPE, entry.mode, len(data)), data))
    return _tar_bytes(members)


def _blob(content: bytes) -> tuple[str, bytes]:
    return "sha256:" + hashlib.sha256(content).hexdigest(), content


def build_archive(
    out: Path,
    ref: str,
    files: Mapping[str, Entry],
    *,
    entrypoint: Sequence[str],
    user: str = "",
) -> str:
    """Write an OCI layout tar of one linux/amd64 image named ``ref`` to ``out`` (skipped
    when ``out`` already holds the same image) and return its manifest digest."""
    layer_digest, layer = _blob(_layer(files))
    config_doc: dict[str, Any] = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": list(entrypoint), "User": user, "Env": ["PATH=/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
    }
    config_digest, config = _blob(json.dumps(config_doc, sort_keys=True).encode())
    manifest_doc = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "config": {"mediaType": CONFIG_TYPE, "digest": config_digest, "size": len(config)},
        "layers": [{"mediaType": LAYER_TYPE, "digest": layer_digest, "size": len(layer)}],
    }
    manifest_digest, manifest = _blob(json.dumps(manifest_doc, sort_keys=True).encode())
    stamp = out.with_name(out.name + ".digest")
    if out.exists() and stamp.exists() and stamp.read_text().strip() == manifest_digest:
        return manifest_digest
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": MANIFEST_TYPE, "digest": manifest_digest, "size": len(manifest),
            "platform": {"architecture": "amd64", "os": "linux"},
            "annotations": {"io.containerd.image.name": ref,
                            "org.opencontainers.image.ref.name": ref},
        }],
    }  # fmt: skip
    members: list[tuple[tarfile.TarInfo, bytes | None]] = [
        (_info("blobs", tarfile.DIRTYPE, 0o755), None),
        (_info("blobs/sha256", tarfile.DIRTYPE, 0o755), None),
    ]
    for digest, content in ((layer_digest, layer), (config_digest, config),
                            (manifest_digest, manifest)):  # fmt: skip
        name = "blobs/sha256/" + digest.removeprefix("sha256:")
        members.append((_info(name, tarfile.REGTYPE, 0o644, len(content)), content))
    for name, doc in (("oci-layout", {"imageLayoutVersion": "1.0.0"}), ("index.json", index)):
        content = json.dumps(doc, sort_keys=True).encode()
        members.append((_info(name, tarfile.REGTYPE, 0o644, len(content)), content))
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    partial.write_bytes(_tar_bytes(members))
    partial.replace(out)
    stamp.write_text(manifest_digest + "\n")
    return manifest_digest
