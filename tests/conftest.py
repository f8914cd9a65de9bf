"""Test-wide switches.

``SPECTRAL_TEST_VENDOR=1`` makes every generated config module the standalone (--vendor)
form instead of the one that imports spectral.torch, so the generated-module tests run on
both forms (README's test command runs them a second time with it set).

Every test process (pytest, each pytest-xdist worker, the processes tests spawn) runs torch
with one thread unless OMP_NUM_THREADS says otherwise.

Hypothesis runs with no deadline and without its "too slow" health check in every test:
both measure wall time, which a loaded build machine (several test runs on two cores)
stretches without anything being wrong; the examples and their assertions are unchanged.

After a test that compiled with torch.compile, dynamo's caches and frame counter are reset,
so the next test starts as a fresh process would (and apply_multipliers skips its heap
scan for stale compiled wrappers, which costs about half a second in a long test run).
"""

import os
import sys

import pytest
from hypothesis import HealthCheck, settings

import spectral.codegen.context

# One intra-op thread per process (this one, each pytest-xdist worker and every process a
# test spawns; set before any test imports torch). The tests' matrices are tiny: with two
# OpenMP threads on a busy two-core machine a 96 x 192 addmm took 6.9 ms instead of
# 0.07 ms, and one Muon test 252 s instead of 6 s.
os.environ.setdefault("OMP_NUM_THREADS", "1")
if "torch" in sys.modules:
    sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

settings.register_profile(
    "spectral", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("spectral")

VENDOR = os.environ.get("SPECTRAL_TEST_VENDOR") == "1"
if VENDOR:
    spectral.codegen.context.VENDOR_DEFAULT = True


def pytest_ignore_collect(collection_path, config):
    """The --vendor pass runs the generated-module tests (``-m "generated and not slow"``): a
    test file that never names the ``generated`` marker holds none, so it is not imported there
    (importing every test module was about a third of that pass: torch, transformers, jax,
    Megatron in each worker). A file that names the word for another reason is collected."""
    if VENDOR and collection_path.suffix == ".py" and collection_path.name.startswith("test_"):
        return "generated" not in collection_path.read_text(encoding="utf-8")
    return None


@pytest.fixture(autouse=True)
def _forget_compiled_code():
    yield
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is not None and dynamo.utils.counters["frames"]["total"]:
        dynamo.reset()
        dynamo.utils.counters.clear()
