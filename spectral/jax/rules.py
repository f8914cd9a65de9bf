"""The numbers of a generated JAX config, with the optax implementations that take its steps."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import optax

from spectral.jax.transforms import JaxTransform
from spectral.optimizers.entry import JaxImpl
from spectral.scaling import Rules


@dataclass(frozen=True)
class JaxRules(Rules):
    """:class:`spectral.scaling.Rules` and, per optimizer, its optax implementation."""

    implementations: Mapping[str, JaxImpl] = field(default_factory=dict)
    """Optimizer name -> the implementation record."""
    missing: Mapping[str, str] = field(default_factory=dict)
    """Optimizer name -> why there is no implementation (transforms= must give one)."""

    def transforms(self) -> dict[str, Callable[..., optax.GradientTransformation]]:
        """Optimizer name -> fn(*, learning_rate, weight_decay[, eps], **kwargs)."""
        return {
            name: JaxTransform(name, impl)
            for name, impl in self.implementations.items()
        }
