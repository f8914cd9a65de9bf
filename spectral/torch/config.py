"""A generated config's API: its numbers (TorchRules) and the functions that apply them.

``spectral codegen`` writes ``CONFIG = Config(...)`` and binds ``hparams = CONFIG.hparams``
and so on, so a user calls plain functions; each method here passes the config to the
function of the module that owns the concern.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from spectral.scaling import BaseValue
from spectral.torch.classify import AdapterLike, Patterns
from spectral.torch.check import check_model
from spectral.torch.composite import CompositeOptimizer
from spectral.torch.export import fold_into_weights
from spectral.torch.hooks import MultiplierHandle, install_multipliers
from spectral.torch.init import init_by_role
from spectral.torch.optim import build_composite, role_param_groups
from spectral.torch.rules import TorchRules


class Config(TorchRules):
    """One config's rules with the runtime's functions bound to them."""

    def apply_multipliers(
        self,
        model: nn.Module,
        width: float,
        depth: float,
        *,
        multiplier: BaseValue = 1.0,
        adapter: AdapterLike | None = None,
        patterns: Patterns | None = None,
    ) -> MultiplierHandle:
        return install_multipliers(
            self,
            model,
            width,
            depth,
            multiplier=multiplier,
            adapter=adapter,
            patterns=patterns,
        )

    def init_(
        self,
        model: nn.Module,
        width: float,
        depth: float,
        init_std: BaseValue = 0.02,
        *,
        patterns: Patterns | None = None,
        adapter: AdapterLike | None = None,
        multiplier: BaseValue = 1.0,
    ) -> None:
        init_by_role(
            self,
            model,
            width,
            depth,
            init_std,
            patterns=patterns,
            adapter=adapter,
            multiplier=multiplier,
        )

    def param_groups(
        self,
        model: nn.Module,
        width: float,
        depth: float,
        *,
        lr: BaseValue,
        weight_decay: BaseValue = 0.0,
        eps: BaseValue | None = None,
        init_std: BaseValue | None = None,
        multiplier: BaseValue = 1.0,
        patterns: Patterns | None = None,
        adapter: AdapterLike | None = None,
    ) -> list[dict[str, Any]]:
        return role_param_groups(
            self,
            model,
            width,
            depth,
            lr=lr,
            weight_decay=weight_decay,
            eps=eps,
            init_std=init_std,
            multiplier=multiplier,
            patterns=patterns,
            adapter=adapter,
        )

    def build_optimizers(
        self,
        model: nn.Module,
        width: float,
        depth: float,
        *,
        factories: Mapping[str, Callable[..., torch.optim.Optimizer]] | None = None,
        optimizer_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
        patterns: Patterns | None = None,
        adapter: AdapterLike | None = None,
        multipliers_in_forward: bool | None = None,
        **base: Any,
    ) -> CompositeOptimizer:
        return build_composite(
            self,
            model,
            width,
            depth,
            factories=factories,
            optimizer_kwargs=optimizer_kwargs,
            patterns=patterns,
            adapter=adapter,
            multipliers_in_forward=multipliers_in_forward,
            **base,
        )

    def check(
        self,
        model: nn.Module,
        width: float,
        depth: float,
        optimizer: torch.optim.Optimizer | None = None,
        *,
        multiplier: BaseValue = 1.0,
        head_dim: int | None = None,
        patterns: Patterns | None = None,
        adapter: AdapterLike | None = None,
        example_input: Any = None,
        measure: bool = True,
        **base: Any,
    ) -> list[str]:
        return check_model(
            self,
            model,
            width,
            depth,
            optimizer,
            multiplier=multiplier,
            head_dim=head_dim,
            patterns=patterns,
            adapter=adapter,
            example_input=example_input,
            measure=measure,
            **base,
        )

    def fold_multipliers(
        self,
        model: nn.Module,
        width: float,
        depth: float,
        *,
        multiplier: BaseValue = 1.0,
        adapter: AdapterLike | None = None,
    ) -> list[str]:
        return fold_into_weights(
            self, model, width, depth, multiplier=multiplier, adapter=adapter
        )


for _method, _function in (
    ("apply_multipliers", install_multipliers),
    ("init_", init_by_role),
    ("param_groups", role_param_groups),
    ("build_optimizers", build_composite),
    ("check", check_model),
    ("fold_multipliers", fold_into_weights),
):
    # the bound API shows the function's own documentation
    getattr(Config, _method).__doc__ = _function.__doc__
