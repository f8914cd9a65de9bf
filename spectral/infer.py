"""Infer an optimizer's declaration from its real implementation: ``spectral infer``.

The probe (:mod:`spectral.probe`) checks a declaration against an implementation; this
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
"""

from __future__ import annotations

import inspect
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from .errors import SpecError, first_line
from .probe import D0, _SHAPES

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
FLOOR = 0.03
"""Smallest half-width of an exponent's interval."""
MAX_DENOMINATOR = 4
"""Exponents are rounded to ``p/q`` with ``q ≤ 4`` (and only inside their interval)."""
EPS_MAX_WIDTH = 256
"""ε* is searched at widths up to this (at least three): a matrix-root optimizer's step at
512 costs about a second here, and ε* needs about seven runs per point."""
MAX_HALF_WIDTH = 0.25
"""An exponent whose interval is wider than ±0.25 is too uncertain to round."""
TOLERANCE = 0.1
"""Largest exponent a check tolerates: of ``‖ΔW‖`` in a weight scale, in the lr beyond
proportionality, of the step-to-step change in ``n``."""
PROBE_FACTOR = 4.0
"""Factor by which ``W`` and the lr are scaled for the weight and lr checks."""
INERT = 1e-6
"""An ε whose ×10^±3 changes move ``log ‖ΔW‖`` by less than this is inert (a guard)."""
HALF = math.log(2.0)
"""ε* is where ``|log(‖ΔW(ε)‖ / ‖ΔW(ε→0)‖)|`` reaches log 2."""
_T975 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26}


# --------------------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------------------


def round_exponent(value: float, low: float, high: float) -> Fraction | None:
    """The fraction ``p/q`` (``q ≤ MAX_DENOMINATOR``) in ``[low, high]`` nearest ``value``.

    The simplest such fraction wins (smallest denominator, then nearest): an interval that
    holds both ``-1/2`` and ``-1/3`` is not evidence for thirds. ``None`` when no such
    fraction lies in the interval.

    >>> round_exponent(0.49, 0.45, 0.53)
    Fraction(1, 2)
    >>> round_exponent(-0.38, -0.59, -0.18)
    Fraction(-1, 2)
    >>> round_exponent(0.37, 0.35, 0.39) is None
    True
    >>> round_exponent(0.5, 0.1, 0.9) is None  # wider than ±0.25: too uncertain
    True
    """
    if not all(math.isfinite(x) for x in (value, low, high)) or high - low > 2 * MAX_HALF_WIDTH:
        return None
    best: tuple[int, float, Fraction] | None = None
    for q in range(1, MAX_DENOMINATOR + 1):
        for p in range(math.ceil(low * q - 1e-12), math.floor(high * q + 1e-12) + 1):
            f = Fraction(p, q)
            key = (f.denominator, abs(float(f) - value), f)
            if best is None or key[:2] < best[:2]:
                best = key
    return None if best is None else best[2]


@dataclass(frozen=True)
class Exponent:
    """A fitted exponent, its interval, and its rounding (``None``: no small fraction fits)."""

    value: float
    low: float
    high: float

    @property
    def rounded(self) -> Fraction | None:
        return round_exponent(self.value, self.low, self.high)

    def text(self) -> str:
        r = self.rounded
        shown = "—" if r is None else str(r)
        return f"{self.value:+.3f} [{self.low:+.3f}, {self.high:+.3f}] → {shown}"

    def to_dict(self) -> dict[str, Any]:
        r = self.rounded
        return {
            "value": round(self.value, 6),
            "interval": [round(self.low, 6), round(self.high, 6)],
            "rounded": None if r is None else str(r),
        }


@dataclass(frozen=True)
class RoleFit:
    """What one role's measurements say."""

    role: str
    shape: str
    width: Exponent
    """Exponent of ``‖ΔW‖_R / lr`` in ``n``."""
    G: Exponent
    """Exponent of ``‖ΔW‖_R / lr`` in ``G = ‖∇W‖_2``."""
    norms: tuple[float, ...]
    """``‖ΔW‖_R / lr`` at each width (geometric mean over seeds and ranks, ``G = 1``)."""
    weight: float
    """Exponent of ``‖ΔW‖_R`` in a factor on ``W`` (0 when the step ignores the weights)."""
    lr: float
    """Exponent of ``‖ΔW‖_R / lr`` in the lr (0 when the step is proportional to it)."""
    schedule: float
    """Exponent in ``n`` of the change from the last warm-up step to the measured one."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "shape": self.shape,
            "n": self.width.to_dict(),
            "G": self.G.to_dict(),
            "norms": [float(f"{x:.6g}") for x in self.norms],
            "weight_exponent": round(self.weight, 4),
            "lr_exponent": round(self.lr, 4),
            "schedule_exponent": round(self.schedule, 4),
        }


@dataclass(frozen=True)
class EpsFit:
    """The implementation's ε: where it sits, whether it acts, and its fitted scale."""

    key: str
    index: int | None
    default: Any
    active: bool
    why: str
    """One line: how it was classified (inert guard, growing step, declared)."""
    roles: dict[str, Exponent] = field(default_factory=dict)
    """Role → exponent in ``n`` of ``ε*`` (``G = 1``)."""
    G: Exponent | None = None
    thresholds: dict[str, tuple[float, ...]] = field(default_factory=dict)
    """Role → ``ε*`` at each of :attr:`widths`."""
    expression: str | None = None
    widths: tuple[int, ...] = ()

    @property
    def place(self) -> str:
        return self.key if self.index is None else f"{self.key}[{self.index}]"

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "index": self.index,
            "default": _jsonable(self.default),
            "declared": self.expression is not None,
            "why": self.why,
            "n": {r: e.to_dict() for r, e in self.roles.items()},
            "G": None if self.G is None else self.G.to_dict(),
            "thresholds": {r: [float(f"{x:.4g}") for x in v] for r, v in self.thresholds.items()},
            "widths": list(self.widths),
            "expression": self.expression,
        }


