"""Rules × base values → numbers: the one piece of arithmetic both sides of spectral share.

Every hyperparameter of a role is ``base × r_n**a × r_L**b`` with ``r_n = width/base_width``
and ``r_L = depth/base_depth``; the initial standard deviation is
``init_std × sqrt(r_n**a × r_L**b)`` from the variance rule. ``spectral transfer`` imports this
module, and so do the runtimes (:mod:`spectral.torch`, :mod:`spectral.jax`) that every
generated config module calls (``--vendor`` copies these lines into the file), so the
printed numbers and the applied numbers come from the same lines. Standard library only.

Base values. Each of ``lr``, ``init_std``, ``weight_decay``, ``eps`` and ``multiplier`` is
one number, or a mapping whose keys are role names (``"hidden_weight"``), optimizer names
(``"adamw"``) or ``"default"``; a role takes the first of: its own key, its optimizer's
key, ``"default"``, the built-in default below. The built-in defaults are what training
code usually does:

* ``weight_decay`` and ``init_std``: a plain number (or an optimizer/default key) reaches
  the weight roles only. Biases and normalisation gains (the bias roles) get no weight
  decay and start at 0 — the paper's base bias variance (App. E.1), nanoGPT's
  ``configure_optimizers`` — unless their role is named: ``weight_decay={"default": 0.1,
  "hidden_bias": 0.1}``.
* ``eps``: each implementation's default (``default_eps``) where none is given.
* ``multiplier``: 1; keys may also be layers (``"input"``, ``"hidden"``, ``"output"``).
* ``lr``: no default; every role needs one.

Horizon and batch (issue 49). ``steps`` or ``tokens`` and ``batch`` name the run; the base
values were tuned at ``base_steps`` or ``base_tokens`` and ``base_batch`` (a generated
config records the ones it was generated with). Each role's lr, weight decay and eps is then
also multiplied by ``r_D**d * r_B**b`` (``ALONG`` of the config, by the optimizer that
trains it: ``r_D`` the ratio of training tokens, ``r_B`` of batch sizes; steps count as
``steps * batch`` tokens). Weight decay follows the timescale ``B / (lr * wd * D)``, so
``lr * wd * D / B`` is the base's. A run that names neither is the base's, and every
number is exactly what it was without them; a batch given without a horizon keeps the
token horizon (fewer steps).

A dense input layer (not an embedding) is drawn with ``init_std / sqrt(d_in)``: its input
variance is ``σ²/d_0`` (App. C), ``σ²`` for one-hot inputs. Give ``d_in`` to get that number
for ``input_weight``; without it the number is the embedding's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Self

from spectral.errors import ConfigError, ConfigTypeError, UnsupportedModelError

__all__ = [
    "BIAS_ROLES",
    "BaseValue",
    "BaseValues",
    "EXTRA_ROLES",
    "KEEP_INIT_ROLES",
    "LAYER_OF",
    "MIN_K",
    "Rules",
    "base_value",
    "keeps_own_init",
    "RUN_KEYS",
    "along_factor",
    "ratios",
    "run_ratios",
    "scale_rules",
    "unknown_role",
]

BaseValue = float | Mapping[str, float]
"""One number, or role / optimizer / "default" -> number (see base_value)."""


@dataclass(frozen=True)
class BaseValues:
    """The base values tuned at (base_width, base_depth), as every rule entry point takes
    them (the module docstring says how each reaches each role). The functions users call
    take them as keywords (``hparams(width, depth, lr=3e-3, weight_decay=0.1)``) and read
    them through :meth:`of`, so the names, defaults and checks live here only."""

    lr: BaseValue | None = None
    """No default: every role needs one where numbers for training are asked for."""
    init_std: BaseValue = 0.02
    weight_decay: BaseValue = 0.0
    eps: BaseValue | None = None
    """None: each implementation's default (``default_eps``)."""
    multiplier: BaseValue = 1.0
    d_in: int | None = None
    """The fan-in of a dense input layer, whose std is ``init_std / sqrt(d_in)``."""
    steps: float | None = None
    """The run's horizon in optimizer steps (or give ``tokens``); None: the base's."""
    tokens: float | None = None
    """The run's horizon in training tokens (steps x batch); None: the base's."""
    batch: float | None = None
    """The run's batch size (sequences or tokens, as base_batch); None: the base's."""
    base_steps: float | None = None
    """The horizon the base values were tuned at, in steps (default: the config's)."""
    base_tokens: float | None = None
    """The horizon the base values were tuned at, in tokens (default: the config's)."""
    base_batch: float | None = None
    """The batch the base values were tuned at (default: the config's)."""

    @classmethod
    def of(cls, values: Mapping[str, Any], what: str = "base values") -> Self:
        """The keywords a user gave, checked: an unknown name is one line naming the known
        ones (a typo such as ``weight_deacy=`` must not be dropped silently)."""
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ConfigTypeError(
                f"{what}: unknown keyword(s) {', '.join(unknown)}; the base values are "
                f"{', '.join(known)}"
            )
        return cls(**values)

    def given(self) -> dict[str, Any]:
        """The values that differ from the defaults, as keywords (lr always)."""
        defaults = BaseValues()
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name == "lr" or getattr(self, f.name) != getattr(defaults, f.name)
        }


