"""The momenta along the batch: each param group's ``1 - beta`` times its role's factor.

A declaration's ``momentum_batch`` law (Adam's square-root rule: ``1 - beta1`` and
``1 - beta2`` times ``B / B_base``, Malladi et al. 2022) moves every momentum of the roles its
optimizer trains; :meth:`spectral.scaling.Rules.momentum_factors` gives the factor per role at
the run's horizon and batch. At the base run every factor is exactly 1.0 and nothing is
written, so the groups are the implementation's, bit for bit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from spectral.errors import ConfigError

__all__ = ["MOMENTUM_KEYS", "moved_beta", "moved_momentum", "place_momenta"]

MOMENTUM_KEYS = ("betas", "momentum")
"""The param-group keys that hold a momentum ``beta`` (a tuple of them: Adam's, Lion's)."""


def moved_beta(beta: float, factor: float, where: str) -> float:
    """``1 - (1 - beta) * factor``; a result outside [0, 1) is refused in one line (the batch
    rule holds below the critical batch only)."""
    moved = 1.0 - (1.0 - beta) * factor
    if not 0.0 <= moved < 1.0:
        raise ConfigError(
            f"{where}: the batch rule moves 1 - beta = {1.0 - beta:g} by {factor:g} to "
            f"{1.0 - moved:g}, outside (0, 1]: this batch is beyond what the rule covers; "
            "pass a batch nearer the base's"
        )
    return moved


def moved_momentum(value: Any, factor: float, where: str) -> Any:
    """A momentum setting moved: a tuple of betas (Adam's) each by :func:`moved_beta`, a
    float beta > 0 (SGD's momentum) likewise; None for anything else (no momentum)."""
    if isinstance(value, (tuple, list)):
        return tuple(moved_beta(float(b), factor, where) for b in value)
    if isinstance(value, float) and value > 0.0:
        return moved_beta(value, factor, where)
    return None


def place_momenta(
    optimizer: torch.optim.Optimizer, opt_name: str, factors: Mapping[str, float]
) -> None:
    """Write each group's moved momenta (``factors``: role -> factor of ``1 - beta``)."""
    for group in optimizer.param_groups:
        factor = factors.get(group.get("role", ""), 1.0)
        if factor == 1.0:
            continue
        for key in MOMENTUM_KEYS:
            where = f"{opt_name} {group.get('role')} {key}"
            moved = moved_momentum(group.get(key), factor, where)
            if moved is not None:
                group[key] = moved
