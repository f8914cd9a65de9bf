"""Rules along the two axes a run changes after width and depth: the horizon and the batch.

Every rule here is ``HP = base × r_D^d × r_B^b`` with ``r_D = D/D₀`` the ratio of training
tokens (the horizon) and ``r_B = B/B₀`` the ratio of batch sizes, width and depth held. A run
given in steps has ``D = steps × B``, so ``r_D = r_steps · r_B``.

* **lr** follows the optimizer's declared laws (:class:`~spectral.spec.Law`), else the
  defaults below.
* **weight decay** keeps each role's timescale ``τ = B/(η λ D)`` (Wang & Aitchison 2024,
  arXiv 2405.13698: the decoupled decay is an EMA of the updates over ``1/(ηλ)`` steps; in
  units of the run that is ``B/(ηλD)``) at the base's fraction of the run: with
  ``η ∝ r_D^h r_B^c`` this gives ``λ ∝ r_D^(-1-h) r_B^(1-c)``, so ``η λ D/B`` (``η λ`` times
  the number of steps) is the same at every horizon and batch.
* **ε** and **1 − β** (every momentum's) move only where the declaration says so
  (``eps_batch``, ``momentum_batch``); otherwise they are held, and the rule says so.
* the multiplier and the initial variance are held (they fix the model at step 0).

The exponents are exact fractions; nothing is fitted here. Where a default is carried over
from another optimizer or setting, the rule says "assumed".

>>> from spectral import derive
>>> [(a.hp, str(a.horizon), str(a.batch)) for a in derive("adamw").along("hidden_weight")]
[('lr', '-8/25', '1/2'), ('weight_decay', '-17/25', '1/2'), ('eps', '0', '-1/2'), ('momentum', '0', '1')]
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import sympy as sp

from ..errors import SpecError
from ..spec import Law, OptimizerSpec
from .degree import homogeneity

__all__ = [
    "ADAM_SDE",
    "AXIS_HPS",
    "MUON_HORIZON",
    "SGD_LINEAR",
    "AxisRule",
    "HORIZON",
    "LINEAR_BATCH",
    "SQRT_BATCH",
    "axis_rules",
    "laws",
]

HORIZON = Law(
    sp.Rational(-8, 25),
    "form LR*(D) ∝ D^-β: Bjorck et al. 2025 (arXiv 2409.19913); β = 0.32 as HyperP "
    "(arXiv 2603.28743) reports with Muon",
    assumed=True,
)
"""The default horizon law ``η ∝ (D/D₀)^(-8/25)``: the form of Bjorck et al.'s fit, the
exponent HyperP reports for Muon. An assumption for every optimizer that declares none."""

SQRT_BATCH = Law(
    sp.Rational(1, 2),
    "square-root rule, below the critical batch: Malladi et al. 2022 (arXiv 2205.10287), "
    "derived for Adam and RMSprop",
    assumed=True,
)
"""The default batch law of an update of degree 0 in the gradient (sign-like,
orthogonalised, normalised): ``η ∝ √(B/B₀)``, derived for Adam, assumed for the rest."""

LINEAR_BATCH = Law(
    sp.Integer(1),
    "linear rule, below the critical batch: Goyal et al. 2017 (arXiv 1706.02677); SGD's SDE, "
    "Malladi et al. 2022 (arXiv 2205.10287)",
    assumed=True,
)
"""The default batch law of an update of degree 1 in the gradient (SGD-like):
``η ∝ B/B₀``."""

ADAM_SDE = (
    Law(sp.Rational(1, 2), _MALLADI := "square-root SDE rule for Adam, below the critical "
        "batch: Malladi et al. 2022 (arXiv 2205.10287)"),
    Law(sp.Rational(-1, 2), _MALLADI),
    Law(sp.Integer(1), _MALLADI),
)
"""Adam's square-root scaling rule (Malladi et al. 2022, Def. of the square-root rule): with
``B → κB``, ``η → √κ η``, ``ε → ε/√κ``, ``1 - β₁ → κ(1 - β₁)``, ``1 - β₂ → κ(1 - β₂)``:
``(lr_batch, eps_batch, momentum_batch)`` for the Adam declarations."""

SGD_LINEAR = Law(
    sp.Integer(1),
    "linear rule, below the critical batch: Goyal et al. 2017 (arXiv 1706.02677); SGD's SDE, "
    "Malladi et al. 2022 (arXiv 2205.10287)",
)
"""SGD's own batch law, ``η ∝ B/B₀`` (momentum held)."""

