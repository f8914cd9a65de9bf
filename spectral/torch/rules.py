"""The numbers of a generated config, with the implementations that take its steps."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch

from spectral.optimizers.entry import TorchImpl
from spectral.scaling import Rules
from spectral.torch.factories import TorchFactory


@dataclass(frozen=True)
class TorchRules(Rules):
    """:class:`spectral.scaling.Rules` and, per optimizer, the torch implementation."""

    implementations: Mapping[str, TorchImpl] = field(default_factory=dict)
    """Optimizer name -> the implementation record (a user's declaration has none)."""

    def factories(self) -> dict[str, Callable[..., torch.optim.Optimizer]]:
        """Optimizer name -> function(param_groups, **kwargs) building the implementation."""
        return {
            name: TorchFactory(name, impl)
            for name, impl in self.implementations.items()
        }