@dataclass(frozen=True)
class Inference:
    """The result of :func:`infer`: the fits, the checks, and the declaration if one fits."""

    target: str
    kwargs: dict[str, Any]
    group: dict[str, Any]
    lr: float
    widths: tuple[int, ...]
    d0: int
    warmup: int
    roles: tuple[RoleFit, ...]
    bias_roles: tuple[str, ...]
    """Bias roles measured (empty when the implementation refuses 1-D parameters)."""
    applies_to: str
    update_norm: str | None
    """The emitted expression (``None`` when no single declaration fits)."""
    exponents: dict[str, str]
    """``a``, ``b``, ``c``, ``g`` of the emitted expression."""
    eps: EpsFit | None
    problems: tuple[str, ...]
    """Why no single declaration fits (empty when one does)."""
    notes: tuple[str, ...]
    seconds: float
    name: str
    dtype: str = "float64"

    @property
    def fits(self) -> bool:
        return not self.problems and self.update_norm is not None

    def spec(self):
        """The :class:`~spectral.spec.OptimizerSpec` of the emitted declaration."""
        from .spec_file import parse_spec

        if not self.fits:
            raise SpecError(f"{self.target}: no single declaration fits")
        return parse_spec(self.toml_fields(), where=f"infer {self.target}")

    def toml_fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "update_norm": self.update_norm}
        if self.eps is not None and self.eps.expression is not None:
            out["eps"] = self.eps.expression
            out["eps_label"] = f"{self.target.rsplit('.', 1)[-1]} {self.eps.place}"
            out["eps_key"] = self.eps.key
            if self.eps.index is not None:
                out["eps_index"] = self.eps.index
        out["applies_to"] = self.applies_to
        out["summary"] = f"inferred by spectral infer from {self.target}"[:200]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "kwargs": _jsonable(self.kwargs),
            "group": _jsonable(self.group),
            "fits": self.fits,
            "update_norm": self.update_norm,
            "exponents": self.exponents,
            "applies_to": self.applies_to,
            "eps": None if self.eps is None else self.eps.to_dict(),
            "roles": {r.role: r.to_dict() for r in self.roles},
            "problems": list(self.problems),
            "notes": list(self.notes),
            "measurement": {
                "lr": self.lr,
                "widths": list(self.widths),
                "d0": self.d0,
                "warmup_steps": self.warmup,
                "ranks": list(RANKS),
                "seeds": list(SEEDS),
                "G": list(G_SCALES),
                "noise": NOISE,
                "dtype": self.dtype,
                "weight_decay": 0.0,
                "seconds": round(self.seconds, 2),
            },
            "spec": self.toml_fields() if self.fits else None,
        }

    def comments(self) -> list[str]:
        """The measurements, as the comment lines of the TOML file."""
        kw = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())
        if self.group:
            kw += (", " if kw else "") + "param group " + ", ".join(
                f"{k}={v!r}" for k, v in self.group.items()
            )
        lines = [
            f"Inferred by `spectral infer {self.target}`"
            + (f" with {kw}" if kw else "")
            + f" in {self.seconds:.0f} s.",
            f"Measured: ‖ΔW‖_R / lr of step {self.warmup + 1} after {self.warmup} warm-up steps "
            f"with one fixed gradient (lr = {self.lr:g}, weight_decay = 0, {self.dtype}),",
            f"widths {', '.join(map(str, self.widths))}, d0 = {self.d0}, gradient ranks "
            f"{', '.join(map(str, RANKS))} (+ noise {NOISE:g}), seeds "
            f"{', '.join(map(str, SEEDS))}, ‖∇W‖_2 = G ∈ {{{', '.join(f'{g:g}' for g in G_SCALES)}}}.",
            "Exponent: fit [95% interval incl. drift across widths] → rounded.",
            "",
        ]
        for r in self.roles:
            norms = " ".join(f"{x:.3g}" for x in r.norms)
            lines.append(f"{r.role:<14} {r.shape:<7} n: {r.width.text():<36} G: {r.G.text()}")
            lines.append(f"{'':<22} ‖ΔW‖_R/lr = {norms}")
        if self.exponents:
            e = self.exponents
            lines += [
                "",
                f"update_norm = n_in^a n_out^b min(n_in, n_out)^c G^g: a = {e['a']} (output), "
                f"b = {e['b']} (input), c = {e['c']} (hidden − a − b), g = {e['g']}.",
            ]
        if self.eps is not None:
            lines += ["", f"ε ({self.eps.place}, default {self.eps.default!r}): {self.eps.why}"]
            if self.eps.widths:
                lines.append(
                    f"  ε* at n = {', '.join(map(str, self.eps.widths))} (seed 0, ranks "
                    f"{', '.join(map(str, RANKS))}):"
                )
            for role, ex in self.eps.roles.items():
                th = " ".join(f"{x:.3g}" for x in self.eps.thresholds.get(role, ()))
                lines.append(f"  ε* {role:<14} n: {ex.text()}   ε* = {th}")
            if self.eps.G is not None:
                lines.append(f"  ε* in G (hidden_weight): {self.eps.G.text()}")
        lines += [""] + list(self.notes)
        return lines

    def toml(self) -> str:
        """The TOML declaration (``spectral derive --spec`` reads it), measurements as comments."""
        if not self.fits:
            raise SpecError(f"{self.target}: no single declaration fits")
        body = "".join(f"# {line}".rstrip() + "\n" for line in self.comments())
        for key, value in self.toml_fields().items():
            body += f"{key} = {json.dumps(value, ensure_ascii=False)}\n"
        return body

    def explain(self) -> str:
        """Why no single declaration fits, with the numbers (several lines)."""
        head = f"{self.target}: no single declaration fits its measured update:"
        return "\n".join([head] + [f"  - {p}" for p in self.problems])


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return repr(value)


