"""The Llama control's width slopes, measured once per test run (not a test module).

tests/families/test_model_class_slopes.py and tests/families/test_traced_classes.py hold
each class to the same control: the Llama of test_model_classes.py measured by
``measured_slopes`` under the Muon-Kimi + AdamW config (eight twins per width, ~8 s on an
idle core). Each module measured it itself, and under ``pytest -n 2 --dist worksteal``
each worker that ran a module's tests measured it again. :func:`control_slopes` measures
each control once per process, and once per run under xdist: the first worker to ask
writes it, as JSON (a float's repr reads back to the same float), to the run's shared
temporary folder, under a file lock; the others read it. Every value is the one the
measurement gives (the twins are seeded), so a read one is the measured one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock  # torch's own dependency

_MEASURED: dict[str, dict] = {}


def control_slopes(
    tmp_path_factory: pytest.TempPathFactory, key: str, measure: Callable[[], dict]
) -> dict:
    """The control named ``key`` (one key, one measurement: the caller's ``measure``):
    this process's, the run's (xdist), or measured now."""
    if key in _MEASURED:
        return _MEASURED[key]
    if os.environ.get("PYTEST_XDIST_WORKER") is None:  # one process: nothing to share
        _MEASURED[key] = measure()
        return _MEASURED[key]
    # the workers' base folders are siblings in this run's folder (pytest-xdist's way of
    # sharing a session fixture); a new run has a new one
    shared = Path(tmp_path_factory.getbasetemp()).parent / f"llama-control-{key}.json"
    with FileLock(str(shared) + ".lock"):
        if shared.is_file():
            _MEASURED[key] = json.loads(shared.read_text(encoding="utf-8"))
        else:
            _MEASURED[key] = measure()
            partial = shared.with_suffix(".partial")
            partial.write_text(json.dumps(_MEASURED[key]), encoding="utf-8")
            partial.replace(shared)
    return _MEASURED[key]
