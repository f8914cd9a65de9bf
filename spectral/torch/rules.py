"""The numbers of a generated config, with the implementations that take its steps."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Self

import torch

from spectral.errors import ConfigError
from spectral.optimizers.entry import TorchImpl
from spectral.scaling import BaseValue, Rules
from spectral.torch.optim.factories import TorchFactory


@dataclass(frozen=True)
class TorchRules(Rules):
    """:class:`spectral.scaling.Rules` and, per optimizer, the torch implementation."""

    implementations: Mapping[str, TorchImpl] = field(default_factory=dict)
    """Optimizer name -> the implementation record (a user's declaration has none)."""
    absorbed: Mapping[str, tuple[float, float | None]] | None = None
    """The hook-free form (spectral.torch.apply.absorb): optimizer name -> (p, q), the degrees of
    its update and eps in the gradient; None for the hooked form."""

    def factories(self) -> dict[str, Callable[..., torch.optim.Optimizer]]:
        """Optimizer name -> function(param_groups, **kwargs) building the implementation."""
        return {
            name: TorchFactory(name, impl)
            for name, impl in self.implementations.items()
        }

    def absorbing(self, degrees: Mapping[str, tuple[float, float | None]]) -> Self:
        """The same rules in the hook-free form: every multiplier 1, the modules it scaled
        carrying it in their init, lr, weight decay and eps (degrees: optimizer -> (p, q))."""
        missing = sorted(set(self.optimizers.values()) - set(degrees))
        if missing:
            raise ConfigError(
                f"absorbing: no (p, q) for {', '.join(missing)}; regenerate the config "
                "with --absorb-multipliers"
            )
        return replace(self, absorbed=dict(degrees))

    def folded_multipliers(
        self, width: float, depth: float, multiplier: BaseValue = 1.0
    ) -> dict[str, float]:
        """The block multipliers of the hooked form, {"input", "hidden", "output"}: in the
        hook-free form, the factors its carrier modules' parameters hold."""
        return super().multipliers(width, depth, multiplier)

    def multipliers(
        self, width: float, depth: float, multiplier: BaseValue = 1.0
    ) -> dict[str, float]:
        """Block multipliers {"input": a_in, "hidden": a_hidden, "output": a_out}; all 1
        in the hook-free form (absorbed into the parameters)."""
        values = super().multipliers(width, depth, multiplier)
        if self.absorbed is None:
            return values
        return dict.fromkeys(values, 1.0)

    def hparams(
        self, width: float, depth: float, **base: Any
    ) -> dict[str, dict[str, float]]:
        """Role -> multiplier, init_std, lr, weight_decay (and eps) at this width and depth
        (see spectral.scaling.Rules.hparams). In the hook-free form every multiplier is 1,
        and these are the numbers of the parameters that carry none; the modules that
        carry one have theirs from spectral.torch.config.parameter_hparams."""
        out = super().hparams(width, depth, **base)
        if self.absorbed is not None:
            for values in out.values():
                values["multiplier"] = 1.0
        return out
