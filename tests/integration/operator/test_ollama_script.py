"""The Hosted pod's script, run by /bin/sh as the pod runs it, against a stand-in for the
``ollama`` CLI (the model boundary: it records its arguments and keeps a model store of
empty files). What the script does with the spec's values, its order and its exits are
the real script's."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from kaos_operator.desired.modelapi import OLLAMA_READY, OLLAMA_SCRIPT, PULLED_MARK, READY_MARK

SOURCE = "models.registry.svc:5000/library/smollm2:135m"

# serve: up until the script's ready mark is written or the script is gone. A model is a
# file named after it; an embedding model (FAKE_EMBEDDING) refuses an empty prompt, as
# Ollama's CLI does.
FAKE_OLLAMA = r"""#!/bin/sh
printf '%s\n' "$*" >> "$FAKE/calls"
file() { printf '%s' "$1" | tr '/:' '__'; }
case "$1" in
  serve)
    # Off the script's pipes, as a server's output does not keep the test waiting.
    exec >/dev/null 2>&1
    : > "$FAKE/up"
    while [ ! -s "$FAKE/ready" ] && kill -0 "$PPID" 2>/dev/null; do sleep 0.05; done ;;
  list) [ -f "$FAKE/up" ] ;;
  show) [ -f "$FAKE/store/$(file "$2")" ] ;;
  pull)
    [ "$2" = --insecure ] && shift
    [ -z "${FAKE_PULL_FAILS:-}" ] && : > "$FAKE/store/$(file "$2")" ;;
  cp) [ -f "$FAKE/store/$(file "$2")" ] && : > "$FAKE/store/$(file "$3")" ;;
  run)
    [ -f "$FAKE/store/$(file "$2")" ] || exit 1
    [ -n "${FAKE_EMBEDDING:-}" ] && [ -z "$3" ] && exit 1
    exit 0 ;;
  *) exit 2 ;;
esac
"""


@dataclass
class Pod:
    """One pod's model store (kept across starts) and a way to start its container."""

    root: Path

    @property
    def calls_file(self) -> Path:
        return self.root / "calls"

    def start(
        self, model: str = "smollm2:135m", source: str | None = None, **extra: str
    ) -> subprocess.CompletedProcess[str]:
        self.calls_file.unlink(missing_ok=True)
        (self.root / "up").unlink(missing_ok=True)
        # The pod's paths, moved under the test's directory.
        script = OLLAMA_SCRIPT.replace(READY_MARK, str(self.root / "ready")).replace(
            PULLED_MARK, str(self.root / "pulled")
        )
        env = {
            "PATH": f"{self.root / 'bin'}:/usr/bin:/bin",
            "FAKE": str(self.root),
            "OLLAMA_MODEL": model,
            "OLLAMA_SOURCE": source or model,
            "OLLAMA_INSECURE": "false",
            **extra,
        }
        return subprocess.run(
            ["/bin/sh", "-c", script], env=env, capture_output=True, text=True, timeout=60
        )

    def calls(self) -> list[str]:
        """The CLI calls but the server's readiness polls."""
        return [c for c in self.calls_file.read_text().splitlines() if c != "list"]

    def ready(self) -> bool:
        return (self.root / "ready").read_text() == "ready\n"


@pytest.fixture
def pod(tmp_path: Path) -> Pod:
    (tmp_path / "bin").mkdir()
    (tmp_path / "store").mkdir()
    fake = tmp_path / "bin" / "ollama"
    fake.write_text(FAKE_OLLAMA)
    fake.chmod(0o755)
    return Pod(tmp_path)


def test_first_start_pulls_copies_loads_then_marks_ready(pod: Pod) -> None:
    done = pod.start(source=SOURCE)
    assert done.returncode == 0, done.stderr
    # Nothing was pulled into this store yet: no need to ask for the model.
    assert pod.calls() == [
        "serve",
        f"pull {SOURCE}",
        f"cp {SOURCE} smollm2:135m",
        "run smollm2:135m ",
    ]
    assert pod.ready()
    assert (pod.root / "pulled").read_text() == f"{SOURCE}\n"
    assert f"kaos: pulling {SOURCE}" in done.stderr


def test_a_restart_finds_the_model_in_its_store(pod: Pod) -> None:
    assert pod.start(source=SOURCE).returncode == 0
    done = pod.start(source=SOURCE)
    assert done.returncode == 0, done.stderr
    assert pod.calls() == ["serve", "show smollm2:135m", "run smollm2:135m "]
    assert pod.ready()


def test_a_new_source_for_the_same_name_is_pulled_again(pod: Pod) -> None:
    assert pod.start(source=SOURCE).returncode == 0
    newer = "models.registry.svc:5000/library/smollm2:135m-v2"
    assert pod.start(source=newer).returncode == 0
    assert f"pull {newer}" in pod.calls()
    assert (pod.root / "pulled").read_text() == f"{newer}\n"


def test_the_default_registry_needs_no_copy_and_insecure_is_a_flag(pod: Pod) -> None:
    assert pod.start().returncode == 0
    assert pod.calls() == ["serve", "pull smollm2:135m", "run smollm2:135m "]
    assert pod.start(source=SOURCE, OLLAMA_INSECURE="true").returncode == 0
    assert f"pull --insecure {SOURCE}" in pod.calls()


def test_a_failed_pull_exits_without_ready(pod: Pod) -> None:
    done = pod.start(source=SOURCE, FAKE_PULL_FAILS="1")
    assert done.returncode == 1
    assert pod.calls() == ["serve", f"pull {SOURCE}"]
    assert not pod.ready() and not (pod.root / "pulled").exists()


def test_an_embedding_model_is_loaded_with_a_word(pod: Pod) -> None:
    done = pod.start(model="nomic-embed-text", FAKE_EMBEDDING="1")
    assert done.returncode == 0, done.stderr
    assert pod.calls()[-2:] == ["run nomic-embed-text ", "run nomic-embed-text ready"]
    assert pod.ready()


def test_values_are_arguments_never_shell(pod: Pod) -> None:
    """The CRD refuses such names; the script would not run them either."""
    hostile = "$(touch pwned);`touch pwned`"
    pod.start(model=hostile)
    assert not (pod.root / "pwned").exists() and not Path("pwned").exists()
    assert pod.calls()[1:] == [f"pull {hostile}", f"run {hostile} "]


def test_the_readiness_probe_needs_the_mark(pod: Pod) -> None:
    probe = OLLAMA_READY.replace(READY_MARK, str(pod.root / "ready"))
    env = {
        "PATH": f"{pod.root / 'bin'}:/usr/bin:/bin",
        "FAKE": str(pod.root),
        "OLLAMA_MODEL": "smollm2:135m",
    }

    def probe_passes() -> bool:
        return subprocess.run(["/bin/sh", "-c", probe], env=env, timeout=30).returncode == 0

    (pod.root / "calls").touch()
    assert not probe_passes()  # no mark yet
    assert pod.start().returncode == 0
    assert probe_passes()
    (pod.root / "store" / "smollm2_135m").unlink()
    assert not probe_passes()  # the mark alone is not enough
