"""Test-wide switches.

``SPECTRAL_TEST_VENDOR=1`` makes every generated config module the standalone (--vendor)
form instead of the one that imports spectral.torch, so the generated-module tests run on
both forms (README's test command runs them a second time with it set).

Hypothesis runs with no deadline and without its "too slow" health check in every test:
both measure wall time, which a loaded build machine (several test runs on two cores)
stretches without anything being wrong; the examples and their assertions are unchanged.
"""

import os

from hypothesis import HealthCheck, settings

import spectral.codegen.context

settings.register_profile(
    "spectral", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("spectral")

if os.environ.get("SPECTRAL_TEST_VENDOR") == "1":
    spectral.codegen.context.VENDOR_DEFAULT = True