# --------------------------------------------------------------------------------------
# the implementation under test
# --------------------------------------------------------------------------------------



@dataclass(frozen=True)
class Target:
    """An optimizer class and the keyword arguments it is built with."""

    label: str
    cls: type
    kwargs: dict[str, Any]
    lr: float
    """The lr measured at: the constructor's default (Prodigy's 1.0 is part of its design),
    else 1e-3."""
    hessian: bool = False
    """``step`` takes ``hessian=`` (SophiaH): a ``g ⊙ g`` estimate is passed."""
    group: dict[str, Any] = field(default_factory=dict)
    """Keys of the parameter group (NorMuon's ``use_muon=True``)."""

    def build(self, params: list, lr: float, eps: tuple[str, int | None, Any] | None = None):
        kwargs = dict(self.kwargs)
        kwargs["lr"] = lr
        if eps is not None:
            key, index, value = eps
            if index is None:
                kwargs[key] = value
            else:
                entries = list(kwargs.get(key, self.defaults().get(key)))
                entries[index] = value
                kwargs[key] = tuple(entries)
        groups = [{"params": params, **self.group}] if self.group else params
        try:
            return self.cls(groups, **kwargs)
        except Exception as exc:  # the user's class: any failure is bad input
            raise SpecError(f"{self.label}({_kw_text(kwargs)}) raised {first_line(exc)}") from None

    def defaults(self) -> dict[str, Any]:
        return _defaults(self.cls)


def _kw_text(kwargs: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in kwargs.items())


def _defaults(cls: type) -> dict[str, Any]:
    try:
        sig = inspect.signature(cls.__init__)
    except (TypeError, ValueError):
        return {}
    return {
        name: p.default
        for name, p in sig.parameters.items()
        if p.default is not inspect.Parameter.empty
    }


def _accepts_any(cls: type) -> bool:
    try:
        sig = inspect.signature(cls.__init__)
    except (TypeError, ValueError):
        return True
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())


def load_target(
    text: str, kwargs: dict[str, Any] | None = None, group: dict[str, Any] | None = None
) -> Target:
    """Import ``MODULE.CLASS`` (or ``MODULE:CLASS``) and check ``kwargs`` against it.

    Every failure is a one-line :class:`SpecError`: no such module or attribute, not a
    ``torch.optim.Optimizer`` subclass, an argument the constructor does not take. JSON
    lists in ``kwargs`` become tuples (``betas``, ``eps``). ``group`` holds keys of the
    parameter group the measured tensor is passed in (``{"use_muon": True}``).
    """
    import importlib

    import torch

    text = text.strip()
    if ":" in text:
        module_name, _, attr = text.rpartition(":")
    else:
        module_name, _, attr = text.rpartition(".")
    if not module_name or not attr:
        raise SpecError(
            f"{text!r}: expected MODULE.CLASS, e.g. torch.optim.AdamW or pytorch_optimizer.Lion"
        )
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise SpecError(f"{text}: no module named {exc.name!r} (is it installed?)") from None
        raise SpecError(f"{text}: importing {module_name} raised {first_line(exc)}") from None
    except Exception as exc:
        raise SpecError(f"{text}: importing {module_name} raised {first_line(exc)}") from None
    cls = getattr(module, attr, None)
    if cls is None:
        found = sorted(
            n
            for n, v in vars(module).items()
            if isinstance(v, type) and issubclass(v, torch.optim.Optimizer) and not n.startswith("_")
        )
        listing = ", ".join(found[:12]) + (", ..." if len(found) > 12 else "")
        raise SpecError(
            f"{text}: {module_name} has no attribute {attr!r}"
            + (f"; its optimizers: {listing}" if found else "")
        )
    if not (isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer)):
        raise SpecError(f"{text}: a {type(cls).__name__}, not a torch.optim.Optimizer subclass")
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in (kwargs or {}).items()}
    defaults = _defaults(cls)
    if not _accepts_any(cls):
        unknown = sorted(set(kwargs) - set(defaults))
        if unknown:
            names = ", ".join(n for n in defaults if n not in ("params",))
            raise SpecError(f"{text} takes no argument {unknown[0]!r}; its arguments: {names}")
    for reserved in ("lr", "params"):
        if reserved in kwargs:
            raise SpecError(
                f"--kwargs {reserved!r}: the measurement sets it (the update is measured per "
                "unit of lr); leave it out"
            )
    if "weight_decay" in defaults and "weight_decay" not in kwargs:
        kwargs["weight_decay"] = 0.0  # the declaration is of A, without the λW term
    lr = defaults.get("lr")
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not lr > 0:
        lr = 1e-3
    try:
        step_params = inspect.signature(cls.step).parameters
    except (TypeError, ValueError):
        step_params = {}
    group = dict(group or {})
    if "params" in group:
        raise SpecError("--group 'params': the measurement supplies the parameter")
    label = f"{module_name}.{attr}"
    return Target(label, cls, kwargs, float(lr), hessian="hessian" in step_params, group=group)


