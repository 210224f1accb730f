"""Completion as the shells run it: the script ``kaos completion zsh`` prints, loaded in a
bare zsh, completing a command line (shared by the unit and the cluster tests)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.support.procs import console_script

KAOS = console_script("kaos")

# zsh's completion builtins work only inside a completion widget: stand-ins print what
# the script hands them, so its calls of ``kaos`` are observed as zsh would make them.
ZSH_STUBS = (
    'compadd() { print -rl -- "${(@P)${@[-1]}}" }; _describe() { print -rl -- "${(@P)3}" }; '
)


def zsh_complete(
    *words: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Load ``kaos completion zsh`` in a bare zsh (compinit, no rc files) and complete the
    last of ``words``; stdout is ``registered: <function>`` then the candidates."""
    if shutil.which("zsh") is None:
        # Under CI a missing shell is a failure: .ci/run and `make tools` install it.
        if os.environ.get("CI", "").strip().lower() not in {"", "0", "false", "no"}:
            pytest.fail("zsh is not installed; CI must test the zsh completion")
        pytest.skip("zsh is not installed (apt-get install zsh, or make tools)")
    quoted = " ".join(f"'{w}'" for w in words)
    script = (
        "autoload -Uz compinit && compinit -u -D && "
        f'eval "$({KAOS} completion zsh)" && '
        'print -r -- "registered: $_comps[kaos]"; '
        f"{ZSH_STUBS}words=({quoted}); CURRENT={len(words)}; _kaos_completion"
    )
    base = env if env is not None else dict(os.environ)
    return subprocess.run(
        ["zsh", "-f", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**base, "PATH": f"{os.path.dirname(KAOS)}:{base['PATH']}"},
    )
