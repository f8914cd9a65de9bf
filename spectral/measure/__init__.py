"""Measurement pieces shared by ``probe``, ``infer`` and ``coord-check``.

:mod:`~spectral.measure.common` (role shapes, the μP-aligned init, norms, slopes),
:mod:`~spectral.measure.probe` (a declaration against its implementation) and
:mod:`~spectral.measure.guard` (user code under a time limit, its output and exits kept
apart from ours). None imports torch at module level.
"""
