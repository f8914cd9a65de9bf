"""Measure a real optimizer's update size and compare its width exponent with the declaration.

For each role's shape (input ``n × d0``, hidden ``n × n``, output ``d0 × n``; biases ``n``
for optimizers that apply to vectors) and each width ``n``, one step of the real
implementation is taken with unit learning rate and no weight decay on a realistic low-rank
gradient (a rank-2 outer product plus small Gaussian noise, scaled to ``‖∇W‖_2 = 1``). The
RMS→RMS operator norm of the step,

    ‖ΔW‖_R = sqrt(n_in / n_out) · ‖ΔW‖_2        (a bias is an ``n × 1`` matrix),

is fitted against ``n`` on log–log axes; its slope is the *measured* exponent. The
*declared* exponent is the Θ-exponent in ``n`` of the optimizer's ``update_norm`` with each
role's ``n_in``/``n_out`` (``d0 = Θ(1)``), ``L = Θ(1)`` and ``G = ‖∇W‖_2 = 1`` (which is
what the probe feeds in). A mismatch larger than
:data:`~spectral.measure.fit.SLOPE_TOLERANCE_PROBE` is a failure.

Declarations that use ``G`` (SGD) are exercised here only at ``G = 1``; the scale of ``G``
in a real network comes from the loss-sensitivity argument, and the coordinate check
(``spectral coord-check``) is their real test.

The implementations are the ones the code generator uses (each optimizer file's ``TORCH.cls``,
set up as its ``PROBE`` record says; :data:`PROBE_BUILDERS`):
``torch.optim`` SGD, Adam, AdamW, NAdam, RAdam, Adafactor and Muon (``adjust_lr_fn=None``
for ``muon``, ``"match_rms_adamw"`` for ``muon-kimi``) and ``pytorch_optimizer`` Lion,
Shampoo, SOAP, SophiaH, SpectralSphere, Lamb, SignSGD, SCION, ADOPT, ScheduleFreeAdamW,
Adan, MARS and NorMuon. Any other optimizer
(a declaration from a spec file, or a catalog one with another implementation) is probed
through a *factory* ``fn(param_groups, **kwargs) -> torch.optim.Optimizer`` — the contract of
the generated module's ``build_optimizers(..., factories={name: fn})`` — called with one
group ``{"params": [W], "lr": 1.0, "weight_decay": 0.0}`` (:meth:`Impl.from_factory`).
Everything that imports torch is imported inside functions.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import SpecError, first_line
from .guard import DEFAULT_TIMEOUT, user_code
from .common import (
    D0,
    SHAPES,
    checked_factory,
    factory_label,
    mup_init,
    rms_operator_norm,
)
from .fit import SLOPE_TOLERANCE_PROBE, log_slope, loggable, within
from ..spec import OptimizerSpec

__all__ = [
    "DEFAULT_WIDTHS",
    "PROBE_BUILDERS",
    "ProbeRow",
    "ProbeResult",
    "Impl",
    "checked_factory",
    "declared_exponent",
    "probe",
    "rms_operator_norm",
]

DEFAULT_WIDTHS = (64, 128, 256, 512, 1024)


@dataclass(frozen=True)
class Impl:
    """How to build and step the real implementation of one catalog optimizer."""

    name: str
    """Human-readable class and arguments."""
    build: Callable[[list, Any], Any]
    steps: int = 1
    """Steps taken with the same gradient; the change made by the *last* one is measured."""
    note: str = ""
    hessian: bool = False
    """SophiaH: pass a diagonal Hessian estimate ``g ⊙ g`` to ``step``."""
    user: bool = False
    """A user's factory: failures of ``step`` are reported as :class:`SpecError`."""
    init: Callable[..., Any] | None = None
    """``init(shape, gen, torch)`` replacing the μP-aligned init (LAMB: ``‖W‖_F = 1``)."""

    @classmethod
    def from_factory(cls, factory: Callable[..., Any], name: str | None = None) -> Impl:
        """A user's ``factory(param_groups, **kwargs)``, called as the generated module calls
        it: one group carrying the probe's unit lr and zero weight decay, no kwargs."""
        label = name or factory_label(factory)
        fn = checked_factory(factory, label)

        def build(params: list, torch: Any) -> Any:
            return fn([{"params": params, "lr": 1.0, "weight_decay": 0.0}])

        return cls(label, build, user=True)


