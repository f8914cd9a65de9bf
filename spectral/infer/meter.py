"""The measurement: one parameter of a role's shape, stepped by the target on a fixed gradient.

:class:`Meter` builds the target on one tensor (the probe's shapes and μP-aligned init,
:mod:`spectral.measure.common`) and records ``‖ΔW‖_R / lr`` of each step, deterministically;
:func:`rms_norm` is the probe's RMS→RMS operator norm by power iteration (much cheaper
than an SVD here). torch is imported inside functions.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import BadStep, SpecError, StepFailed, first_line
from ..measure.guard import DEFAULT_TIMEOUT, user_code
from ..measure.common import SHAPES, mup_init
from .protocol import NOISE
from .target import Target

__all__ = ["HUGE", "BadStep", "Meter", "StepFailed", "rms_norm"]

HUGE = 1e100
"""A step larger than this (per unit of lr) is reported as an overflow, not measured."""


def _spectral_norm(m, torch) -> float:
    """``‖m‖_2`` of a float64 matrix by power iteration on ``mᵀm``: the same number as
    :func:`spectral.measure.probe.rms_operator_norm`'s SVD to well under 1%, at a fraction of its
    cost on this 2-core machine (a 512 × 512 SVD takes 0.1–1 s here, 60 iterations ~10 ms)."""
    rows, cols = m.shape
    small = m if cols <= rows else m.T
    gram = small.T @ small  # the smaller Gram matrix
    v = torch.ones(gram.shape[0], dtype=gram.dtype) + torch.linspace(0, 1, gram.shape[0], dtype=gram.dtype)
    value = 0.0
    for i in range(200):
        w = gram @ v
        norm = float(w.norm())
        if norm == 0.0:
            return 0.0
        v = w / norm
        if i >= 8 and abs(norm - value) <= 1e-10 * norm:
            break
        value = norm
    return math.sqrt(float(v @ (gram @ v)))


def rms_norm(delta, torch) -> float:
    """``sqrt(n_in/n_out)·‖Δ‖_2``; a vector of length ``n`` is an ``n × 1`` matrix
    (the definition of :func:`spectral.measure.probe.rms_operator_norm`)."""
    d = delta.detach().to(torch.float64)
    if d.ndim == 1:
        return float(d.norm() / math.sqrt(d.numel()))
    n_out, n_in = d.shape
    return math.sqrt(n_in / n_out) * _spectral_norm(d, torch)


class Meter:
    """Builds the target on one parameter and steps it; every run is deterministic."""

    def __init__(self, target: Target, d0: int, warmup: int, timeout: float | None = DEFAULT_TIMEOUT):
        import torch

        self.torch = torch
        self.target = target
        self.d0 = d0
        self.warmup = warmup
        self.timeout = timeout
        self.runs = 0
        self._cache: dict[tuple, tuple] = {}

    def tensors(self, role: str, width: int, seed: int, rank: int):
        """Initial weights (the probe's μP-aligned init) and the gradient for one run, cached
        (many runs share them)."""
        key = (role, width, seed, rank)
        if key not in self._cache:
            torch = self.torch
            shape = SHAPES[role][1](width, self.d0)
            gen = torch.Generator().manual_seed(seed * 1_000_003 + width)  # the probe's seeds
            w0 = mup_init(shape, gen, torch).to(torch.float64)
            self._cache[key] = (w0, _gradient(shape, rank, seed, torch))
        return self._cache[key]

    def steps(
        self,
        role: str,
        width: int,
        *,
        seed: int = 0,
        rank: int = 1,
        g: float = 1.0,
        w_scale: float = 1.0,
        lr_scale: float = 1.0,
        eps: tuple[str, int | None, Any] | None = None,
        count: int | None = None,
    ) -> list[float]:
        """``‖ΔW‖_R / lr`` of each of ``warmup + 1`` steps (or ``count``) on one fixed gradient."""
        torch = self.torch
        w0, grad = self.tensors(role, width, seed, rank)
        p = torch.nn.Parameter(w0 * w_scale)
        grad = grad * g
        lr = self.target.lr * lr_scale
        with user_code(f"{self.target.label} (n = {width}, {SHAPES[role][0]})", self.timeout):
            try:
                opt = self.target.build([p], lr, eps)
            except SpecError as exc:
                if p.ndim == 1:  # a matrix-only optimizer refusing a bias
                    raise StepFailed(str(exc).split(" raised ", 1)[-1]) from None
                raise
            out = []
            self.runs += 1
            for i in range(count or self.warmup + 1):
                before = p.detach().clone()
                p.grad = grad.clone()  # some implementations modify the gradient in place
                try:
                    if self.target.hessian:
                        opt.step(hessian=[grad * grad])
                    else:
                        opt.step()
                except SpecError:
                    raise
                except Exception as exc:
                    raise StepFailed(first_line(exc)) from None
                out.append(self._norm(p, before, lr, role, width, i))
        if count is None and out[self.warmup] == 0.0:
            raise BadStep(
                f"{self.target.label}: the measured step (step {self.warmup + 1}) on the "
                f"{SHAPES[role][0]} tensor (n = {width}) is exactly zero: the optimizer made no "
                f"update after {self.warmup} warm-up steps (raise --warmup?)"
            )
        return out

    def _norm(self, p, before, lr: float, role: str, width: int, step: int) -> float:
        """``‖ΔW‖_R / lr`` of one step; a step that is not a finite number is named as such
        (:class:`BadStep`) instead of reaching the fit as ``nan`` or ``log(0)``."""
        torch = self.torch
        delta = p.detach().to(torch.float64) - before.to(torch.float64)
        where = f"{self.target.label}: step {step + 1} on the {SHAPES[role][0]} tensor (n = {width})"
        if not bool(torch.isfinite(p.detach()).all()):
            bad = "NaN" if bool(torch.isnan(p.detach()).any()) else "inf"
            raise BadStep(f"{where} made the weights {bad}")
        value = rms_norm(delta, torch) / lr
        if not math.isfinite(value):
            raise BadStep(f"{where} is too large to measure: its norm overflows float64")
        if value > HUGE:
            raise BadStep(f"{where} is too large to measure: ‖ΔW‖_R/lr = {value:.3g}, above {HUGE:g}")
        return value

    def measured(self, role: str, width: int, **kw) -> float:
        return self.steps(role, width, **kw)[self.warmup]


def _draw(length: int, seed: int, tag: int, torch):
    """A unit Gaussian vector that depends on (length, seed, tag) only: the ``d0``-long
    factors of the input and output gradients are the same draw at every width, so a fit
    over widths sees the width and not a new sample of 32 numbers."""
    gen = torch.Generator().manual_seed(((seed * 7919 + tag) * 100_003 + length) % (2**62))
    v = torch.randn(length, generator=gen, dtype=torch.float64)
    return v / v.norm()


def _gradient(shape: tuple[int, ...], rank: int, seed: int, torch):
    """The probe's gradient recipe — rank ``rank`` with singular values 1, 1/2, 1/4, … plus
    Gaussian noise of spectral norm ≈ :data:`NOISE` — scaled to spectral norm exactly 1."""
    if len(shape) == 1:
        (n,) = shape
        g = _draw(n, seed, 1, torch) + NOISE * _draw(n, seed, 2, torch)
        return g / g.norm()
    m, k = shape
    g = torch.zeros(m, k, dtype=torch.float64)
    for i in range(rank):
        g += 0.5**i * torch.outer(_draw(m, seed, 10 + 2 * i, torch), _draw(k, seed, 11 + 2 * i, torch))
    gen = torch.Generator().manual_seed(seed * 1_000_003 + m * 1009 + k)
    z = torch.randn(m, k, generator=gen, dtype=torch.float64)
    g += NOISE * z / (math.sqrt(m) + math.sqrt(k))
    return g / _spectral_norm(g, torch)


