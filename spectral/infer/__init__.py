"""Infer an optimizer's declaration from its real implementation: ``spectral infer``.

The probe (:mod:`spectral.measure.probe`) checks a declaration against an implementation; this
module runs the same measurement the other way round. For each role's shape (input
``n × d0``, hidden ``n × n``, output ``d0 × n``, biases ``n``) and each width ``n`` the
real optimizer takes a few warm-up steps with one fixed gradient (a low-rank matrix plus
noise, as the probe's, scaled to ``‖∇W‖_2 = G``) and the RMS→RMS operator norm of the next
step, divided by the learning rate, is recorded:

    ‖A‖_R ≈ ‖ΔW‖_R / lr,      ‖ΔW‖_R = sqrt(n_in / n_out) · ‖ΔW‖_2.

The width exponent of each role comes from a log–log fit over the widths, at several
gradient ranks and seeds; the exponent of ``G`` from the same step at ``G = 0.1, 1, 10``.
The input role varies only ``n_out`` (its ``n_in = d0``), the output role only ``n_in``,
and the hidden role both, so the three weight roles fix the declaration

    ‖A‖_R = n_in^a · n_out^b · min(n_in, n_out)^c · G^g

with ``b`` the input role's exponent, ``a`` the output role's and ``c`` what the hidden
role adds beyond ``a + b`` (``min`` is ``d0 = Θ(1)`` on the input and output roles). A
bias is an ``n × 1`` matrix, so it must show ``b`` as well; when it does not, the
declaration covers matrices only. Each exponent gets an interval (a 95% t-interval over the
seed × rank runs plus the drift of the local slope across the widths, at least
:data:`FLOOR`) and is rounded to a fraction of denominator at most
:data:`MAX_DENOMINATOR` only when that fraction lies inside the interval.

The measurement also tests the assumptions of a declaration, and refuses to guess when one
fails (:attr:`Inference.problems`): the step must not depend on the weights (scaling ``W``
by 4; LAMB's trust ratio fails this), must be proportional to the learning rate and change
from step to step by a width-independent factor (a learning rate the optimizer adapts
itself, as Prodigy's ``d``, fails this), and its exponents must round.

ε: a constructor argument named ``eps`` (or ``*_eps``, ``epsilon``) is declared when it
*regularises* the step at these gradients — changing it by ``10^±3`` around its default
changes the step, and a larger ε gives a smaller step. Its scale is the ``ε*`` at which
the step has halved, fitted like the update norm (Adam: ``ε* ∝ G / sqrt(n_in n_out)``, the
entrywise RMS of the gradient). An ε that is inert at these gradients — a guard against
division by zero, as torch Muon's floor on ``‖X‖_F`` — is reported and not declared.

torch is imported inside functions.

Layout: :mod:`~spectral.infer.protocol` (what is measured), :mod:`~spectral.infer.target`
(the class under test), :mod:`~spectral.infer.meter` (one measured step),
:mod:`~spectral.infer.fit` (exponents and their rounding), :mod:`~spectral.infer.eps` (the
ε), :mod:`~spectral.infer.result` (what was found) and :mod:`~spectral.infer.run` (all of it).
"""

from __future__ import annotations

from .eps import eps_candidates
from .fit import FLOOR, MAX_DENOMINATOR, Exponent, declaration, round_exponent
from .meter import rms_norm
from .protocol import DEFAULT_WIDTHS, WARMUP
from .result import EpsFit, Inference, RoleFit
from .run import infer
from .target import Target, load_target

__all__ = [
    "DEFAULT_WIDTHS",
    "FLOOR",
    "MAX_DENOMINATOR",
    "EpsFit",
    "Exponent",
    "Inference",
    "RoleFit",
    "Target",
    "infer",
    "load_target",
    "round_exponent",
    # used by the CLI and the tests
    "WARMUP",
    "declaration",
    "eps_candidates",
    "rms_norm",
]
