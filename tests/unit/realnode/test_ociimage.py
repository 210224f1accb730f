"""The OCI archives the real node imports (tests.support.ociimage): a valid image layout
whose blobs match their digests, named for ``ctr images import``, and reproducible."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

from tests.support.ociimage import Entry, build_archive


def _members(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive) as tar:
        return {
            m.name: tar.extractfile(m).read()  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.isfile()
        }


def test_the_archive_is_an_oci_layout_named_for_ctr(tmp_path: Path) -> None:
    binary = tmp_path / "tool"
    binary.write_bytes(b"\x7fELF not really")
    out = tmp_path / "img.tar"
    digest = build_archive(
        out,
        "kaos.local/tool:1",
        {"bin/tool": Entry(binary), "bin/alias": Entry(target="tool")},
        entrypoint=["/bin/tool"],
    )
    files = _members(out)
    assert json.loads(files["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    for name, content in files.items():
        if name.startswith("blobs/sha256/"):
            assert hashlib.sha256(content).hexdigest() == name.rsplit("/", 1)[1]
    (entry,) = json.loads(files["index.json"])["manifests"]
    assert entry["digest"] == digest
    assert entry["annotations"]["io.containerd.image.name"] == "kaos.local/tool:1"
    assert entry["platform"] == {"architecture": "amd64", "os": "linux"}
    manifest = json.loads(files["blobs/sha256/" + digest.removeprefix("sha256:")])
    config = json.loads(files["blobs/sha256/" + manifest["config"]["digest"][7:]])
    assert config["config"]["Entrypoint"] == ["/bin/tool"]
    layer = files["blobs/sha256/" + manifest["layers"][0]["digest"][7:]]
    assert config["rootfs"]["diff_ids"] == [manifest["layers"][0]["digest"]]
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        by_name = {m.name: m for m in tar.getmembers()}
    assert by_name["bin"].isdir()
    assert by_name["bin/tool"].mode == 0o755 and by_name["bin/tool"].isfile()
    assert by_name["bin/alias"].issym() and by_name["bin/alias"].linkname == "tool"


def test_the_same_inputs_give_the_same_image_and_a_change_rebuilds(tmp_path: Path) -> None:
    binary = tmp_path / "tool"
    binary.write_bytes(b"one")
    out = tmp_path / "img.tar"
    first = build_archive(out, "kaos.local/t:1", {"tool": Entry(binary)}, entrypoint=["/tool"])
    again = build_archive(
        tmp_path / "other.tar", "kaos.local/t:1", {"tool": Entry(binary)}, entrypoint=["/tool"]
    )
    assert first == again
    assert (tmp_path / "img.tar").read_bytes() == (tmp_path / "other.tar").read_bytes()
    binary.write_bytes(b"two")
    changed = build_archive(out, "kaos.local/t:1", {"tool": Entry(binary)}, entrypoint=["/tool"])
    assert changed != first
    assert out.with_name("img.tar.digest").read_text().strip() == changed
