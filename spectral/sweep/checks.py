"""A sweep's plan checked before any folder, file or run: the roles its options name, and
the numbers its rules give at every size it trains.

* **Roles.** ``--fit-exponent lr.router_weight``, ``--ablate-variant``, ``--tune lr.ROLE``,
  ``--lr-scale``, ``--init-scale`` and ``--multiplier`` may name any role of the rules; a role
  the reference model does not have (the router without ``--experts``) would change no
  number, and the sweep would train identical runs and report a fit of noise. The model's
  roles are read from the model itself, built at a small size (:func:`model_roles`).
* **Ranges.** Every hyperparameter is ``base × r_n**a × r_L**b``; the runs train in float32,
  so a value beyond float32's range (above 3.4e38, or a non-zero base rounded to 0) is inf
  or 0 in the model, and a factor beyond float64's is inf, or NaN on a base of 0, which
  :func:`spectral.scaling.scale_rules` refuses only when the run is built — after the base
  runs trained. :func:`check_ranges` computes each value at every size and η the sweep
  trains, with every base value it tries; a ``--ablate-variant`` exponent is checked against
  the range its own rule allows at the target width (:func:`exponent_range`), and named.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from functools import cache

from ..errors import SpecError
from .ablate import Ablation
from .exponent import FitKey, with_factor
from .options import RULES_K, SweepConfig, split_optimizer
from .tune import apply, candidates

__all__ = ["FLOAT32_MAX", "FLOAT32_SMALLEST", "check_plan", "check_ranges", "check_roles", "exponent_range",
           "model_roles"]

FLOAT32_MAX = 3.4028234663852886e38
"""The largest finite float32: a hyperparameter above it is inf in a float32 model."""
FLOAT32_SMALLEST = 2.0**-149
"""The smallest positive float32 (subnormal): a positive value below it is 0 in float32."""
_FLOAT64_BITS = 1024
"""``r**a`` overflows float64 once ``a * log2(r)`` reaches this."""


@cache
def model_roles(model: str, experts: int, top_k: int) -> tuple[str, ...]:
    """The roles of the reference model's parameters (the GPT, or the Llama), in the rules'
    order: the model built at a small size (about 40k parameters, on the CPU) and each
    parameter classified as the runs classify it.

    Not on the meta device: there torch's init functions (``normal_``) run through
    ``torch._refs``, whose wrapper imports ``torch._dynamo`` (about 2.6 s of CPU) on first use,
    and a sweep that only reports (``--report-only``) builds no other model."""
    from ..engine.roles import ALL_ROLE_NAMES
    from ..models.torch import GPT, Llama
    from ..torch.model.classify import classify

    if model == "llama":
        net = Llama(32, 2, vocab_size=256, block_size=8, head_dim=32)
    else:
        net = GPT(32, 2, vocab_size=256, block_size=8, head_dim=32, experts=experts, top_k=top_k)
    found = {classify(name, p) for name, p in net.named_parameters()}
    return tuple(r for r in ALL_ROLE_NAMES if r in found)


def _roles_of(cfg: SweepConfig) -> tuple[str, ...]:
    return model_roles(cfg.model, cfg.experts, min(cfg.top_k, cfg.experts) if cfg.experts else 1)


def _model_text(cfg: SweepConfig) -> str:
    if cfg.model == "llama":
        return "the Llama (--model llama)"
    return f"the GPT with {cfg.experts} experts" if cfg.experts else "the dense GPT (no --experts)"


def _lacks(cfg: SweepConfig, option: str, role: str) -> SpecError:
    roles = _roles_of(cfg)
    hint = "; --experts N gives the GPT a router" if role == "router_weight" and cfg.model == "gpt" else ""
    return SpecError(f"{option}: {_model_text(cfg)} has no {role} (its roles: {', '.join(roles)}){hint}")


def check_roles(cfg: SweepConfig, fit_keys: Sequence[FitKey] = (), variants: Sequence[Ablation] = (),
                tune: Sequence[tuple[str, tuple[float, ...]]] = ()) -> None:
    """Refuse an option that names a role the reference model does not have, in one line
    naming the roles it has. ``--fit-exponent`` must name one role (or layer): an optimizer
    or ``default`` has no exponent of its own."""
    from ..engine.roles import ALL_ROLE_NAMES

    roles = _roles_of(cfg)
    for key in fit_keys:
        if key.role not in ALL_ROLE_NAMES:
            raise SpecError(f"--fit-exponent {key.text}: name a role (multiplier.KEY: or a layer, input, hidden or output), "
                            f"not {key.name!r}; the model's roles: {', '.join(roles)}")
        if key.role not in roles:
            raise _lacks(cfg, f"--fit-exponent {key.text}", key.role)
    for v in variants:
        for role, _, _ in v.overrides:
            if role not in roles:
                raise _lacks(cfg, f"--ablate-variant {_variant_text(v)}", role)
    named: list[tuple[str, Iterable[str]]] = [
        ("--lr-scale", cfg.lr_scale or {}), ("--init-scale", cfg.init_scale or {}),
        ("--multiplier", cfg.multiplier if isinstance(cfg.multiplier, dict) else {}),
    ]
    for key, _ in tune:
        kind, dot, name = key.partition(".")
        named.append((f"--tune {key}", [name] if dot and kind in ("lr", "init") else [key]))
    for option, keys in named:
        for k in keys:
            if k in ALL_ROLE_NAMES and k not in roles:
                raise _lacks(cfg, option, k)


def _variant_text(v: Ablation) -> str:
    """``lr.input_weight ∝ r_n^-0.5`` as the user typed it: ``lr.input_weight=-0.5``."""
    name, _, exponent = v.name.partition(" ∝ r_n^")
    return f"{name}={exponent}" if exponent else name


@cache
def _plan_rules(optimizer: str, k: int) -> tuple[dict[str, str], dict[str, dict[str, tuple[float, float]]]]:
    """(role -> optimizer, role -> HP -> (a, b)) of one optimizer pair: the generated
    module's ``OPTIMIZERS`` and ``RULES``, from the derivation (no file written)."""
    from ..transfer import plan
    from .muon_scale import engine_optimizer

    hidden, others = split_optimizer(optimizer)
    p = plan(engine_optimizer(hidden), None if others == hidden else engine_optimizer(others), k)
    return dict(p.optimizers), p.exponents()


