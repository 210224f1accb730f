"""``python -m tests.support.cluster up|down|env``: what ``hack/test-cluster`` and
``hack/cluster`` run (the latter names itself in ``KAOS_CLUSTER_PROG``)."""

from __future__ import annotations

import os
import sys

from tests.support.cluster.cli import main
from tests.support.cluster.errors import ClusterError

if __name__ == "__main__":
    prog = os.environ.get("KAOS_CLUSTER_PROG") or "test-cluster"
    try:
        sys.exit(main(sys.argv[1:], prog))
    except ClusterError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        sys.exit(1)
