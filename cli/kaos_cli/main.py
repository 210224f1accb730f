"""Entry point of the ``kaos`` console script.

The CLI's libraries (click, rich) come with the ``cli`` extra, which the images do not
install; without them ``kaos`` says so in one line instead of an ImportError.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

MISSING_EXTRA = (
    "error: the kaos command line needs its extra: pip install 'kaos[cli]' (missing: {name})"
)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        import click  # noqa: F401
        import rich  # noqa: F401
    except ImportError as exc:
        print(MISSING_EXTRA.format(name=exc.name or "click"), file=sys.stderr)
        return 2
    from kaos_cli.app import run

    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
