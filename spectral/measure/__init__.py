"""Measurement pieces shared by ``probe``, ``infer`` and ``coord-check``.

:mod:`~spectral.measure.fit` (the measuring toolkit: RMS, the least-squares slope and its
interval, the tolerances, the verdict; standard library only, so the torch runtime vendors
it and imports it from below every other measure module),
:mod:`~spectral.measure.common` (role shapes, the μP-aligned init, the step's norm),
:mod:`~spectral.measure.probe` (a declaration against its implementation) and
:mod:`~spectral.measure.guard` (user code under a time limit, its output and exits kept
apart from ours). None imports torch at module level.
"""
