"""``python -m tests.support.cluster up|down|env``: what ``hack/test-cluster`` runs."""

from __future__ import annotations

import sys

from tests.support.cluster.cli import main
from tests.support.cluster.errors import ClusterError

if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except ClusterError as exc:
        print(f"test-cluster: {exc}", file=sys.stderr)
        sys.exit(1)
