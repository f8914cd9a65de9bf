"""Test-wide switches.

``SPECTRAL_TEST_VENDOR=1`` makes every generated config module the standalone (--vendor)
form instead of the one that imports spectral.torch, so the generated-module tests run on
both forms (README's test command runs them a second time with it set).
"""

import os

import spectral.codegen.context

if os.environ.get("SPECTRAL_TEST_VENDOR") == "1":
    spectral.codegen.context.VENDOR_DEFAULT = True