def _hparams(cfg: SweepConfig, parameterization: str, rules: dict[str, dict[str, tuple[float, float]]],
             width: int, depth: int, log2_lr: int) -> dict[str, dict[str, float]]:
    """Role -> HP -> value, as the generated module computes them for one run."""
    from ..scaling import BaseValues, scale_rules
    from ..transfer import DEFAULT_EPS

    optimizers, _ = _plan_rules(cfg.optimizer, RULES_K[parameterization])
    lr: float | dict[str, float] = 2.0**log2_lr
    if cfg.lr_scale:
        lr = {"default": 2.0**log2_lr} | {k: 2.0**log2_lr * v for k, v in cfg.lr_scale.items()}
    init = cfg.init_stds if cfg.init_stds is not None else cfg.init_std  # the Llama: its own std, scaled alike
    if cfg.model == "llama" and cfg.init_scale:
        init = {"default": cfg.init_std} | {k: cfg.init_std * v for k, v in cfg.init_scale.items()}
    if parameterization == "sp":  # the base size's values at every size
        width, depth = cfg.base_width, cfg.base_depth
    base = BaseValues(lr=lr, init_std=init, weight_decay=cfg.weight_decay, eps=cfg.eps, multiplier=cfg.multiplier)
    return scale_rules(optimizers, rules, cfg.base_width, cfg.base_depth, width, depth, base, DEFAULT_EPS)


_OPTIONS = {"lr": "--log2-lrs, --lr-scale", "init_std": "--init-std, --init-scale", "multiplier": "--multiplier",
            "weight_decay": "--weight-decay", "eps": "--eps"}


def _out_of_range(value: float, base: float) -> bool:
    if not math.isfinite(value) or abs(value) > FLOAT32_MAX:
        return True
    return base != 0 and abs(value) < FLOAT32_SMALLEST


def _check_values(cfg: SweepConfig, parameterization: str, rules: dict[str, dict[str, tuple[float, float]]],
                  sizes: Iterable[tuple[int, int]], also: str) -> None:
    from ..errors import ConfigError

    for log2_lr in sorted({min(cfg.log2_lrs), max(cfg.log2_lrs)}):  # each value is monotone in η
        at_base = _hparams(cfg, parameterization, rules, cfg.base_width, cfg.base_depth, log2_lr)
        for width, depth in sizes:
            where = f"at width {width}, depth {depth} ({cfg.optimizer}, {parameterization}, log2 η {log2_lr})"
            try:
                hp = _hparams(cfg, parameterization, rules, width, depth, log2_lr)
            except ConfigError as exc:
                raise SpecError(f"{where}: {exc}: a rule's factor overflows; change the base values{also}") from None
            for role, entry in hp.items():
                for name, value in entry.items():
                    if _out_of_range(value, at_base[role][name]):
                        raise SpecError(
                            f"{where}: the rules give {role} {name} {value:.3g}, beyond float32, the runs' dtype "
                            f"({FLOAT32_SMALLEST:.1e} to {FLOAT32_MAX:.1e}); change {_OPTIONS.get(name, 'it')}{also}")


