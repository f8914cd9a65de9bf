"""One optax transformation over the real optax optimizers, one per role.

optax.multi_transform routes each leaf to its role's transformation by the labels of
spectral.jax.labels; each transformation is built with the learning rate, weight decay and
eps that Rules.hparams gives its role, so the numbers applied are the numbers printed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import optax

from spectral.errors import ConfigError, UnsupportedModelError
from spectral.jax.labels import AdapterLike, as_adapter, labels, placed
from spectral.jax.rules import JaxRules
from spectral.patterns import Patterns
from spectral.scaling import BaseValue


def _times(schedule: Callable[[Any], Any], lr: float) -> Callable[[Any], Any]:
    def rate(count: Any) -> Any:
        return lr * schedule(count)

    return rate


JAX_MOMENTUM_KEYS = ("b1", "b2", "momentum", "decay")
"""The optax keywords that hold a momentum ``beta`` (Adam's b1, b2; SGD's momentum; RMSprop's decay)."""


def _jax_moved_momenta(
    fn: Callable[..., Any], kwargs: Mapping[str, Any], factor: float, where: str
) -> dict[str, float]:
    """The momenta a batch rule moves: each ``1 - beta`` (the kwargs' or the function's
    default) times ``factor``; nothing at factor 1.0 (the base run), a result outside
    [0, 1) refused in one line."""
    if factor == 1.0:
        return {}
    # the function's own defaults (no inspect: the vendored module imports jax, optax
    # and a few standard modules only); a callable without them: the kwargs alone
    defaults = dict(getattr(fn, "__kwdefaults__", None) or {})
    code, given = getattr(fn, "__code__", None), getattr(fn, "__defaults__", None) or ()
    if code is not None and given:
        names = code.co_varnames[: code.co_argcount]
        defaults.update(zip(names[len(names) - len(given) :], given, strict=True))
    out = {}
    for key in JAX_MOMENTUM_KEYS:
        beta = kwargs.get(key, defaults.get(key))
        if isinstance(beta, float) and 0.0 < beta < 1.0:
            moved = 1.0 - (1.0 - beta) * factor
            if not 0.0 <= moved < 1.0:
                raise ConfigError(
                    f"{where} {key}: the batch rule moves 1 - beta = {1.0 - beta:g} by "
                    f"{factor:g}, past 1: this batch is beyond what the rule covers; "
                    "pass a batch nearer the base's"
                )
            out[key] = moved
    return out


def _roles(
    rules: JaxRules, leaves: list[tuple[str, Any, str]], known: Mapping[str, Any]
) -> dict[str, str]:
    """Role -> optimizer for the roles the leaves have; every refusal names the leaf."""
    roles: dict[str, str] = {}
    for path, leaf, role in leaves:
        rules.covered(role, f"parameter {path!r}")
        kind = rules.optimizers[role]
        shape = tuple(getattr(leaf, "shape", ()))
        if rules.matrix_only[kind] and len(shape) != 2:
            raise UnsupportedModelError(
                f"parameter {path!r} (shape {shape}) has role {role}, "
                f"trained by {kind}, which takes 2-D matrices only"
            )
        if kind not in known:
            why = rules.missing.get(kind, f"{kind}: no optax implementation known.")
            raise ConfigError(
                f"{why} Pass transforms={ {kind: 'fn'} }, fn(*, learning_rate, "
                "weight_decay, **kwargs) returning an optax.GradientTransformation"
            )
        roles[role] = kind
    return roles


def build_optimizer(
    rules: JaxRules,
    params: Any,
    width: float,
    depth: float,
    *,
    lr: BaseValue,
    weight_decay: BaseValue = 0.0,
    eps: BaseValue | None = None,
    init_std: BaseValue | None = None,
    multiplier: BaseValue = 1.0,
    schedule: Callable[[Any], Any] | None = None,
    transforms: Mapping[str, Callable[..., optax.GradientTransformation]] | None = None,
    optimizer_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
    patterns: Patterns | None = None,
    adapter: AdapterLike | None = None,
    **run: float | None,
) -> optax.GradientTransformation:
    """optax.multi_transform over the real optax optimizers, one transformation per role.

    run: the run's horizon and batch (steps= or tokens=, batch=, and base_steps=,
    base_tokens=, base_batch= where the config records none), which move each role's lr,
    weight decay and eps by the rules along them (ALONG), and the momenta where a law moves
    them (Adam's b1, b2: 1 - beta times r_B); none given: the base run's.

    Each role's transformation gets the learning rate, weight decay and eps hparams()
    gives it (times schedule(step) when a schedule is given, e.g.
    optax.cosine_decay_schedule(1.0, steps)). The model's __call__ must apply the block
    multipliers (multipliers(width, depth)): the rules assume them. optimizer_kwargs =
    {"adamw": {"b2": 0.95}} passes extra arguments to one implementation; transforms =
    {"name": fn} replaces or adds one, fn(*, learning_rate, weight_decay[, eps],
    **kwargs) returning an optax transformation. init_std is accepted (and ignored) so
    that one dict of base values serves every function.
    """
    leaves = placed(params, patterns, adapter, rules)
    # the family found from these paths labels every tree tx is later handed
    family = as_adapter(adapter, (path for path, _, _ in leaves))
    known = {**rules.transforms(), **(transforms or {})}
    roles = _roles(rules, leaves, known)
    hp = rules.hparams(
        width,
        depth,
        lr=lr,
        weight_decay=weight_decay,
        eps=eps,
        multiplier=multiplier,
        **run,
    )
    momenta = rules.momentum_factors(**run)
    parts: dict[str, optax.GradientTransformation] = {}
    for role, kind in roles.items():
        kwargs = dict((optimizer_kwargs or {}).get(kind, {}))
        taken = sorted({"learning_rate", "weight_decay", "eps"} & set(kwargs))
        if taken:
            raise ConfigError(
                f"optimizer_kwargs[{kind!r}] sets {', '.join(taken)}, which the rules set "
                "per role: pass the base values lr=, weight_decay=, eps= instead"
            )
        h = hp[role]
        rate = h["lr"] if schedule is None else _times(schedule, h["lr"])
        values: dict[str, Any] = {
            "learning_rate": rate,
            "weight_decay": h["weight_decay"],
        }
        if "eps" in h:
            values["eps"] = h["eps"]
        kwargs.update(
            _jax_moved_momenta(known[kind], kwargs, momenta[role], f"{kind} {role}")
        )
        parts[role] = known[kind](**values, **kwargs)

    def role_labels(tree: Any) -> Any:
        return labels(tree, patterns=patterns, adapter=family, rules=rules)

    return optax.multi_transform(parts, role_labels)
