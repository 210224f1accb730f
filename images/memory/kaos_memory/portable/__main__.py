"""``python -m kaos_memory.portable --out FILE`` writes the format's JSON Schema;
``--check FILE`` exits 1 when the committed file drifts from the models (``hack/gen-docs``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kaos_core.memory.portable import schema_text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kaos_memory.portable")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--out", type=Path, help="write the schema here")
    mode.add_argument("--check", type=Path, help="exit 1 unless this file is current")
    args = parser.parse_args(argv)
    text = schema_text()
    if args.out is not None:
        args.out.write_text(text)
        return 0
    current = args.check.read_text() if args.check.exists() else ""
    if current != text:
        print(
            f"{args.check} drifted from kaos_core.memory.portable: regenerate it with"
            " hack/gen-docs",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