def _unit_sphere(shape: tuple[int, ...], gen: Any, torch: Any) -> Any:
    """LAMB's probe init: ``‖W‖_F = 1``, so the trust ratio's numerator ``φ(‖W‖_F)`` is 1."""
    w = torch.randn(shape, generator=gen, dtype=torch.float64)
    return (w / w.norm()).float()


_INITS: dict[str, Callable[..., Any]] = {"unit-sphere": _unit_sphere}
"""``ProbeSetup.init`` name → ``init(shape, gen, torch)``."""


def _from_setup(cls_path: str, setup: Any) -> Impl:
    """The probe's :class:`Impl` of a catalog optimizer: its ``TORCH.cls`` built as its
    ``PROBE`` record says (one group, lr 1, no weight decay, the record's kwargs)."""

    def build(params: list, torch: Any) -> Any:
        import importlib

        module, _, name = cls_path.rpartition(".")
        cls = getattr(importlib.import_module(module), name)
        group = {"params": params, **setup.group_keys}
        return cls([group], lr=1.0, weight_decay=0.0, **setup.kwargs)

    init = None if setup.init is None else _INITS[setup.init]
    return Impl(setup.label, build, setup.steps, setup.note, setup.hessian, init=init)


class _Builders(Mapping[str, Impl]):
    """Catalog optimizer → :class:`Impl`, from each optimizer file's ``TORCH`` and ``PROBE``
    records; the files are read when first asked."""

    @functools.cached_property
    def _table(self) -> dict[str, Impl]:
        from ..catalog import modules

        return {m.SPEC.name: _from_setup(m.TORCH.cls, m.PROBE) for m in modules()}

    def __getitem__(self, name: str) -> Impl:
        return self._table[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)


PROBE_BUILDERS: Mapping[str, Impl] = _Builders()
"""Catalog optimizer → how the probe builds and steps its real implementation."""


@dataclass(frozen=True)
class ProbeRow:
    role: str
    shape: str
    """Shape as ``n_out × n_in`` in terms of ``n`` and ``d0``."""
    declared: float
    measured: float
    passed: bool
    norms: tuple[float, ...]
    """``‖ΔW‖_R`` at each width."""
    uses_G: bool = False
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "shape": self.shape,
            "declared": self.declared,
            "measured": self.measured,
            "pass": self.passed,
            "norms": list(self.norms),
            "uses_G": self.uses_G,
            "note": self.note,
        }


@dataclass(frozen=True)
class ProbeResult:
    optimizer: str
    implementation: str
    widths: tuple[int, ...]
    d0: int
    seeds: int
    rank: int
    noise: float
    rows: tuple[ProbeRow, ...]
    notes: tuple[str, ...] = field(default=())
    dtype: str = "float32"

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.rows)

    def to_dict(self) -> dict[str, Any]:
        return {
            "optimizer": self.optimizer,
            "implementation": self.implementation,
            "widths": list(self.widths),
            "d0": self.d0,
            "seeds": self.seeds,
            "dtype": self.dtype,
            "gradient": {"rank": self.rank, "noise": self.noise, "spectral_norm": 1.0},
            "tolerance": SLOPE_TOLERANCE_PROBE,
            "pass": self.passed,
            "rows": [r.to_dict() for r in self.rows],
            "notes": list(self.notes),
        }


def declared_exponent(optimizer: str | OptimizerSpec, role_name: str) -> tuple[float, bool]:
    """Θ-exponent in ``n`` of ``update_norm`` for ``role_name`` (``L = 1``, ``G = 1``).

    Returns ``(exponent, uses_G)``.
    """
    from ..catalog import resolve
    from ..engine.expr import theta_of
    from ..engine.roles import role
    from ..symbols import G, L, n_in, n_out
    from ..engine.theta import Theta

    spec = resolve(optimizer)
    r = role(role_name)
    env = ((n_in, r.n_in), (n_out, r.n_out), (L, Theta.one()), (G, Theta.one()))
    value = theta_of(spec.update_norm, env)
    a, _ = value.exponents
    return float(a), G in spec.update_norm.free_symbols