LAYER_OF: dict[str, str] = {
    "input_weight": "input",
    "hidden_weight": "hidden",
    "output_weight": "output",
    "input_bias": "input",
    "hidden_bias": "hidden",
    "router_weight": "router",
    "output_bias": "output",
    "outer_weight": "outer",
    "outer_bias": "outer",
    "rank_down_weight": "hidden",
    "normed_rank_down_weight": "hidden",
    "rank_up_weight": "hidden",
    "hidden_vector": "hidden",
}
"""Role -> the layer whose block multiplier it shares. A router (an E x n gate in a block)
has its own, on its logits, and so has a width -> width map outside the stream
(outer_weight, a pooler; its bias outer_bias): Theta(1) in every derivation, so only a
base value given for them changes anything (docs/router.md). The readout's bias shares
alpha_out (the hook scales its whole output); rank factors and vectors a block's."""

EXTRA_ROLES = (
    "output_bias",
    "outer_weight",
    "outer_bias",
    "rank_down_weight",
    "normed_rank_down_weight",
    "rank_up_weight",
    "hidden_vector",
)
"""The roles placed by their dimensions (docs/roles.md): a config has them only when
generated with --all-roles (load_generated(..., all_roles=True))."""

MIN_K: dict[str, int] = {role: 2 for role in EXTRA_ROLES if "rank_" in role}
"""Roles only blocks of k >= 2 maps hold: a fixed-rank factor (the rank_ roles) is one of at
least two maps of its branch (n -> r -> n), so a k = 1 config has no rule for it."""


def unknown_role(pattern: object, role: object) -> str | None:
    """The one-line problem with a ``pattern -> role`` pair whose role is misspelt
    (``hidden_wieght``); None for a known role. Every runtime's ``patterns=`` and adapter
    roles are checked with it before any parameter is matched, so a typo is named as such
    rather than surfacing as parameters that match no pattern."""
    if isinstance(role, str) and role in LAYER_OF:
        return None
    return f"pattern {pattern!r} maps to unknown role {role!r} (roles: {', '.join(LAYER_OF)})"


MAX_SIZE = 2**53
"""Largest width or depth: every integer up to it is an exact float."""

BIAS_ROLES = ("input_bias", "hidden_bias", "output_bias", "outer_bias", "hidden_vector")
"""Biases, normalisation gains and per-channel vectors: no weight decay and zero init
unless named (a vector keeps its own values instead: KEEP_INIT_ROLES)."""

KEEP_INIT_ROLES = ("hidden_vector",)
"""Per-channel vectors that are neither biases nor norm gains (SSM A_log, D, dt_bias, a
depthwise conv kernel, layer-scale gains): init_ keeps the model's own values unless an
init std is named for their role, since zeroing them can kill a branch (Mamba's mixer)."""

_WEIGHT_ONLY = ("weight_decay", "init_std")


def base_value(
    value: BaseValue | None, role: str, optimizer: str, what: str
) -> float | None:
    """The base value of `what` for one role (None: use the built-in default).

    A number reaches every role, except that weight_decay and init_std reach weight roles
    only (bias roles: None, i.e. 0). In a mapping a role takes its own key, then its
    optimizer's, then "default" (bias roles skip the last two for weight_decay and
    init_std); a multiplier may also be keyed by layer ("input", "hidden", "output").
    """
    bias_only_by_name = what in _WEIGHT_ONLY and role in BIAS_ROLES
    if value is None:
        return None
    if not isinstance(value, Mapping):
        return None if bias_only_by_name else _number(value, what, role)
    keys = [role]
    if what == "multiplier":
        keys.append(LAYER_OF[role])
    if not bias_only_by_name:
        keys += [optimizer, "default"]
    for key in keys:
        if key in value:
            return _number(value[key], what, role)
    return None


