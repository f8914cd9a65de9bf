"""The whole inference: measure each role, check the assumptions, fit, and find the ε.

:func:`infer` is the entry: it measures the weight roles (and the biases, when the target
takes vectors), refuses to guess when a declaration's assumptions fail (:func:`_checks`),
fits ``a, b, c, g`` and the ε, and returns an :class:`~spectral.infer.result.Inference`.
Progress goes to a callback; nothing prints.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

from ..errors import SpecError
from ..measure.guard import DEFAULT_TIMEOUT
from ..measure.common import D0, SHAPES
from .eps import fit_eps_of
from ..measure.fit import fit_line
from .fit import declaration, fit_declaration, fit_exponent
from .meter import BadStep, Meter, StepFailed
from .protocol import DEFAULT_WIDTHS, G_SCALES, PROBE_FACTOR, RANKS, SEEDS, TOLERANCE, WARMUP
from .result import Inference, RoleFit
from .target import Target

__all__ = ["infer"]


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
    timeout: float | None = DEFAULT_TIMEOUT,
    progress: Callable[[str], None] | None = None,
) -> Inference:
    """Measure ``target`` and fit a declaration (see the module docstring).

    ``eps``: ``"auto"`` (detect), ``None`` (declare none), or ``"KEY"`` / ``"KEY[INDEX]"``.
    ``applies_to``: ``"auto"`` (biases too when they measure consistently) or
    ``"matrices"`` (biases are not measured). ``threads``: torch threads while measuring
    (restored afterwards; ``None`` leaves them). One is the default: the matrices are
    small, and on a shared 2-core machine two threads made a run 100× slower.
    ``timeout``: seconds one measurement (building the target on one tensor and its steps)
    may take (:func:`spectral.measure.guard.user_code`); ``None``: no limit.

    A step that makes the weights NaN or inf, overflows, or is exactly zero is a problem of
    the result (``fits`` is false, :meth:`~spectral.infer.result.Inference.explain` names it).
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
    meter = Meter(target, d0, warmup, timeout)
    say = progress or (lambda _: None)
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        return _infer(meter, target, widths, d0, warmup, g_width, eps, name, say, t0, applies_to)
    finally:
        torch.set_num_threads(before)


def _role_fit(meter: Meter, role: str, widths, g_width: int, configs) -> RoleFit:
    runs = [[meter.steps(role, w, seed=s, rank=r) for w in widths] for s, r in configs]
    k = meter.warmup
    curves = [[traj[k] for traj in run] for run in runs]
    width = fit_exponent(widths, curves)
    schedule = 0.0
    if k > 0:  # the change from the last warm-up step to the measured one
        nxt = [[traj[k] / traj[k - 1] for traj in run] for run in runs]
        lw = [math.log(w) for w in widths]
        schedule = sum(fit_line(lw, [math.log(v) for v in c]).slope for c in nxt) / len(nxt)
    g_curves = []
    i = widths.index(g_width)
    for (s, r), run in zip(configs, runs, strict=True):
        if s != configs[0][0]:
            continue
        vals = [run[i][k] if g == 1.0 else meter.measured(role, g_width, seed=s, rank=r, g=g)
                for g in G_SCALES]
        g_curves.append(vals)
    g_fit = fit_exponent(G_SCALES, g_curves)
    s, r = configs[0]
    base = runs[0][i][k]
    weight = math.log(meter.measured(role, g_width, seed=s, rank=r, w_scale=PROBE_FACTOR) / base)
    lr = math.log(meter.measured(role, g_width, seed=s, rank=r, lr_scale=PROBE_FACTOR) / base)
    geo = tuple(math.exp(sum(math.log(c[j]) for c in curves) / len(curves)) for j in range(len(widths)))
    return RoleFit(
        role,
        SHAPES[role][0],
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
        except BadStep as exc:
            return _result(meter, target, widths, d0, warmup, fits, (), "all", None, {},
                           None, [str(exc)], notes, t0, name)
        except StepFailed as exc:
            raise SpecError(f"{target.label}: step() on a {SHAPES[role][0]} matrix raised {exc}") from None
    bias_roles: tuple[str, ...] = ("input_bias", "hidden_bias")
    if scope == "matrices":
        bias_roles = ()
        notes.append("Biases: not measured (applies_to = matrices was asked for).")
    try:
        say("biases")
        # a bias's gradient is a vector: no rank, so the seeds alone
        for role in bias_roles:
            fits[role] = _role_fit(meter, role, widths, g_width, [(s, 1) for s in SEEDS])
    except BadStep as exc:
        bias_roles = ()
        notes.append(f"Biases: {exc}; the declaration covers matrices.")
    except StepFailed as exc:
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
    exps, fit_problems = fit_declaration(
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
        eps_fit = fit_eps_of(meter, target, eps, widths, g_width, say, notes)
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
