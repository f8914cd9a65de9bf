"""Initialisation by role: every parameter drawn from N(0, init_std_of(role)^2)."""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from spectral.scaling import BIAS_ROLES, BaseValue, Rules, keeps_own_init
from spectral.torch.apply.absorb import carriers_of
from spectral.torch.model.classify import (
    AdapterLike,
    Patterns,
    is_table,
)
from spectral.torch.model.placement import place
from spectral.torch.model.shapes import fans, is_norm
from spectral.torch.optim.sharded import normal_


def is_bias(name: str) -> bool:
    """A bias by its name (``bias``, ``in_proj_bias``); SSM vectors such as ``A_log``,
    ``D`` or a kernel are not, and keep the values their model gave them."""
    leaf = name.rpartition(".")[2]
    return leaf == "bias" or leaf.endswith("_bias")


def keeps_own_values(
    name: str, role: str, module: nn.Module, init_std: BaseValue
) -> bool:
    """Whether init_ leaves the parameter as the model initialised it: a vector-like
    parameter (SSM A_log, D, dt_bias, a depthwise kernel), or one with a bias role that is
    neither a bias nor a norm's parameter, unless ``init_std`` names its role. Its own
    initialisation is the model's (Mamba draws A_log and dt's bias on purpose); zero
    would kill it."""
    if keeps_own_init(role, init_std):  # hidden_vector, unless named
        return True
    named = isinstance(init_std, Mapping) and role in init_std
    return role in BIAS_ROLES and not (named or is_norm(module) or is_bias(name))


@torch.no_grad()
def init_by_role(
    rules: Rules,
    model: nn.Module,
    width: float,
    depth: float,
    init_std: BaseValue = 0.02,
    *,
    patterns: Patterns | None = None,
    adapter: AdapterLike | None = None,
    multiplier: BaseValue = 1.0,
) -> None:
    """Initialise every parameter by its role: N(0, init_std_of(role)^2).

    Norm gains are always set to 1 and norm biases to 0 (a norm's parameters share the
    bias roles, but a normalised feature must keep RMS 1; where a family's norms compute
    x_hat * (1 + w), as Gemma's do, its adapter's norm_offset makes that w = 0); other
    biases start at 0 unless their role is named in init_std (the paper's base bias
    variance is 0). A vector that is neither a bias nor a norm gain (Mamba's A_log and
    D, a depthwise convolution's kernel: role hidden_vector, or a bias role by name) keeps
    the values the model gave it unless init_std names its role: init_ touches only what
    it has a rule for. A dense input layer (not an embedding) is drawn with
    init_std / sqrt(d_in), its fixed fan-in: the paper's input variance is sigma^2 for
    one-hot (language) inputs and sigma^2/d_0 for dense ones. In the hook-free form (a
    config generated with --absorb-multipliers) the parameters of each module a multiplier
    scaled carry it: their std, and a norm's gain, times the multiplier
    (spectral.torch.apply.absorb).
    """
    placement = place(model, rules, patterns=patterns, adapter=adapter)
    family = placement.family
    factors = carriers_of(rules, model, width, depth, multiplier, family)
    for name, p, role, module in placement:
        s = factors.get(id(p), 1.0)
        if is_norm(module):
            if name.endswith("bias"):
                p.zero_()
            else:  # gain 1: x_hat * (norm_offset + w) for families that offset w
                p.fill_(s - (family.norm_offset if family is not None else 0.0))
            continue
        rules.covered(role, f"parameter {name!r}")
        if keeps_own_values(name, role, module, init_std):
            continue
        d_in = None
        if role == "input_weight" and not is_table(name, module, family):
            d_in = fans(module, p)[1]
        std = rules.init_std_of(role, width, depth, init_std, d_in) * s
        if std == 0.0:
            p.zero_()
        else:
            normal_(p, std)  # a sharded (DTensor) p: the one-process draw