# --------------------------------------------------------------------------------------
# measurement
# --------------------------------------------------------------------------------------


def _spectral_norm(m, torch) -> float:
    """``‖m‖_2`` of a float64 matrix by power iteration on ``mᵀm``: the same number as
    :func:`spectral.probe.rms_operator_norm`'s SVD to well under 1%, at a fraction of its
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
    (the definition of :func:`spectral.probe.rms_operator_norm`)."""
    d = delta.detach().to(torch.float64)
    if d.ndim == 1:
        return float(d.norm() / math.sqrt(d.numel()))
    n_out, n_in = d.shape
    return math.sqrt(n_in / n_out) * _spectral_norm(d, torch)


class _Meter:
    """Builds the target on one parameter and steps it; every run is deterministic."""

    def __init__(self, target: Target, d0: int, warmup: int):
        import torch

        self.torch = torch
        self.target = target
        self.d0 = d0
        self.warmup = warmup
        self.runs = 0
        self._cache: dict[tuple, tuple] = {}

    def tensors(self, role: str, width: int, seed: int, rank: int):
        """Initial weights (the probe's μP-aligned init) and the gradient for one run, cached
        (many runs share them)."""
        from .probe import _init

        key = (role, width, seed, rank)
        if key not in self._cache:
            torch = self.torch
            shape = _SHAPES[role][1](width, self.d0)
            gen = torch.Generator().manual_seed(seed * 1_000_003 + width)  # the probe's seeds
            w0 = _init(shape, role, gen, torch).to(torch.float64)
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
        try:
            opt = self.target.build([p], lr, eps)
        except SpecError as exc:
            if p.ndim == 1:  # a matrix-only optimizer refusing a bias
                raise _StepFailed(str(exc).split(" raised ", 1)[-1]) from None
            raise
        out = []
        self.runs += 1
        for _ in range(count or self.warmup + 1):
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
                raise _StepFailed(first_line(exc)) from None
            out.append(rms_norm(p.detach() - before, torch) / lr)
        return out

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


class _StepFailed(Exception):
    """``step()`` of the target raised (e.g. a matrix-only optimizer on a bias)."""


# --------------------------------------------------------------------------------------
# fitting
# --------------------------------------------------------------------------------------