MUON_HORIZON = Law(
    sp.Rational(-8, 25),
    "HyperP (arXiv 2603.28743): data exponent 0.32 measured with Muon; the form of Bjorck "
    "et al. 2025 (arXiv 2409.19913)",
)
"""The horizon law HyperP reports for Muon: ``η ∝ (D/D₀)^(-8/25)``."""

AXIS_HPS = ("lr", "weight_decay", "eps", "momentum")
"""The HPs a rule along the horizon and the batch moves, in order (``momentum``: ``1 - β``)."""

_TIMESCALE = (
    "keeps τ = B/(ηλD) at the base's fraction of the run (Wang & Aitchison 2024, "
    "arXiv 2405.13698)"
)


@dataclass(frozen=True)
class AxisRule:
    """One HP of one role along the horizon and the batch: ``base × r_D^horizon × r_B^batch``."""

    role: str
    hp: str
    horizon: Fraction
    batch: Fraction
    basis: str
    """Where the rule comes from, in one line ("held" where nothing moves it)."""

    def as_strings(self) -> dict[str, str]:
        return {"r_D": str(self.horizon), "r_B": str(self.batch), "basis": self.basis}

    def as_floats(self) -> tuple[float, float]:
        return float(self.horizon), float(self.batch)


def _fraction(e: sp.Rational) -> Fraction:
    return Fraction(int(e.p), int(e.q))


def _basis(law: Law) -> str:
    return ("assumed: " if law.assumed else "") + law.source


def laws(spec: OptimizerSpec) -> tuple[Law, Law | None]:
    """``(horizon law, batch law)`` of lr: the declared ones, else the defaults (the batch
    default by the update's degree in the gradient; ``None`` where no default applies).

    >>> from spectral.catalog import catalog
    >>> [str(laws(catalog()[n])[1].exponent) for n in ("sgd", "lion", "muon")]
    ['1', '1/2', '1/2']
    """
    horizon = spec.lr_horizon or HORIZON
    if spec.lr_batch is not None:
        return horizon, spec.lr_batch
    try:
        p, _ = homogeneity(spec)
    except SpecError:  # not homogeneous in G: no rule of thumb applies
        return horizon, None
    return horizon, {Fraction(0): SQRT_BATCH, Fraction(1): LINEAR_BATCH}.get(p)


def axis_rules(spec: OptimizerSpec, roles: tuple[str, ...]) -> tuple[AxisRule, ...]:
    """The rules along the horizon and the batch of every role, in :data:`AXIS_HPS` order."""
    horizon, batch = laws(spec)
    h = _fraction(horizon.exponent)
    c = Fraction(0) if batch is None else _fraction(batch.exponent)
    held = "held: no batch law applies (update not homogeneous in G)"
    lr_basis = f"D: {_basis(horizon)}; B: " + (held if batch is None else _basis(batch))
    per_role: list[tuple[str, Fraction, Fraction, str]] = [
        ("lr", h, c, lr_basis),
        ("weight_decay", -1 - h, 1 - c, _TIMESCALE),
    ]
    if spec.has_eps:
        e = spec.eps_batch
        per_role.append(
            ("eps", Fraction(0), Fraction(0), "held")
            if e is None
            else ("eps", Fraction(0), _fraction(e.exponent), f"B: {_basis(e)}")
        )
    m = spec.momentum_batch
    per_role.append(
        ("momentum", Fraction(0), Fraction(0), "held")
        if m is None
        else ("momentum", Fraction(0), _fraction(m.exponent), f"B: {_basis(m)}")
    )
    return tuple(AxisRule(r, hp, d, b, why) for r in roles for hp, d, b, why in per_role)
