"""The sweep along the training horizon and the batch, at one width: its plan (pure).

``spectral sweep --steps 100,200,400,800`` (the horizon) or ``--batch-sizes 4,8,16,32``
(the batch, at the base's token horizon: ``steps × batch`` held) trains, at one size
(``--base-width`` × ``--base-depth``), μP over the ``--log2-lrs`` grid at every point and seed. The base
point is ``--base-steps`` (default: the smallest of ``--steps``) and ``--batch-size``.

Per point and seed the optimal log2 η is the vertex of the parabola through the grid's best
point and its neighbours (:func:`spectral.sweep.exponent.optimum`); the least-squares slope
of it against ``log2 r`` (``r = D/D₀`` along the horizon, ``B/B₀`` along the batch) is the
measured exponent of η, with its 95 % interval, beside the optimizer's declared law
(:mod:`spectral.engine.axes`).

The regret arms: at every point, the base-optimal η (the grid point :func:`spectral.sweep.tune.choose`
picks at the base point) and the base λ **unchanged** (a grid run), against the **rules**:
that η times ``r_D^h r_B^c`` and λ times ``r_D^(-1-h) r_B^(1-c)`` (the timescale τ = B/(ηλD)
held), one run per point and seed. ε and the betas are held in both arms (the sweep's
optimizers take no ``batch=``; ε = 1e-16 moves nothing).

``--together`` pairs ``--widths`` with ``--steps`` one to one (e.g. ``--widths 32,128 --steps
100,400``: 4x the width with 4x the steps): the axis ``together`` moves width and horizon at once,
the first pair the base. μP carries η and λ along the width in both arms, so the **unchanged**
arm is width-only transfer (the base's η and λ through the width rules alone) and the **rules**
arm adds the horizon laws on top (η × r_D^h, λ × r_D^(-1-h)).

Nothing here imports torch or trains: :mod:`spectral.sweep.along_run` trains what this plans.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from ..errors import SpecError
from .options import SweepConfig, split_optimizer

__all__ = [
    "AXES",
    "Along",
    "Laws",
    "grid_configs",
    "optimizer_laws",
    "point_config",
    "rule_config",
]

AXES = ("horizon", "batch", "together")


@dataclass(frozen=True)
class Along:
    """One axis of the sweep: its points (steps along the horizon and together, batch sizes
    along the batch) and the base run (steps, batch); ``together``: each point's width too."""

    axis: str
    values: tuple[int, ...]
    base_steps: int
    base_batch: int
    widths: tuple[int, ...] = ()
    """``together`` only: the width paired with each of ``values`` (the first pair the base)."""

    def width(self, value: int, base_width: int) -> int:
        """The width of the run at one point: the paired one together, else the base's."""
        if self.axis != "together":
            return base_width
        return self.widths[self.values.index(value)]

    @property
    def base_value(self) -> int:
        return self.base_batch if self.axis == "batch" else self.base_steps

    def steps_batch(self, value: int) -> tuple[int, int]:
        """The run at one point: (steps, batch). Along the batch the tokens are the base's."""
        if self.axis != "batch":
            return value, self.base_batch
        steps, rest = divmod(self.base_steps * self.base_batch, value)
        if rest or steps < 1:
            raise SpecError(f"--batch-sizes: {value} does not divide the base's {self.base_steps} steps × "
                            f"batch {self.base_batch} (the batch axis keeps the tokens)")
        return steps, value

    def ratios(self, value: int) -> tuple[Fraction, Fraction]:
        """``(r_D, r_B)`` at one point: tokens and batch over the base's."""
        steps, batch = self.steps_batch(value)
        return Fraction(steps * batch, self.base_steps * self.base_batch), Fraction(batch, self.base_batch)

    def ratio(self, value: int) -> Fraction:
        """The ratio the fit is against: ``r_D`` along the horizon, ``r_B`` along the batch."""
        r_d, r_b = self.ratios(value)
        return r_b if self.axis == "batch" else r_d


