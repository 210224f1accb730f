"""MkDocs hooks of the documentation site: the pages generated from the code, added when
the site is built so that it shows what the code says now and nothing is committed twice.

Each generated file of the repository (written by its own generator: ``hack/gen-docs``
for the memory settings, ``python -m kaos_agent.settings_doc`` for the agent's; the
chart's and the test cluster's guides beside their code) becomes a page of the site, its
relative links rewritten to the site's pages and files. The CLI reference page gets the
command table that ``python -m kaos_cli.reference`` prints, run in the project's
virtualenv (``KAOS_DOCS_PYTHON``, set by ``hack/docs``), where the CLI is installed.
Loaded by ``mkdocs.yml`` (``hooks``); MkDocs runs in its own virtualenv (``hack/docs``).
"""

from __future__ import annotations

import os
import posixpath
import re
import subprocess
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parents[1]
DOCS = "docs"

# Page of the site -> the repository file it shows.
PAGES = {
    "reference/memory-settings.md": "images/memory/SETTINGS.md",
    "reference/agent-settings.md": "images/agent/README.md",
    "reference/operator-settings.md": "images/operator/SETTINGS.md",
    "reference/chart.md": "charts/kaos/README.md",
    "development/test-cluster.md": "hack/README-test-cluster.md",
}

# The CLI reference page holds this line where the generated command table goes.
CLI_PAGE = "cli.md"
CLI_MARKER = "<!-- generated: python -m kaos_cli.reference -->"

# A Markdown link or image whose target is a path (no scheme, not an anchor alone).
LINK = re.compile(r"(\]\()(?![a-z][a-z0-9+.-]*:|#)([^)\s#]+)((?:#[^)\s]*)?\))")


def site_path(repo_path: str) -> str | None:
    """Where a repository file is in the site: under docs/, or one of the generated pages."""
    if repo_path.startswith(DOCS + "/"):
        return repo_path[len(DOCS) + 1 :]
    for page, source in PAGES.items():
        if source == repo_path:
            return page
    return None


def relink(text: str, source: str, page: str) -> str:
    """``text`` of the repository file ``source`` with each relative link pointing where
    its target is in the site, relative to ``page``. A target the site lacks is left as
    written, so the strict build names it."""

    def move(match: re.Match[str]) -> str:
        target = posixpath.normpath(posixpath.join(posixpath.dirname(source), match[2]))
        where = site_path(target)
        if where is None:
            return match[0]
        return match[1] + posixpath.relpath(where, posixpath.dirname(page)) + match[3]

    return LINK.sub(move, text)


def cli_reference() -> str:
    python = os.environ.get("KAOS_DOCS_PYTHON") or str(ROOT / ".venv" / "bin" / "python")
    try:
        done = subprocess.run(
            [python, "-m", "kaos_cli.reference"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", "") or exc
        raise PluginError(f"python -m kaos_cli.reference failed ({python}): {detail}") from exc
    return done.stdout


def on_files(files: Files, config: MkDocsConfig) -> Files:
    if files.get_file_from_path(CLI_PAGE) is None:
        raise PluginError(f"the CLI reference page {CLI_PAGE} is missing")
    for page, source in PAGES.items():
        text = (ROOT / source).read_text(encoding="utf-8")
        files.append(File.generated(config, page, content=relink(text, source, page)))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    if page.file.src_uri != CLI_PAGE:
        return markdown
    if CLI_MARKER not in markdown:
        raise PluginError(f"{CLI_PAGE} lacks the line {CLI_MARKER}")
    return markdown.replace(CLI_MARKER, cli_reference())
