"""``python -m spectral.cli.compare_arms SPEC.json ...``: each spec's ``comparison.md`` beside it.

A spec (JSON) names arms spread over several sweep folders (spectral.sweep.compare_arms); the
comparison is rendered from their raw runs and written atomically beside the spec.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from spectral.errors import SpecError
from spectral.io import write_atomic
from spectral.sweep.compare_arms import (
    COMPARISON_FILE,
    read_spec,
    render_comparison,
    spec_arms,
)

COMMAND = "python -m spectral.cli.compare_arms"


def main(argv: Sequence[str] | None = None) -> int:
    """Render every spec given; exit 2 with one line for a bad one."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print(f"usage: {COMMAND} SPEC.json [SPEC.json ...]", file=sys.stderr)
        return 2
    try:
        for name in args:
            path = Path(name)
            spec = read_spec(path)
            arms, pairs = spec_arms(spec, path.parent)
            text = render_comparison(
                spec.get("title", path.parent.name),
                arms,
                pairs,
                command=f"{COMMAND} {path.as_posix()}",
                notes=spec.get("notes", []),
            )
            print(write_atomic(path.parent / COMPARISON_FILE, text, force=True))
    except SpecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