def roles_for(optimizer: str | OptimizerSpec) -> tuple[str, ...]:
    from ..catalog import resolve
    from ..engine.roles import ROLES

    spec = resolve(optimizer)
    # One measurement per shape: the update direction depends on the dimensions alone, so a
    # role with an earlier role's (n_in, n_out) — the router, E × n like the output
    # weight — is measured there (its declared exponent at L = 1, G = 1 is the same).
    out: list[str] = []
    shapes = set()
    for r in ROLES:
        if not (spec.applies_to_biases or not r.is_bias):
            continue
        if r.gate and (r.n_in, r.n_out) in shapes:
            continue
        shapes.add((r.n_in, r.n_out))
        out.append(r.name)
    return tuple(out)


def _gradient(shape: tuple[int, ...], rank: int, noise: float, gen, torch) -> Any:
    """Rank-``rank`` outer product (singular values 1, 1/2, 1/4, …) plus Gaussian noise of
    spectral norm ≈ ``noise``, scaled to spectral norm 1."""
    if len(shape) == 1:
        (n,) = shape
        g = torch.randn(n, generator=gen, dtype=torch.float64)
        g = g / g.norm() + noise * torch.randn(n, generator=gen, dtype=torch.float64) / math.sqrt(n)
        return (g / g.norm()).float()
    m, k = shape
    g = torch.zeros(m, k, dtype=torch.float64)
    for i in range(rank):
        u = torch.randn(m, generator=gen, dtype=torch.float64)
        v = torch.randn(k, generator=gen, dtype=torch.float64)
        g += 0.5**i * torch.outer(u / u.norm(), v / v.norm())
    z = torch.randn(m, k, generator=gen, dtype=torch.float64)
    g += noise * z / (math.sqrt(m) + math.sqrt(k))
    return (g / torch.linalg.matrix_norm(g, ord=2)).float()


def measure(
    optimizer: str | Impl,
    role_name: str,
    width: int,
    *,
    d0: int = D0,
    seed: int = 0,
    rank: int = 2,
    noise: float = 1e-3,
    device: str = "cpu",
    dtype: str = "float32",
) -> float:
    """``‖ΔW‖_R`` of one real step (the last of ``Impl.steps``) for one role and width.

    ``optimizer``: a name in :data:`PROBE_BUILDERS`, or an :class:`Impl`."""
    import torch

    impl = optimizer if isinstance(optimizer, Impl) else PROBE_BUILDERS[optimizer]
    shape = SHAPES[role_name][1](width, d0)
    gen = torch.Generator().manual_seed(seed * 1_000_003 + width)
    dt = getattr(torch, dtype)
    w0 = impl.init(shape, gen, torch) if impl.init else mup_init(shape, gen, torch)
    p = torch.nn.Parameter(w0.to(device=device, dtype=dt))
    grad = _gradient(shape, rank, noise, gen, torch).to(device=device, dtype=dt)
    opt = impl.build([p], torch)
    before = p.detach().clone()
    for _ in range(impl.steps):
        before = p.detach().clone()
        p.grad = grad.clone()  # some implementations modify the gradient in place
        try:
            if impl.hessian:
                opt.step(hessian=[grad * grad])
            else:
                opt.step()
        except Exception as exc:
            if not impl.user:
                raise
            raise SpecError(
                f"{impl.name}: step() of {type(opt).__name__} raised {first_line(exc)}"
            ) from None
    delta = p.detach() - before
    if not bool(torch.isfinite(p.detach()).all()):  # an SVD of NaNs raises: name it instead
        return math.nan if bool(torch.isnan(p.detach()).any()) else math.inf
    return rms_operator_norm(delta, torch)