def keeps_own_init(role: str, init_std: BaseValue | None) -> bool:
    """Whether init_ leaves a parameter of this role as the model made it: a per-channel
    vector (KEEP_INIT_ROLES) whose role is not a key of init_std."""
    named = isinstance(init_std, Mapping) and role in init_std
    return role in KEEP_INIT_ROLES and not named


def _number(value: object, what: str, role: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigTypeError(f"{what} for {role}: expected a number, got {value!r}")
    x = float(value)
    if not math.isfinite(x) or x < 0:
        raise ConfigError(
            f"{what} for {role}: expected a finite number >= 0, got {value!r}"
        )
    return x


def _check_keys(
    value: BaseValue | None, optimizers: Mapping[str, str], what: str
) -> None:
    """Refuse keys that name nothing, so a typo ("hiden_weight") is not silently ignored."""
    if not isinstance(value, Mapping):
        return
    known = {*LAYER_OF, *optimizers.values(), "default"}
    if what == "multiplier":
        known |= set(LAYER_OF.values())
    unknown = sorted(str(k) for k in value if k not in known)
    if unknown:
        raise ConfigError(
            f"{what}: unknown key(s) {', '.join(unknown)}; use role names "
            f"({', '.join(LAYER_OF)}), optimizer names "
            f"({', '.join(dict.fromkeys(optimizers.values()))}) or 'default'"
        )


def _power(r: float, e: float) -> float:
    # a ratio raised to a large exponent overflows: inf here, refused by the caller
    try:
        return r**e
    except OverflowError:
        return math.inf


def _factor(rule: tuple[float, float], r_n: float, r_L: float) -> float:
    a, b = rule
    return _power(r_n, a) * _power(r_L, b)


def ratios(
    width: float, depth: float, base_width: float, base_depth: float
) -> tuple[float, float]:
    """(r_n, r_L); sizes must be positive whole numbers (an int, or a float such as 1024.0)
    below 2**53, so that width / base_width is an exact float."""
    for what, v in (("width", width), ("depth", depth)):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ConfigTypeError(f"{what} must be a positive integer, got {v!r}")
        if isinstance(v, int) and v > MAX_SIZE:
            raise ConfigError(f"{what} must be at most 2**53, got {len(str(v))} digits")
        if not (math.isfinite(v) and 1 <= v <= MAX_SIZE and float(v).is_integer()):
            raise ConfigError(
                f"{what} must be a positive integer up to 2**53, got {v!r}"
            )
    return width / base_width, depth / base_depth


RUN_KEYS = ("steps", "tokens", "batch", "base_steps", "base_tokens", "base_batch")
"""The base values that name a run's horizon and batch (see the module docstring)."""

MAX_RUN = 2.0**80
"""Largest steps, tokens or batch accepted (a run of 10**24 tokens is far beyond any)."""


def _run_number(what: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigTypeError(f"{what} must be a number, got {value!r}")
    if isinstance(value, int) and value > MAX_RUN:
        raise ConfigError(f"{what} must be at most 2**80, got {len(str(value))} digits")
    x = float(value)
    if not (math.isfinite(x) and 1 <= x <= MAX_RUN):
        raise ConfigError(f"{what} must be a number from 1 to 2**80, got {value!r}")
    return x


def run_ratios(
    run: Mapping[str, float | None], defaults: Mapping[str, float] | None = None
) -> tuple[float, float]:
    """(r_D, r_B): the run's training tokens and batch over the base's.

    ``run`` holds any of RUN_KEYS (None: not given); ``defaults`` the base_* a config was
    generated with. Steps count as steps * batch tokens. Nothing given: (1.0, 1.0).

    >>> run_ratios({"steps": 2000, "base_steps": 1000})
    (2.0, 1.0)
    >>> run_ratios({"steps": 1000, "batch": 512}, {"base_steps": 1000, "base_batch": 128})
    (4.0, 4.0)
    >>> run_ratios({"batch": 512, "base_batch": 128})
    (1.0, 4.0)
    """
    given = {
        k: _run_number(k, v) for k, v in run.items() if k in RUN_KEYS and v is not None
    }
    unknown = sorted(set(run) - set(RUN_KEYS))
    if unknown:
        raise ConfigTypeError(
            f"unknown run value(s) {', '.join(unknown)}; use {', '.join(RUN_KEYS)}"
        )
    base = {k: _run_number(k, v) for k, v in (defaults or {}).items() if v is not None}
    base.update({k: v for k, v in given.items() if k.startswith("base_")})
    if "steps" in given and "tokens" in given:
        raise ConfigError("give the run's horizon as steps or as tokens, not both")
    r_b = 1.0
    if "batch" in given:
        if "base_batch" not in base:
            raise ConfigError(
                "batch: no base_batch to compare it with; pass base_batch (the batch the "
                "base values were tuned at) or generate the config with --base-batch"
            )
        r_b = given["batch"] / base["base_batch"]
    r_d = 1.0
    if "tokens" in given:
        base_tokens = base.get("base_tokens")
        if base_tokens is None and {"base_steps", "base_batch"} <= set(base):
            base_tokens = base["base_steps"] * base["base_batch"]
        if base_tokens is None:
            raise ConfigError(
                "tokens: no base_tokens (or base_steps and base_batch) to compare it with; "
                "pass it or generate the config with --base-tokens"
            )
        r_d = given["tokens"] / base_tokens
    elif "steps" in given:
        base_steps = base.get("base_steps")
        if base_steps is None and {"base_tokens", "base_batch"} <= set(base):
            base_steps = base["base_tokens"] / base["base_batch"]
        if base_steps is None:
            raise ConfigError(
                "steps: no base_steps (or base_tokens and base_batch) to compare it with; "
                "pass it or generate the config with --base-steps"
            )
        r_d = given["steps"] / base_steps * r_b
    for what, r in (("tokens ratio", r_d), ("batch ratio", r_b)):
        if not (math.isfinite(r) and r > 0):
            raise ConfigError(f"the run's {what} to the base's is not a positive float")
    return r_d, r_b


def along_factor(
    along: Mapping[str, Mapping[str, tuple[float, float]]] | None,
    optimizer: str,
    hp: str,
    r_d: float,
    r_b: float,
) -> float:
    """``r_D**d * r_B**b`` of one HP of the roles an optimizer trains; exactly 1.0 at the
    base horizon and batch or where the config has no rule along them."""
    if (r_d == 1.0 and r_b == 1.0) or not along or hp not in along.get(optimizer, {}):
        return 1.0
    return _factor(along[optimizer][hp], r_d, r_b)


def scale_rules(
    optimizers: Mapping[str, str],
    rules: Mapping[str, Mapping[str, tuple[float, float]]],
    base_width: float,
    base_depth: float,
    width: float,
    depth: float,
    base: BaseValues,
    default_eps: Mapping[str, float] | None = None,
    along: Mapping[str, Mapping[str, tuple[float, float]]] | None = None,
    base_run: Mapping[str, float] | None = None,
) -> dict[str, dict[str, float]]:
    """Role -> multiplier, init_std, lr, weight_decay (and eps) at (width, depth).

    `optimizers` maps role -> optimizer name, `rules` role -> HP -> (a, b). Base values
    as described in the module docstring (:class:`BaseValues`). `along`: role -> HP ->
    (d, b), the rules along the horizon and the batch; `base_run`: the base_steps,
    base_tokens, base_batch a config was generated with (the defaults of the run's).
    """
    if base.lr is None:
        raise ConfigTypeError(
            "missing the base value lr (the learning rate tuned at the base size)"
        )
    lr, init_std, weight_decay = base.lr, base.init_std, base.weight_decay
    eps, multiplier, d_in = base.eps, base.multiplier, base.d_in
    r_n, r_L = ratios(width, depth, base_width, base_depth)
    r_d, r_b = run_ratios({k: getattr(base, k) for k in RUN_KEYS}, base_run)
    if (r_d, r_b) != (1.0, 1.0) and not along:
        raise ConfigError(
            "no rules along the horizon and the batch here (a config generated before "
            "them); regenerate it to pass steps, tokens or batch"
        )
    if d_in is not None and (
        isinstance(d_in, bool) or not isinstance(d_in, int) or d_in < 1
    ):
        raise ConfigError(f"d_in must be a positive integer, got {d_in!r}")
    for what, value in (
        ("lr", lr),
        ("init_std", init_std),
        ("weight_decay", weight_decay),
        ("eps", eps),
        ("multiplier", multiplier),
    ):
        _check_keys(value, optimizers, what)
    out: dict[str, dict[str, float]] = {}
    for role, opt in optimizers.items():
        rule = rules[role]
        base_lr = base_value(lr, role, opt, "lr")
        if base_lr is None:
            raise ConfigError(
                f"lr: no value for {role} (trained by {opt}); add it or 'default'"
            )
        std = base_value(init_std, role, opt, "init_std") or 0.0
        if role == "input_weight" and d_in is not None:
            std /= math.sqrt(d_in)
        alpha = base_value(multiplier, role, opt, "multiplier")
        hp = {
            "multiplier": (1.0 if alpha is None else alpha)
            * _factor(rule["multiplier"], r_n, r_L),
            "init_std": std * math.sqrt(_factor(rule["init_var"], r_n, r_L)),
            "lr": base_lr * _factor(rule["lr"], r_n, r_L),
            "weight_decay": (base_value(weight_decay, role, opt, "weight_decay") or 0.0)
            * _factor(rule["weight_decay"], r_n, r_L),
        }
        if "eps" in rule:
            base_eps = base_value(eps, role, opt, "eps")
            if base_eps is None:
                if default_eps is None or opt not in default_eps:
                    raise ConfigError(
                        f"{opt} has an eps rule but no known default; pass eps"
                    )
                base_eps = default_eps[opt]
            hp["eps"] = base_eps * _factor(rule["eps"], r_n, r_L)
        for key in ("lr", "weight_decay", "eps") if (r_d, r_b) != (1.0, 1.0) else ():
            if key in hp:
                hp[key] *= along_factor(along, opt, key, r_d, r_b)
        _check_finite(hp, role, width, depth)
        out[role] = hp
    return out


def _check_finite(
    hp: Mapping[str, float], role: str, width: float, depth: float
) -> None:
    for key, x in hp.items():
        if not math.isfinite(x):
            raise ConfigError(
                f"{key} of {role} at width {width}, depth {depth} is not a finite float"
            )


@dataclass(frozen=True)
class Rules:
    """The numbers of one generated config: base sizes, role -> optimizer, role -> HP -> (a, b).

    Every hyperparameter is ``base * r_n**a * r_L**b``; the methods turn base values into
    numbers at a width and depth (the config module's ``hparams``, ``multipliers`` and
    ``init_std_of``). The framework runtimes subclass it with what they build from them.
    """

    base_width: int
    base_depth: int
    k: int
    optimizers: Mapping[str, str]
    """Role -> the optimizer that trains it."""
    rules: Mapping[str, Mapping[str, tuple[float, float]]]
    """Role -> HP -> (a, b)."""
    matrix_only: Mapping[str, bool]
    """Optimizer -> whether it trains matrices only."""
    default_eps: Mapping[str, float]
    """Optimizer -> the implementation's default eps (the base value when none is given)."""
    eps_places: Mapping[str, tuple[str, int | None]]
    """Optimizer -> (param-group key holding its eps, index in a tuple or None)."""
    along: Mapping[str, Mapping[str, tuple[float, float]]] | None = None
    """Optimizer -> HP -> (d, b): HP = ... * r_D**d * r_B**b along the horizon and the
    batch, for every role it trains; None for a config generated before these rules (it
    refuses steps, tokens, batch)."""
    base_run: Mapping[str, float] = field(default_factory=dict)
    """base_steps, base_tokens, base_batch the config was generated with (may be empty)."""

    def hparams(
        self, width: float, depth: float, **base: Any
    ) -> dict[str, dict[str, float]]:
        """Role -> multiplier, init_std, lr, weight_decay (and eps) at this width and depth.

        Base values (:class:`BaseValues`: ``lr``, ``init_std``, ``weight_decay``, ``eps``,
        ``multiplier``, ``d_in``) are tuned at (base_width, base_depth): one number, or a
        dict keyed by role ("hidden_weight"), optimizer ("adamw") or "default" (see
        base_value). weight_decay and init_std reach biases and norm gains only when their
        role is named. eps=None takes each implementation's default. d_in: the fan-in of a
        dense input layer, whose std is init_std / sqrt(d_in) (init_ reads it from the
        layer; an embedding has none). Every number here is the one init_ and
        build_optimizers apply.
        """
        return scale_rules(
            self.optimizers,
            self.rules,
            self.base_width,
            self.base_depth,
            width,
            depth,
            BaseValues.of(base, "hparams"),
            self.default_eps,
            self.along,
            self.base_run,
        )

    def momentum_factors(self, **run: float | None) -> dict[str, float]:
        """Role -> the factor of every ``1 - beta`` of its optimizer at this horizon and
        batch (1.0 where held): ``beta' = 1 - (1 - beta) * factor`` (Adam's square-root
        rule moves it with the batch). Keywords: RUN_KEYS."""
        r_d, r_b = run_ratios(run, self.base_run)
        return {
            role: along_factor(self.along, opt, "momentum", r_d, r_b)
            for role, opt in self.optimizers.items()
        }

    def multipliers(
        self, width: float, depth: float, multiplier: BaseValue = 1.0
    ) -> dict[str, float]:
        """Block multipliers {"input": a_in, "hidden": a_hidden, "output": a_out}."""
        r_n, r_L = ratios(width, depth, self.base_width, self.base_depth)
        out = {}
        for layer in ("input", "hidden", "output"):
            role = f"{layer}_weight"
            alpha = base_value(
                multiplier, role, self.optimizers.get(role, ""), "multiplier"
            )
            out[layer] = (1.0 if alpha is None else alpha) * _factor(
                self.rules[role]["multiplier"], r_n, r_L
            )
        return out

    def init_std_of(
        self,
        role: str,
        width: float,
        depth: float,
        init_std: BaseValue = 0.02,
        d_in: int | None = None,
    ) -> float:
        """The initial standard deviation of one role (d_in: a dense input layer's fan-in)."""
        self.covered(role, "a parameter")
        r_n, r_L = ratios(width, depth, self.base_width, self.base_depth)
        std = base_value(init_std, role, self.optimizers[role], "init_std") or 0.0
        if role == "input_weight" and d_in is not None:
            std /= math.sqrt(d_in)
        return std * math.sqrt(_factor(self.rules[role]["init_var"], r_n, r_L))

    def init_ratio(self, role: str, width: float, depth: float) -> float:
        """The std of one role at (width, depth) divided by its std at the base size:
        ``sqrt(r_n**a * r_L**b)`` from the variance rule, exactly 1.0 at the base. The base
        value and a dense input layer's ``1/sqrt(d_in)`` are the same constant factor on
        both sides, so they cancel: init_ multiplies the model's own values by this."""
        self.covered(role, "a parameter")
        r_n, r_L = ratios(width, depth, self.base_width, self.base_depth)
        ratio = math.sqrt(_factor(self.rules[role]["init_var"], r_n, r_L))
        if not math.isfinite(ratio):
            raise ConfigError(
                f"init std ratio of {role} at width {width}, depth {depth} is not a finite float"
            )
        return ratio

    def covered(self, role: str, what: str) -> None:
        """Refuse a role that no optimizer of this config trains, naming ``what`` has it."""
        if role in self.optimizers:
            return
        if role not in LAYER_OF:
            raise ConfigError(f"{what}: unknown role {role!r}; see LAYER_OF")
        if role in EXTRA_ROLES and not any(r in self.optimizers for r in EXTRA_ROLES):
            raise UnsupportedModelError(
                f"{what} has role {role}, a role placed by its dimensions, which this config "
                "has no rule for: regenerate it with --all-roles (load_generated(..., "
                "all_roles=True)); see docs/roles.md"
            )
        if self.k < MIN_K.get(role, 1):
            raise UnsupportedModelError(
                f"{what} has role {role}, a fixed-rank factor, which blocks of k = {self.k} "
                f"map cannot hold (it is one of at least two maps of its branch, n -> r -> n); "
                f"regenerate with --k {MIN_K[role]} or more (docs/roles.md)"
            )
        raise UnsupportedModelError(
            f"{what} has role {role}, which no optimizer here trains (matrix-only: "
            f"{', '.join(k for k in sorted(self.matrix_only) if self.matrix_only[k])}). "
            "Regenerate with an --others optimizer that takes vectors, e.g. `--others "
            "adamw` (the paper's choice: AdamW for embeddings, head and biases), or use a "
            "model without biases and norm parameters."
        )
