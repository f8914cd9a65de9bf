"""The measurement protocol of ``spectral infer``: what is measured, at which sizes.

Widths, gradient ranks, seeds, gradient scales ``G``, noise and warm-up, and the limits of
the checks that a declaration's assumptions hold. The result (:class:`Inference`) reports
them, so a declaration carries how it was measured.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_WIDTHS",
    "G_SCALES",
    "NOISE",
    "PROBE_FACTOR",
    "RANKS",
    "SEEDS",
    "TOLERANCE",
    "WARMUP",
]

DEFAULT_WIDTHS = (64, 128, 256, 512)
RANKS = (1, 4)
"""Gradient ranks (singular values 1, 1/2, 1/4, …, as the probe's)."""
SEEDS = (0, 1)
G_SCALES = (0.1, 1.0, 10.0)
"""Spectral norms ``G`` of the gradient for the ``G``-exponent."""
NOISE = 1e-3
"""Gaussian noise on the gradient, relative to its spectral norm (the probe's)."""
WARMUP = 6
"""Steps before the measured one: SOAP's and ADOPT's first step makes no update, and
torch's RAdam is un-normalised until its variance rectification switches on at step 6
(the check compares the measured step with the last warm-up step, so both must be past
it)."""
TOLERANCE = 0.1
"""Largest exponent a check tolerates: of ``‖ΔW‖`` in a weight scale, in the lr beyond
proportionality, of the step-to-step change in ``n``."""
PROBE_FACTOR = 4.0
"""Factor by which ``W`` and the lr are scaled for the weight and lr checks."""