def exponent_range(base: float, ratio: float) -> tuple[float, float]:
    """The width exponents ``a`` for which ``base × ratio**a`` (``ratio`` > 1) stays within
    float32 (a positive base) or ``ratio**a`` within float64 (a base of 0, which an overflow
    would turn into NaN)."""
    bits = math.log2(ratio)
    if base == 0:
        return -math.inf, (_FLOAT64_BITS - 1) / bits
    return (math.log2(FLOAT32_SMALLEST / base) / bits, math.log2(FLOAT32_MAX / base) / bits)


def _check_variant(cfgs: Sequence[SweepConfig], v: Ablation, target: int) -> None:
    """The variant's exponent against the range its rule allows at ``target`` with every
    base value the sweep tries (a std's exponent: half the variance's that the rule holds)."""
    _, rules = _plan_rules(cfgs[0].optimizer, RULES_K["mup"])
    for role, hp, stored in v.overrides:
        if hp not in rules.get(role, {}):
            raise SpecError(f"--ablate-variant {_variant_text(v)}: the rules have no {hp} for {role} "
                            f"(the rules of {role}: {', '.join(rules.get(role, {}))})")
        name = "init_std" if hp == "init_var" else hp
        exponent = stored / 2 if hp == "init_var" else stored
        lo, hi = -math.inf, math.inf
        for cfg in cfgs:
            for log2_lr in {min(cfg.log2_lrs), max(cfg.log2_lrs)}:
                base = _hparams(cfg, "mup", rules, cfg.base_width, cfg.base_depth, log2_lr)[role][name]
                a, b = exponent_range(abs(base), target / cfg.base_width)
                lo, hi = max(lo, a), min(hi, b)
        if not lo <= exponent <= hi:
            allowed = f"at most {hi:.4g}" if lo == -math.inf else f"within [{lo:.4g}, {hi:.4g}]"
            raise SpecError(
                f"--ablate-variant {_variant_text(v)}: at the target width {target} (r_n = "
                f"{target / cfgs[0].base_width:g}) {role}'s {name} would leave float32, the runs' dtype; "
                f"the exponent must be {allowed} here")


def check_ranges(cfg: SweepConfig, tune: Sequence[tuple[str, tuple[float, ...]]] = (),
                 fit_keys: Sequence[FitKey] = (), log2_factors: Sequence[int] = (),
                 variants: Sequence[Ablation] | None = None) -> None:
    """Every value the sweep's rules give, at every size and η it trains, with every base
    value it tries (``--tune``'s candidates, ``--fit-exponent``'s factors), within float32;
    ``variants`` (``--ablate``'s, a list: the ablation) checked by :func:`_check_variant`."""
    tried = [apply(cfg, c) for c in candidates(cfg.multiplier, list(tune))] if tune else [cfg]
    base_size = [(cfg.base_width, cfg.base_depth)]
    if variants is not None:  # --ablate: the base size and the target width at the base depth
        target = max(cfg.widths)
        if target <= cfg.base_width:
            return  # refused by the ablation itself, in its own words
        for v in variants:
            _check_variant(tried, v, target)
        sizes = [*base_size, (target, cfg.base_depth)]
        params: Sequence[str] = ("mup", "sp")
    elif fit_keys:
        tried = [with_factor(c, key, 2.0**e) for c in tried for key in fit_keys for e in log2_factors]
        sizes = [*base_size, *cfg.sizes("width"), *cfg.sizes("depth")]
        params = ("mup",)
    else:
        sizes = [*base_size, *cfg.sizes("width"), *cfg.sizes("depth")]
        params = tuple(cfg.parameterizations)
    also = (" or --tune" if tune else "") + (" or --log2-factors" if fit_keys else "")
    for c in tried:
        for p in params:
            _, rules = _plan_rules(c.optimizer, RULES_K[p])
            _check_values(c, p, rules, sizes, also)


def check_plan(cfgs: Sequence[SweepConfig], tune: Sequence[tuple[str, tuple[float, ...]]],
               fit_keys: Sequence[FitKey], log2_factors: Sequence[int], variants: Sequence[Ablation] | None) -> None:
    """:func:`check_roles` and :func:`check_ranges` for each optimizer's config: what
    ``spectral sweep`` runs before it makes a folder, writes a file or trains."""
    for cfg in cfgs:
        check_roles(cfg, fit_keys, variants or (), tune)
        check_ranges(cfg, tune, fit_keys, log2_factors, variants)

