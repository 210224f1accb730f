"""Which version the upgrade test starts from, on real git repositories."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.cluster.previous import NoHistory, export_tree, previous_commit

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True)  # fmt: skip
    return proc.stdout.strip()


def _commit(repo: Path, path: str, text: str) -> str:
    file = repo / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text)
    _git(repo, "add", path)
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", path)
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    return repo


def test_the_previous_version_is_before_the_newest_change_to_the_images(repo: Path) -> None:
    first = _commit(repo, "images/agent/app.py", "one")
    second = _commit(repo, "core/lib.py", "two")
    # Commits that change neither images nor chart do not move the previous version.
    _commit(repo, "docs/readme.md", "docs")
    _commit(repo, "tests/test_x.py", "tests")
    assert previous_commit({}, repo) == first
    tests_only = _git(repo, "rev-parse", "HEAD")
    _commit(repo, "charts/kaos/values.yaml", "three")
    # The parent of the chart's change: second's images, with the later tests.
    assert previous_commit({}, repo) == tests_only
    assert (
        _git(repo, "diff", "--name-only", second, tests_only) == "docs/readme.md\ntests/test_x.py"
    )


def test_a_named_commit_wins(repo: Path) -> None:
    first = _commit(repo, "images/agent/app.py", "one")
    _commit(repo, "images/agent/app.py", "two")
    _commit(repo, "images/agent/app.py", "three")
    assert previous_commit({"KAOS_UPGRADE_FROM": first[:10]}, repo) == first
    with pytest.raises(NoHistory, match="nosuchref"):
        previous_commit({"KAOS_UPGRADE_FROM": "nosuchref"}, repo)


def test_without_history_it_says_why(repo: Path, tmp_path: Path) -> None:
    _commit(repo, "images/agent/app.py", "one")
    with pytest.raises(NoHistory, match="missing"):
        previous_commit({}, repo)
    _commit(repo, "images/agent/app.py", "two")
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth=1", f"file://{repo}", str(shallow)],
                   check=True, capture_output=True)  # fmt: skip
    with pytest.raises(NoHistory, match="shallow clone"):
        previous_commit({}, shallow)
    with pytest.raises(NoHistory, match="not a git checkout"):
        previous_commit({}, tmp_path)


def test_the_tree_is_exported_once_and_older_trees_go(repo: Path, tmp_path: Path) -> None:
    first = _commit(repo, "images/agent/app.py", "one")
    second = _commit(repo, "images/agent/app.py", "two")
    cache = tmp_path / "cache"
    tree = export_tree(first, cache, repo)
    assert (tree / "images/agent/app.py").read_text() == "one"
    assert not (tree / ".git").exists()
    assert export_tree(first, cache, repo) == tree
    newer = export_tree(second, cache, repo)
    assert (newer / "images/agent/app.py").read_text() == "two"
    assert sorted(p.name for p in cache.iterdir()) == [second]