@dataclass(frozen=True)
class Laws:
    """The lr laws of one sweep optimizer (a hybrid's parts must agree): η ∝ r_D^h r_B^c."""

    horizon: Fraction
    batch: Fraction
    assumed: tuple[str, ...]
    """``horizon`` / ``batch`` where some part's law is an assumption, not a declaration."""

    def expected(self, axis: str) -> Fraction:
        """The exponent of η against the axis's ratio (along the batch ``r_D = 1``; together, μP
        carries η along the width, so the grid's base η follows the horizon law)."""
        return self.batch if axis == "batch" else self.horizon

    def factors(self, r_d: Fraction, r_b: Fraction) -> tuple[float, float]:
        """``(η factor, λ factor)`` of the rules at ``(r_D, r_B)``: η × r_D^h r_B^c, and λ
        keeping ``η λ D / B``: × r_D^(-1-h) r_B^(1-c)."""
        lr = float(r_d) ** float(self.horizon) * float(r_b) ** float(self.batch)
        wd = float(r_d) ** float(-1 - self.horizon) * float(r_b) ** float(1 - self.batch)
        return lr, wd


def optimizer_laws(optimizer: str) -> Laws:
    """The lr laws of a sweep optimizer, from its declarations (the defaults where none)."""
    from ..catalog import resolve  # the derivation engine: only when planning
    from ..engine.axes import laws
    from .muon_scale import engine_optimizer

    names = list(dict.fromkeys(split_optimizer(optimizer)))
    found = []
    for name in names:
        h, b = laws(resolve(engine_optimizer(name)))
        if b is None:
            raise SpecError(f"{name}: no batch law (its update is not homogeneous in the gradient)")
        found.append((Fraction(int(h.exponent.p), int(h.exponent.q)), Fraction(int(b.exponent.p), int(b.exponent.q)),
                      h.assumed, b.assumed))
    if len({(h, c) for h, c, _, _ in found}) > 1:
        raise SpecError(f"{optimizer}: its optimizers' lr laws differ; the sweep moves one η and one λ")
    h, c, _, _ = found[0]
    assumed = tuple(a for a, flag in (("horizon", any(f[2] for f in found)), ("batch", any(f[3] for f in found)))
                    if flag)
    return Laws(h, c, assumed)


def point_config(cfg: SweepConfig, along: Along, value: int, seed: int) -> SweepConfig:
    """μP at one point of the axis, at the base size (``--base-width`` × ``--base-depth``: every
    width and depth ratio 1; together: the point's width, its ratio to the base's), one seed, over
    ``cfg``'s η grid."""
    steps, batch = along.steps_batch(value)
    n, L = along.width(value, cfg.base_width), cfg.base_depth
    return replace(cfg, parameterizations=("mup",), widths=(n,), width=n, depth=L, depths=(L,),
                   steps=steps, batch_size=batch, seed=seed)


def grid_configs(cfg: SweepConfig, along: Along, seeds: Sequence[int]) -> list[tuple[int, int, SweepConfig]]:
    """``(value, seed, config)`` of the η grid at every point, base point first."""
    order = sorted(along.values, key=lambda v: (v != along.base_value, v))
    return [(v, s, point_config(cfg, along, v, s)) for v in order for s in seeds]


def rule_config(cfg: SweepConfig, along: Along, value: int, seed: int, log2_lr: int, laws: Laws) -> SweepConfig:
    """The rules' arm at one point: the base-optimal η (``2^log2_lr``) and the base λ moved by
    the laws (η through ``--lr-scale``'s ``default`` factor, times any factor already set)."""
    c = point_config(cfg, along, value, seed)
    f_lr, f_wd = laws.factors(*along.ratios(value))
    scale: dict[str, Any] = dict(cfg.lr_scale or {})
    scale = {k: v * f_lr for k, v in scale.items()} | {"default": scale.get("default", 1.0) * f_lr}
    return replace(c, log2_lrs=(log2_lr,), lr_scale=scale, weight_decay=cfg.weight_decay * f_wd)
