"""The README starts a reader and sends them into the documentation site, and the site holds
together: the README is short, every relative link of the README and of docs/ resolves (to
a file and, for a page, to one of its headings), the nav lists every page, and what the
site generates at build time has its sources. ``make docs`` builds the site strictly and
checks the rendered links too; this runs without MkDocs installed.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
HOOKS = ROOT / "hack" / "docs_hooks.py"

FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*$", re.M)


def hook_constant(name: str) -> Any:
    """A literal assigned at the top of the MkDocs hooks (MkDocs itself is not installed here)."""
    for node in ast.parse(HOOKS.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return ast.literal_eval(node.value)
    raise LookupError(name)


GENERATED: dict[str, str] = hook_constant("PAGES")


def prose(text: str) -> str:
    """Markdown without its code blocks and code spans, where a link is only text."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def links(text: str) -> list[str]:
    """The relative link targets of a Markdown text (no scheme, no mail address)."""
    return [t for t in LINK.findall(prose(text)) if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


def slug(heading: str) -> str:
    """A heading's anchor as Python-Markdown's toc makes it."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(text: str) -> set[str]:
    return {slug(h) for h in HEADING.findall(FENCE.sub("", text))}


def page_text(path: Path) -> str | None:
    """The Markdown of a page: a file, or under docs/ a page generated from its source."""
    if path.is_file():
        return path.read_text(encoding="utf-8")
    if path.is_relative_to(DOCS):
        source = GENERATED.get(path.relative_to(DOCS).as_posix())
        if source is not None:
            return (ROOT / source).read_text(encoding="utf-8")
    return None


def broken_links(doc: Path, *, inside: Path) -> list[str]:
    text = doc.read_text(encoding="utf-8")
    broken = []
    for target in links(text):
        path_part, _, anchor = target.partition("#")
        path = (doc.parent / path_part).resolve() if path_part else doc
        if not path.is_relative_to(inside):
            broken.append(f"{target} (outside {inside.relative_to(ROOT.parent)})")
            continue
        page = page_text(path) if path.suffix == ".md" else None
        if page is None and not path.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and page is not None and anchor not in anchors(page):
            broken.append(f"{target} (no heading with that anchor)")
    return broken


def nav_pages(entries: list[Any]) -> list[str]:
    pages: list[str] = []
    for entry in entries:
        values = entry.values() if isinstance(entry, dict) else [entry]
        for value in values:
            pages += nav_pages(value) if isinstance(value, list) else [value]
    return pages


class ConfigLoader(yaml.SafeLoader):
    """mkdocs.yml with its Python tags read as plain values."""


ConfigLoader.add_multi_constructor("tag:yaml.org,2002:python/", lambda _l, _s, _n: None)


def config() -> dict[str, Any]:
    loaded = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), ConfigLoader)
    assert isinstance(loaded, dict)
    return loaded


def test_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines < 150, f"README.md has {lines} lines: move the detail into docs/"


def test_readme_links_resolve_and_lead_into_the_site() -> None:
    text = README.read_text(encoding="utf-8")
    assert broken_links(README, inside=ROOT) == []
    assert "docs/index.md" in links(text), "the README links the site's home page"


def test_readme_names_the_commands_the_install_and_kubectl_explain() -> None:
    text = README.read_text(encoding="utf-8")
    for words in ("make run", "make test", "pip install kaos-tools", "kubectl explain"):
        assert words in text, words


@pytest.mark.parametrize("doc", sorted(DOCS.rglob("*.md")), ids=lambda p: str(p.relative_to(DOCS)))
def test_docs_links_resolve_inside_the_site(doc: Path) -> None:
    assert broken_links(doc, inside=DOCS) == []


@pytest.mark.parametrize("page", sorted(GENERATED))
def test_generated_pages_have_their_sources(page: str) -> None:
    assert not (DOCS / page).exists(), f"docs/{page} is generated when the site is built"
    assert (ROOT / GENERATED[page]).is_file()


def test_nav_lists_every_page_once() -> None:
    nav = nav_pages(config()["nav"])
    on_disk = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert len(nav) == len(set(nav)), "a page is in the nav twice"
    assert set(nav) == on_disk | set(GENERATED)


def test_site_is_strict_and_built_outside_the_tree() -> None:
    cfg = config()
    assert cfg["strict"] is True
    assert cfg["site_dir"].startswith("build/"), "build/ is ignored by git"
    assert "hack/docs_hooks.py" in cfg["hooks"]


def test_cli_page_holds_the_generated_table_marker() -> None:
    page = hook_constant("CLI_PAGE")
    assert hook_constant("CLI_MARKER") in (DOCS / page).read_text(encoding="utf-8")


def test_committed_generated_regions_are_current() -> None:
    # hack/gen-docs writes the telemetry settings into the site's telemetry page.
    done = subprocess.run(
        [str(ROOT / "hack" / "gen-docs"), "--check"],
        cwd=ROOT,
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
