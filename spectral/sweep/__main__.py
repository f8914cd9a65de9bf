"""``python -m spectral.sweep``: the ``spectral sweep`` command on its own (the CLI layer)."""

from __future__ import annotations

from ..cli.sweep import main

if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
