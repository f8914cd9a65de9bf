"""Fixtures of the sweep tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def unplotted(monkeypatch):
    """The sweep's plots written as empty files instead of drawn: for tests that compare or
    check the text files only (drawing with matplotlib was about four fifths of a tiny sweep's
    report). test_sweep.py and test_exponent.py check the plots themselves."""
    import spectral.sweep.exponent_report as exponent_report
    import spectral.sweep.report as report

    def empty(path) -> Path:
        Path(path).write_bytes(b"")
        return Path(path)

    monkeypatch.setattr(report, "plot", lambda tables, axis, path, note="": empty(path))
    monkeypatch.setattr(exponent_report, "plot_fit", lambda fit, path, optimizer: empty(path))