def _slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    lx = [math.log(x) for x in xs]
    ly = [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    sxx = sum((x - mx) ** 2 for x in lx)
    return sum((x - mx) * (y - my) for x, y in zip(lx, ly, strict=True)) / sxx


def _exponent(xs: Sequence[float], curves: Sequence[Sequence[float]]) -> Exponent:
    """Exponent of ``y`` in ``x`` from several runs (one curve each): the mean slope, with a
    95% t-interval over the runs plus half the spread of the local slopes of the mean
    curve (a power law has none), and at least :data:`FLOOR` either side."""
    slopes = [_slope(xs, c) for c in curves]
    k = len(slopes)
    mean = sum(slopes) / k
    stat = 0.0
    if k > 1:
        sd = math.sqrt(sum((s - mean) ** 2 for s in slopes) / (k - 1))
        stat = _T975.get(k - 1, 2.0) * sd / math.sqrt(k)
    geo = [math.exp(sum(math.log(c[i]) for c in curves) / k) for i in range(len(xs))]
    local = [_slope(xs[i : i + 2], geo[i : i + 2]) for i in range(len(xs) - 1)]
    drift = (max(local) - min(local)) / 2 if len(local) > 1 else 0.0
    half = max(FLOOR, stat + drift)
    return Exponent(round(mean, 6) + 0.0, round(mean - half, 6), round(mean + half, 6))


def _power(sym: str, e: Fraction) -> str:
    return f"{sym}**({e})" if e.denominator != 1 or e < 0 else f"{sym}**{e}"


def declaration(a: Fraction, b: Fraction, c: Fraction, g: Fraction) -> str:
    """``n_in^a n_out^b min(n_in, n_out)^c G^g`` as the spec-file expression sympy prints.

    >>> declaration(Fraction(1), Fraction(0), Fraction(-1, 2), Fraction(0))
    'n_in/sqrt(min(n_in, n_out))'
    >>> declaration(Fraction(1, 2), Fraction(-1, 2), Fraction(0), Fraction(1))
    'G*sqrt(n_in)/sqrt(n_out)'
    """
    import sympy as sp

    from .spec import show
    from .symbols import G, n_in, n_out

    def rat(x: Fraction) -> sp.Rational:
        return sp.Rational(x.numerator, x.denominator)

    expr = n_in ** rat(a) * n_out ** rat(b) * sp.Min(n_in, n_out) ** rat(c) * G ** rat(g)
    return show(expr)


def _unrounded(e: Exponent, var: str) -> str:
    """Why ``e`` has no rounding, after its value and interval."""
    head = f"{e.value:+.3f} [{e.low:+.3f}, {e.high:+.3f}]: "
    half = (e.high - e.low) / 2
    if half > MAX_HALF_WIDTH:
        why = (
            "the seeds and gradient ranks disagree, or the local slope drifts across the "
            "widths"
            if var == "n"
            else "the local slope drifts across G = 0.1, 1, 10 (a clip or a floor acting "
            "in that range?)"
        )
        return head + (
            f"the interval (±{half:.2f}) is wider than ±{MAX_HALF_WIDTH} — {why} — so no "
            f"power of {var} is supported"
        )
    return head + (
        f"no fraction p/q with q ≤ {MAX_DENOMINATOR} in the interval, so it is not a simple "
        f"power of {var} over the measured range"
    )


def _fit_declaration(
    fits: dict[str, Exponent], gs: dict[str, Exponent], label: str
) -> tuple[dict[str, Fraction] | None, list[str]]:
    """``a, b, c, g`` from the three weight roles' exponents, or the reasons they don't fit."""
    problems = []
    r = {role: fits[role].rounded for role in ("input_weight", "hidden_weight", "output_weight")}
    for role, value in r.items():
        if value is None:
            problems.append(f"{label} of {role} is n^{_unrounded(fits[role], 'n')}")
    gr = {role: gs[role].rounded for role in r}
    for role, value in gr.items():
        if value is None:
            problems.append(f"{label} of {role} is G^{_unrounded(gs[role], 'G')}")
    if problems:
        return None, problems
    if len(set(gr.values())) > 1:
        shown = ", ".join(f"{k} G^{gs[k].value:+.2f}" for k in gr)
        return None, [f"{label} scales with a different power of G per role ({shown}); one "
                      "declaration has one power of G"]
    a, b = r["output_weight"], r["input_weight"]
    c = r["hidden_weight"] - a - b
    return {"a": a, "b": b, "c": c, "g": gr["input_weight"]}, []


# --------------------------------------------------------------------------------------
# ε
# --------------------------------------------------------------------------------------


def eps_candidates(target: Target) -> list[tuple[str, int | None, Any]]:
    """Constructor arguments that may hold an ε: ``eps``, ``epsilon``, ``*_eps``; for a tuple
    (torch's Adafactor ``eps=(None, 1e-3)``) every float-or-None entry, in order."""
    defaults = {**target.defaults(), **target.kwargs}
    names = [n for n in defaults if n in ("eps", "epsilon")]
    names += [n for n in defaults if n.endswith("_eps") and not n.startswith("adamw")]
    out: list[tuple[str, int | None, Any]] = []
    for name in names:
        value = defaults[name]
        if isinstance(value, (tuple, list)):
            for i, v in enumerate(value):
                if v is None or (isinstance(v, float) and v > 0):
                    out.append((name, i, v))
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            out.append((name, None, float(value)))
    return out


def _eps_value(default: Any) -> float:
    return 1e-16 if default is None else float(default)  # None: the implementation's own tiny


def _classify_eps(meter: _Meter, cand: tuple[str, int | None, Any], width: int) -> tuple[bool, str]:
    """Does this ε regularise the step? It must change the step when moved 10^3 either way
    around its default, and a larger ε must give a smaller step."""
    key, index, default = cand
    e0 = _eps_value(default)
    role = "hidden_weight"
    try:
        at = meter.measured(role, width, eps=(key, index, default))
        low = meter.measured(role, width, eps=(key, index, e0 * 1e-3))
        high = meter.measured(role, width, eps=(key, index, e0 * 1e3))
    except _StepFailed as exc:
        return False, f"step() failed when it was changed ({exc})"
    place = key if index is None else f"{key}[{index}]"
    up, down = math.log(high / at), math.log(low / at)
    if max(abs(up), abs(down)) < INERT:
        return False, (
            f"inert: moving {place} from {default!r} to ×1e-3 and ×1e3 changes the step by "
            f"{max(abs(up), abs(down)):.1e} (hidden_weight, n = {width}); a guard against "
            "division by zero, not declared"
        )
    if up > -INERT:
        return False, (
            f"raising {place} ×1e3 from {default!r} does not shrink the step (×{high / at:.6g}; "
            f"lowering it ×1e-3: ×{low / at:.4g}): it acts below the gradient's signal (on "
            "noise), not as the regulariser of a denominator; not declared"
        )
    return True, f"regularises the step (×{high / at:.3g} at ×1e3 the default); declared"


def _threshold(
    meter: _Meter,
    cand,
    role: str,
    width: int,
    *,
    g: float = 1.0,
    seed: int = 0,
    rank: int = 1,
    guess: float | None = None,
) -> float:
    """``ε*``: the ε at which ``‖ΔW‖_R`` has moved by a factor 2 from its small-ε value.

    The gap ``|log(‖ΔW(ε)‖/‖ΔW(ε→0)‖)|`` grows with ε; it is bracketed (around ``guess``,
    a log10 ε*, when given) and the crossing of log 2 found by regula falsi (Illinois) to
    0.03 decades (1.5% of the 64..256 span an exponent is fitted over, half of
    :data:`FLOOR`)."""
    key, index, default = cand
    start = math.log10(_eps_value(default)) - 6
    kw = {"g": g, "seed": seed, "rank": rank}
    base = meter.measured(role, width, eps=(key, index, 10.0**start), **kw)

    def f(log_eps: float) -> float:
        v = meter.measured(role, width, eps=(key, index, 10.0**log_eps), **kw)
        return abs(math.log(v / base)) - HALF

    if guess is None or not math.isfinite(guess):
        lo, f_lo = start, -HALF
        hi = start + 2
        f_hi = f(hi)
        while f_hi < 0:
            lo, f_lo, hi = hi, f_hi, hi + 2
            if hi > start + 40:
                return math.nan
            f_hi = f(hi)
    else:
        lo, hi = max(start, guess - 0.5), guess + 0.5
        f_lo, f_hi = (f(lo) if lo > start else -HALF), f(hi)
        while f_lo >= 0 and lo > start:
            hi, f_hi, lo = lo, f_lo, max(start, lo - 1)
            f_lo = f(lo) if lo > start else -HALF
        while f_hi < 0:
            lo, f_lo, hi = hi, f_hi, hi + 1
            if hi > start + 40:
                return math.nan
            f_hi = f(hi)
    side = 0
    for _ in range(12):
        if hi - lo < 0.03:
            break
        mid = (lo * f_hi - hi * f_lo) / (f_hi - f_lo)
        mid = min(max(mid, lo + 0.001), hi - 0.001)
        f_mid = f(mid)
        if abs(f_mid) < 5e-3:
            return 10.0**mid
        if f_mid < 0:
            lo, f_lo = mid, f_mid
            if side == -1:
                f_hi /= 2
            side = -1
        else:
            hi, f_hi = mid, f_mid
            if side == 1:
                f_lo /= 2
            side = 1
    return 10.0 ** ((lo * f_hi - hi * f_lo) / (f_hi - f_lo))


def _fit_eps(meter: _Meter, cand, widths: Sequence[int], g_width: int) -> EpsFit:
    """ε* per role over the widths up to :data:`EPS_MAX_WIDTH` (seed 0, every rank) and in G
    (hidden role): each ε* is a search of about seven runs, so this is most of the cost."""
    key, index, default = cand
    configs = [(SEEDS[0], r) for r in RANKS]
    small = [w for w in widths if w <= EPS_MAX_WIDTH]
    widths = tuple(small) if len(small) >= 3 else tuple(widths[:3])
    roles: dict[str, Exponent] = {}
    thresholds: dict[str, tuple[float, ...]] = {}
    for role in ("input_weight", "hidden_weight", "output_weight"):
        curves = []
        for s, r in configs:
            th: list[float] = []
            for w in widths:
                guess = None
                if len(th) >= 2:
                    guess = 2 * math.log10(th[-1]) - math.log10(th[-2])
                elif th:
                    guess = math.log10(th[-1])
                elif curves:
                    guess = math.log10(curves[-1][0])
                th.append(_threshold(meter, cand, role, w, seed=s, rank=r, guess=guess))
            if not all(math.isfinite(t) and t > 0 for t in th):
                return EpsFit(key, index, default, True, f"ε* not found for {role}", roles, widths=widths)
            curves.append(th)
        thresholds[role] = tuple(
            math.exp(sum(math.log(c[i]) for c in curves) / len(curves)) for i in range(len(widths))
        )
        roles[role] = _exponent(widths, curves)
    g_curves = []
    for s, r in configs:
        if s != configs[0][0]:
            continue
        i = widths.index(g_width)
        guess = math.log10(thresholds["hidden_weight"][i])
        g_curves.append(
            [_threshold(meter, cand, "hidden_weight", g_width, g=g, seed=s, rank=r,
                        guess=guess + math.log10(g)) for g in G_SCALES]
        )
    if not all(math.isfinite(t) and t > 0 for c in g_curves for t in c):
        return EpsFit(key, index, default, True, "ε* not found in G", roles, None, thresholds, widths=widths)
    g_fit = _exponent(G_SCALES, g_curves)
    if g_fit.rounded is None:  # one G fit (hidden role) serves every role: say it once
        why = f"ε* (hidden_weight) is G^{_unrounded(g_fit, 'G')}"
        return EpsFit(key, index, default, True, why, roles, g_fit, thresholds, widths=widths)
    gs = {role: g_fit for role in roles}
    exps, problems = _fit_declaration(roles, gs, "ε*")
    if exps is None:
        return EpsFit(
            key, index, default, True, "; ".join(problems), roles, g_fit, thresholds, widths=widths
        )
    expr = declaration(exps["a"], exps["b"], exps["c"], exps["g"])
    why = f"regularises the step; ε* (where ‖ΔW‖_R has halved) ∝ {expr}"
    return EpsFit(key, index, default, True, why, roles, g_fit, thresholds, expr, widths)


# --------------------------------------------------------------------------------------
# the whole inference
# --------------------------------------------------------------------------------------


def infer(
    target: Target,
    *,
    widths: Sequence[int] = DEFAULT_WIDTHS,
    d0: int = D0,
    warmup: int = WARMUP,
    eps: str | None = "auto",
    name: str | None = None,
    applies_to: str = "auto",
    threads: int | None = 1,
    progress: Callable[[str], None] | None = None,
) -> Inference:
    """Measure ``target`` and fit a declaration (see the module docstring).

    ``eps``: ``"auto"`` (detect), ``None`` (declare none), or ``"KEY"`` / ``"KEY[INDEX]"``.
    ``applies_to``: ``"auto"`` (biases too when they measure consistently) or
    ``"matrices"`` (biases are not measured). ``threads``: torch threads while measuring
    (restored afterwards; ``None`` leaves them). One is the default: the matrices are
    small, and on a shared 2-core machine two threads made a run 100× slower.
    """
    import torch

    t0 = time.monotonic()
    widths = tuple(sorted({int(w) for w in widths}))
    if len(widths) < 3 or widths[0] <= d0:
        raise SpecError(f"need at least three widths, all larger than d0 = {d0}; got {widths}")
    if warmup < 0 or warmup > 50:
        raise SpecError(f"--warmup must be from 0 to 50, got {warmup}")
    if applies_to not in ("auto", "matrices"):
        raise SpecError(f"applies_to must be 'auto' or 'matrices', got {applies_to!r}")
    g_width = widths[1]
    meter = _Meter(target, d0, warmup)
    say = progress or (lambda _: None)
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        return _infer(meter, target, widths, d0, warmup, g_width, eps, name, say, t0, applies_to)
    finally:
        torch.set_num_threads(before)


def _role_fit(meter: _Meter, role: str, widths, g_width: int, configs) -> RoleFit:
    runs = [[meter.steps(role, w, seed=s, rank=r) for w in widths] for s, r in configs]
    k = meter.warmup
    curves = [[traj[k] for traj in run] for run in runs]
    width = _exponent(widths, curves)
    schedule = 0.0
    if k > 0:  # the change from the last warm-up step to the measured one
        nxt = [[traj[k] / traj[k - 1] for traj in run] for run in runs]
        schedule = sum(_slope(widths, c) for c in nxt) / len(nxt)
    g_curves = []
    i = widths.index(g_width)
    for (s, r), run in zip(configs, runs, strict=True):
        if s != configs[0][0]:
            continue
        vals = [run[i][k] if g == 1.0 else meter.measured(role, g_width, seed=s, rank=r, g=g)
                for g in G_SCALES]
        g_curves.append(vals)
    g_fit = _exponent(G_SCALES, g_curves)
    s, r = configs[0]
    base = runs[0][i][k]
    weight = math.log(meter.measured(role, g_width, seed=s, rank=r, w_scale=PROBE_FACTOR) / base)
    lr = math.log(meter.measured(role, g_width, seed=s, rank=r, lr_scale=PROBE_FACTOR) / base)
    geo = tuple(math.exp(sum(math.log(c[j]) for c in curves) / len(curves)) for j in range(len(widths)))
    return RoleFit(
        role,
        _SHAPES[role][0],
        width,
        g_fit,
        geo,
        weight / math.log(PROBE_FACTOR),
        lr / math.log(PROBE_FACTOR),
        schedule,
    )


def _infer(meter, target, widths, d0, warmup, g_width, eps, name, say, t0, scope) -> Inference:
    weight_roles = ("input_weight", "hidden_weight", "output_weight")
    configs = [(s, r) for s in SEEDS for r in RANKS]
    fits: dict[str, RoleFit] = {}
    notes: list[str] = []
    problems: list[str] = []
    for role in weight_roles:
        say(role)
        try:
            fits[role] = _role_fit(meter, role, widths, g_width, configs)
        except _StepFailed as exc:
            raise SpecError(f"{target.label}: step() on a {_SHAPES[role][0]} matrix raised {exc}") from None
    bias_roles: tuple[str, ...] = ("input_bias", "hidden_bias")
    if scope == "matrices":
        bias_roles = ()
        notes.append("Biases: not measured (applies_to = matrices was asked for).")
    try:
        say("biases")
        # a bias's gradient is a vector: no rank, so the seeds alone
        for role in bias_roles:
            fits[role] = _role_fit(meter, role, widths, g_width, [(s, 1) for s in SEEDS])
    except _StepFailed as exc:
        bias_roles = ()
        notes.append(f"Biases: step() on a vector raised {exc}; the declaration covers matrices.")
    problems += _checks([fits[r] for r in weight_roles], target, widths, g_width, warmup)
    if problems:
        return _result(meter, target, widths, d0, warmup, fits, bias_roles, "all", None, {},
                       None, problems, notes, t0, name)
    bias_problems = _checks([fits[r] for r in bias_roles], target, widths, g_width, warmup)
    if bias_problems:
        notes.append(
            f"Biases: {bias_problems[0]}; so the declaration covers matrices only — give biases "
            "to another optimizer (--others adamw)."
        )
    exps, fit_problems = _fit_declaration(
        {r: fits[r].width for r in weight_roles}, {r: fits[r].G for r in weight_roles}, "‖ΔW‖_R"
    )
    problems += fit_problems
    applies_to = "all" if bias_roles and not bias_problems else "matrices"
    exponents: dict[str, str] = {}
    update_norm = None
    if exps is not None:
        exponents = {k: str(v) for k, v in exps.items()}
        update_norm = declaration(exps["a"], exps["b"], exps["c"], exps["g"])
        for role in bias_roles if not bias_problems else ():
            f = fits[role]
            if f.width.rounded != exps["b"] or f.G.rounded != exps["g"]:
                applies_to = "matrices"
                notes.append(
                    f"Biases: {role} scales as n^{f.width.value:+.2f} G^{f.G.value:+.2f}, while a "
                    f"vector (n_in = 1, n_out = n) under this declaration scales as "
                    f"n^{exps['b']} G^{exps['g']} (as the input weights, whose n_in = d0 is "
                    "also Θ(1)); so the declaration covers matrices only — give biases to "
                    "another optimizer (--others adamw)."
                )
                break
    eps_fit = None
    if not problems:
        eps_fit = _eps(meter, target, eps, widths, g_width, say, notes)
    return _result(meter, target, widths, d0, warmup, fits, bias_roles, applies_to,
                   update_norm, exponents, eps_fit, problems, notes, t0, name)


def _checks(measured: list[RoleFit], target: Target, widths, g_width: int, warmup: int) -> list[str]:
    """The assumptions of a declaration, tested on these roles' measurements: a step at
    all, independent of the weights, proportional to the lr, changing by a width-independent
    factor from step to step."""
    problems: list[str] = []
    for f in measured:
        if not all(math.isfinite(x) and x > 0 for x in f.norms):
            problems.append(
                f"{f.role}: the measured step is {f.norms[0]:.3g} at n = {widths[0]} — no update "
                f"after {warmup} warm-up steps (raise --warmup?)"
            )
    if problems or not measured:
        return problems
    worst = max(measured, key=lambda f: abs(f.weight))
    if abs(worst.weight) > TOLERANCE:
        problems.append(
            f"the step depends on the weights: scaling W by {PROBE_FACTOR:g} scaled ‖ΔW‖_R by "
            f"×{PROBE_FACTOR ** worst.weight:.3g} ({worst.role}, n = {g_width}; ‖ΔW‖_R ∝ "
            f"‖W‖^{worst.weight:.2f}). A declaration is a function of n_in, n_out, L and G "
            "only; a step scaled by the weights' norm (LAMB's trust ratio, Adafactor's "
            "relative step) has no such form"
        )
    worst = max(measured, key=lambda f: abs(f.lr))
    if abs(worst.lr) > TOLERANCE:
        problems.append(
            f"the step is not proportional to the learning rate: lr ×{PROBE_FACTOR:g} changed "
            f"‖ΔW‖_R/lr by ×{PROBE_FACTOR ** worst.lr:.3g} ({worst.role}, n = {g_width}; "
            f"‖ΔW‖_R ∝ lr^{1 + worst.lr:.2f} after {warmup} warm-up steps at lr = "
            f"{target.lr:g}). Its size depends on something the lr rules do not set: a step "
            "size the optimizer estimates itself (Prodigy's and D-Adaptation's d), a learning "
            "rate of its own, or weights that the earlier steps moved (a trust ratio)"
        )
    worst = max(measured, key=lambda f: abs(f.schedule))
    if abs(worst.schedule) > TOLERANCE:
        problems.append(
            f"from step {warmup} to {warmup + 1} the step changes by a width-dependent factor "
            f"(∝ n^{worst.schedule:+.2f}, {worst.role}): the optimizer is still changing regime "
            "(raise --warmup) or its step size is not a fixed function of the shape"
        )
    return problems


def _eps(meter, target, eps, widths, g_width, say, notes) -> EpsFit | None:
    if eps is None:
        return None
    cands = eps_candidates(target)
    if eps != "auto":
        key, _, rest = eps.partition("[")
        index = int(rest.rstrip("]")) if rest else None
        defaults = {**target.defaults(), **target.kwargs}
        if key not in defaults:
            raise SpecError(
                f"--eps {eps}: {target.label} has no argument {key!r}; "
                f"its arguments: {', '.join(n for n in defaults if n != 'params')}"
            )
        value = defaults[key]
        if index is not None:
            if not isinstance(value, (tuple, list)) or not 0 <= index < len(value):
                raise SpecError(f"--eps {eps}: {key} = {value!r} has no entry {index}")
            value = value[index]
        cands = [(key, index, value)]
    if not cands:
        return None
    say("eps")
    first = None
    for cand in cands:
        active, why = _classify_eps(meter, cand, g_width)
        fit = EpsFit(cand[0], cand[1], cand[2], active, why)
        if active:
            return _fit_eps(meter, cand, widths, g_width)
        first = first or fit
        if len(cands) > 1:
            notes.append(f"ε candidate {fit.place} = {cand[2]!r}: {why}.")
    return first


def _result(meter, target, widths, d0, warmup, fits, bias_roles, applies_to, update_norm,
            exponents, eps_fit, problems, notes, t0, name) -> Inference:
    order = ("input_weight", "hidden_weight", "output_weight", *bias_roles)
    if name is None:
        name = target.cls.__name__.lower()
        name = "".join(ch if ch.isalnum() or ch in "-_+." else "-" for ch in name)[:64]
    if eps_fit is not None and eps_fit.active and eps_fit.expression is None:
        problems = [
            *problems,
            f"ε ({eps_fit.place}) regularises the step, but {eps_fit.why} (--eps none "
            "declares the update without an ε)",
        ]
    notes = list(notes) + [f"{meter.runs} optimizer runs."]
    return Inference(
        target=target.label,
        kwargs=dict(target.kwargs),
        group=dict(target.group),
        lr=target.lr,
        widths=tuple(widths),
        d0=d0,
        warmup=warmup,
        roles=tuple(fits[r] for r in order if r in fits),
        bias_roles=tuple(bias_roles),
        applies_to=applies_to,
        update_norm=update_norm if not problems else None,
        exponents=exponents,
        eps=eps_fit,
        problems=tuple(problems),
        notes=tuple(notes),
        seconds=time.monotonic() - t0,
        name=name,
    )
