"""A generated JAX config's API: its numbers (JaxRules) and the functions that apply them.

``spectral codegen --framework jax`` writes ``CONFIG = Config(...)`` and binds ``init =
CONFIG.init`` and so on, so a user calls plain functions; each method here passes the
config to the function of the module that owns the concern. The runtime functions have
other names than the bindings (init_params, build_optimizer) because ``--vendor`` lays
this package and the bindings out in one namespace.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import optax

from spectral.jax.init import init_params
from spectral.jax.labels import AdapterLike
from spectral.jax.optim import build_optimizer
from spectral.jax.rules import JaxRules
from spectral.patterns import Patterns
from spectral.scaling import BaseValue


class Config(JaxRules):
    """One config's rules with the runtime's functions bound to them."""

    def init(
        self,
        params: Any,
        key: jax.Array,
        width: float,
        depth: float,
        *,
        init_std: BaseValue = 0.02,
        patterns: Patterns | None = None,
        adapter: AdapterLike | None = None,
    ) -> Any:
        return init_params(
            self,
            params,
            key,
            width,
            depth,
            init_std=init_std,
            patterns=patterns,
            adapter=adapter,
        )

    def optimizer(
        self,
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
        transforms: Mapping[str, Callable[..., optax.GradientTransformation]]
        | None = None,
        optimizer_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
        patterns: Patterns | None = None,
        adapter: AdapterLike | None = None,
    ) -> optax.GradientTransformation:
        return build_optimizer(
            self,
            params,
            width,
            depth,
            lr=lr,
            weight_decay=weight_decay,
            eps=eps,
            init_std=init_std,
            multiplier=multiplier,
            schedule=schedule,
            transforms=transforms,
            optimizer_kwargs=optimizer_kwargs,
            patterns=patterns,
            adapter=adapter,
        )


# the bound API shows the runtime function's own documentation
Config.init.__doc__ = init_params.__doc__
Config.optimizer.__doc__ = build_optimizer.__doc__