def _bad_step(value: float, width: int) -> str:
    """What is wrong with a measured ``‖ΔW‖_R`` that is not a measurement ('' if nothing)."""
    if math.isnan(value):
        return f"the step made the weights NaN at n = {width}"
    if math.isinf(value) or value > HUGE_STEP:
        return f"the step overflows at n = {width} (‖ΔW‖_R = {value:.3g})"
    if value == 0.0:
        return f"the step is exactly zero at n = {width} (no update)"
    return ""


HUGE_STEP = 1e100
"""A ``‖ΔW‖_R`` above this is reported as an overflow, not fitted."""


def probe(
    optimizer: str | OptimizerSpec,
    *,
    factory: Callable[..., Any] | None = None,
    widths: Sequence[int] = DEFAULT_WIDTHS,
    d0: int = D0,
    seeds: int = 1,
    rank: int = 2,
    noise: float = 1e-3,
    device: str = "cpu",
    dtype: str = "float32",
    progress: Callable[[str], None] | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> ProbeResult:
    """Measure every role of ``optimizer`` at every width; fit and compare exponents.

    ``optimizer`` is a catalog name or a declaration (e.g. from
    :func:`spectral.engine.spec_file.load_spec`); its ``update_norm`` gives the declared exponents.
    ``factory(param_groups, **kwargs)`` builds the implementation measured (see
    :meth:`Impl.from_factory`); without one the optimizer's name must be in
    :data:`PROBE_BUILDERS`. ``timeout``: seconds one measurement (one build and its steps)
    may take (:func:`spectral.measure.guard.user_code`). A step that is NaN, inf, overflowing or
    exactly zero fails its row, and the note says which.
    """
    from ..catalog import resolve

    spec = resolve(optimizer)
    if factory is not None:
        impl = factory if isinstance(factory, Impl) else Impl.from_factory(factory)
    elif spec.name in PROBE_BUILDERS:
        impl = PROBE_BUILDERS[spec.name]
    else:
        raise SpecError(
            f"no torch / pytorch-optimizer implementation is wired up for {spec.name!r}; "
            f"probe-able: {', '.join(PROBE_BUILDERS)}; for any other optimizer pass a factory "
            "fn(param_groups, **kwargs) (spectral probe --factory MODULE:CALLABLE)"
        )
    widths = tuple(sorted(int(w) for w in widths))
    if len(widths) < 2 or widths[0] <= d0:
        raise SpecError(f"need at least two widths, all larger than d0 = {d0}; got {widths}")
    rows = []
    for role_name in roles_for(spec):
        norms = []
        bad = ""
        for w in widths:
            vals = []
            for s in range(seeds):
                with user_code(f"{impl.name} ({role_name}, n = {w})", timeout):
                    vals.append(
                        measure(
                            impl, role_name, w, d0=d0, seed=s, rank=rank, noise=noise,
                            device=device, dtype=dtype,
                        )
                    )
            bad = bad or next((b for b in (_bad_step(v, w) for v in vals) if b), "")
            norms.append(math.exp(sum(math.log(max(v, 1e-300)) for v in vals) / len(vals)))
            if progress:
                progress(f"{spec.name} {role_name} n={w}")
        slope = log_slope(*loggable(widths, norms))  # a NaN or overflowing step left out
        measured = math.nan if slope is None else slope
        declared, uses_g = declared_exponent(spec, role_name)
        ok = within(measured, declared, SLOPE_TOLERANCE_PROBE) and not bad
        note = ""
        if uses_g:
            note = "declaration uses G; measured at G = ‖∇W‖_2 = 1 — the coordinate check is its real test"
        if bad:
            note = (note + "; " if note else "") + f"NOT MEASURED: {bad}"
        elif not ok:
            note = (note + "; " if note else "") + (
                f"MISMATCH: measured n^{measured:+.2f}, declared n^{declared:+.2f}"
            )
        rows.append(
            ProbeRow(
                role_name, SHAPES[role_name][0], declared, measured, ok, tuple(norms), uses_g, note
            )
        )
    notes = (impl.note,) if impl.note else ()
    return ProbeResult(
        spec.name, impl.name, widths, d0, seeds, rank, noise, tuple(rows), notes, dtype
    )
