"""Entry point of the ``kaos`` console script.

The CLI's libraries (click, rich) are dependencies of its distribution, ``kaos-tools``; a
copy of the package without them (put on a path by hand, or an install that was cut short)
says so in one line instead of an ImportError.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

MISSING_LIBRARY = (
    "error: the kaos command line is missing its library {name}: pip install kaos-tools"
)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        import click  # noqa: F401
        import rich  # noqa: F401
    except ImportError as exc:
        print(MISSING_LIBRARY.format(name=exc.name or "click"), file=sys.stderr)
        return 2
    from kaos_cli.app import run

    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
