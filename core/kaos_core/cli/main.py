"""Entry point of the ``kaos`` console script: argument parsing and error reporting.

Every subcommand module registers its parser and a ``handler(args) -> int``; ``main``
turns ``CliError`` into one ``error: ...`` line on stderr and its exit status.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from kaos_core.cli import agent, memory, system
from kaos_core.cli.tools import CliError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kaos",
        description="KAOS: run AI agents on Kubernetes. Uses your kubectl and helm "
        "(current kubeconfig context).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    system.add_parser(sub)
    agent.add_parser(sub)
    memory.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        status: int = args.handler(args)
    except CliError as exc:
        sys.stdout.flush()
        print(f"error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return status


if __name__ == "__main__":
    sys.exit(main())
