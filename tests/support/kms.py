"""A real key management service for the memory encryption tests: Local KMS on loopback.

The binary is the one ``hack/kms-build`` builds and caches (``make services`` runs it): an
AWS KMS API server with real AES-GCM keys, versioned key material and a LevelDB data
directory, plus ``RotateKeyOnDemand`` (added by the build). ``LocalKms.start`` runs it on a
free port over a data directory; ``restart`` stops it and starts it again on the same port
and directory, so the keys are still there. It accepts any credentials (it checks no
signature); the clients here sign with the fixed ones below all the same.

Readiness: Local KMS has no health endpoint (``GET /`` is 405), so the wait asks it a real
question (``ListKeys``) until it answers 200.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kaos_memory.crypto.kms import AwsCredentials, KmsKeyEncryptionKey
from kaos_memory.settings import MemorySettings

from tests.support.procs import REPO_ROOT, ServiceProcess, free_port

BUILD_SCRIPT = REPO_ROOT / "hack" / "kms-build"
REGION = "eu-west-2"
ACCOUNT = "111122223333"
# Local KMS checks no signature; the requests are signed as for AWS all the same.
CREDENTIALS = AwsCredentials(access_key_id="AKIDKAOSTEST", secret_access_key="kaos-test-secret")


class KmsMissing(RuntimeError):
    """The cached binary is not there: ``hack/kms-build`` (``make services``) builds it."""


def kms_binary() -> Path:
    out = subprocess.run(
        [str(BUILD_SCRIPT), "--print-env"], check=True, capture_output=True, text=True
    ).stdout
    path = Path(dict(line.split("=", 1) for line in out.splitlines() if "=" in line)["KAOS_KMS"])
    if not path.is_file():
        raise KmsMissing(f"{path} is missing: run hack/kms-build (or make services)")
    return path


def kms_call(endpoint: str, operation: str, payload: dict[str, Any]) -> tuple[int, Any]:
    """One unsigned KMS request, for the tests' own look at the server (status, answer)."""
    req = urllib.request.Request(
        endpoint,
        data=json.dumps(payload).encode(),
        method="POST",
        headers={
            "Content-Type": "application/x-amz-json-1.1",
            "X-Amz-Target": f"TrentService.{operation}",
        },
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            body = resp.read()
            return resp.status, json.loads(body) if body else {}
    except urllib.error.HTTPError as exc:
        body = exc.read()
        try:
            return exc.code, json.loads(body)
        except ValueError:
            return exc.code, body.decode(errors="replace")


def _wait_ready(svc: ServiceProcess, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        if not svc.alive():
            raise RuntimeError(f"local-kms exited with {svc.proc.returncode}")
        try:
            status, _ = kms_call(svc.url + "/", "ListKeys", {})
            if status == 200:
                return
            last = f"HTTP {status}"
        except (urllib.error.URLError, OSError) as exc:
            last = str(exc)
        time.sleep(0.05)  # polling interval of a readiness wait, not a synchronisation
    raise TimeoutError(f"local-kms not ready after {timeout}s: {last}")


@dataclass
class LocalKms:
    proc: ServiceProcess
    binary: Path
    work_dir: Path
    data_dir: Path

    @property
    def port(self) -> int:
        return self.proc.port

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @classmethod
    def start(cls, work_dir: Path, *, port: int | None = None) -> LocalKms:
        binary = kms_binary()
        work_dir.mkdir(parents=True, exist_ok=True)
        data_dir = work_dir / "data"
        return cls._run(binary, work_dir, data_dir, port or free_port())

    @classmethod
    def _run(cls, binary: Path, work_dir: Path, data_dir: Path, port: int) -> LocalKms:
        env = {
            **os.environ,
            "PORT": str(port),
            "KMS_REGION": REGION,
            "KMS_ACCOUNT_ID": ACCOUNT,
            "KMS_DATA_PATH": str(data_dir),
            # No seed: every key is made through the API (the default path is /init/seed.yaml).
            "KMS_SEED_PATH": str(work_dir / "no-seed.yaml"),
        }
        log_path = work_dir / "local-kms.log"
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [str(binary)],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=work_dir,
            )
        svc = ServiceProcess(name="local-kms", proc=proc, port=port, log_path=log_path)
        try:
            _wait_ready(svc, timeout=30)
        except Exception as exc:
            svc.kill()
            raise RuntimeError(f"local-kms failed to start: {exc}\n{svc.log_tail()}") from exc
        return cls(proc=svc, binary=binary, work_dir=work_dir, data_dir=data_dir)

    def stop(self) -> None:
        self.proc.stop(timeout=10)

    def restart(self) -> LocalKms:
        """Stop it and start it again on the same port and data directory."""
        self.stop()
        return self._run(self.binary, self.work_dir, self.data_dir, self.port)

    def call(self, operation: str, payload: dict[str, Any]) -> tuple[int, Any]:
        return kms_call(self.endpoint, operation, payload)

    def backend(self, store: str, **options: Any) -> KmsKeyEncryptionKey:
        """A client of this KMS, as a memory service replica makes it."""
        return KmsKeyEncryptionKey(
            region=REGION,
            credentials=CREDENTIALS,
            store=store,
            endpoint=self.endpoint,
            **options,
        )

    def memory_settings(self) -> dict[str, str]:
        """The memory service's settings that make this KMS its key-encryption key, by
        keyword (``memory_factory("local", **kms.memory_settings())``)."""
        return {
            "encryption_kek": "kms",
            "encryption_kms_region": REGION,
            "encryption_kms_endpoint": self.endpoint,
            "encryption_kms_access_key_id": CREDENTIALS.access_key_id,
            "encryption_kms_secret_access_key": CREDENTIALS.secret_access_key,
        }

    def env(self) -> dict[str, str]:
        """The same as ``KAOS_MEMORY_*`` variables."""
        return {
            MemorySettings.env_name(name): value for name, value in self.memory_settings().items()
        }
