"""The hook-free form: each block multiplier absorbed into the parameters of the module it scales.

A multiplier hook scales a module's output by a float ``s``. Where the output is linear in
the module's own parameters (a Linear, an Embedding, HF's Conv1D, a convolution, a norm's
plain gain ``x_hat * w`` and bias), training ``W' = s W`` with no hook computes the same
forward pass, and the same steps when the optimizer's hyperparameters move by the
abc-symmetry: init std ``* s``, lr ``* s**(1 + p)``, weight decay ``* s**-(1 + p)``, eps
``* s**-q``, with ``(p, q)`` the degrees of the optimizer's update and eps in the gradient
(:func:`spectral.engine.absorb.homogeneity`; a generated config holds them in ``ABSORBED``).
A module whose output is not linear in its parameters (a norm computing ``x_hat * (1 + w)``,
a module with no parameters of its own, any other type) cannot carry its multiplier: it is
reported by name, and nothing is changed.
"""

from __future__ import annotations

import math

from typing import Any

import torch
from torch import nn

from spectral.errors import ConfigError, UnsupportedModelError
from spectral.scaling import BaseValue, BaseValues, Rules
from spectral.torch.apply.hooks import (
    built_in_scale,
    our_hooks,
    placement_problems,
    placements,
)
from spectral.torch.model.classify import unplaced_message
from spectral.torch.model.placement import Placement
from spectral.torch.model.shapes import is_norm

_LINEAR_TYPES = (nn.Linear, nn.Embedding, nn.Conv1d, nn.Conv2d, nn.Conv3d)
_LINEAR_NAMES = frozenset(
    {
        "Conv1D",  # Hugging Face GPT-2's
        # Megatron-core's tensor-parallel layers (x W^T + b and a lookup, on shards)
        "ColumnParallelLinear",
        "RowParallelLinear",
        "VocabParallelEmbedding",
        # Transformer Engine's (megatron-core's TE spec): x W^T + b, no norm inside
        "TEColumnParallelLinear",
        "TERowParallelLinear",
    }
)


def linear_in_parameters(module: nn.Module) -> bool:
    """Whether the module's output is linear in its own parameters jointly (a norm's gain
    and bias included: ``x_hat * w + b``), so a factor on the output can move into them."""
    return (
        isinstance(module, _LINEAR_TYPES)
        or type(module).__name__ in _LINEAR_NAMES
        or is_norm(module)
    )


def _why_not(name: str, module: nn.Module, offset: float) -> str | None:
    """Why ``module``'s multiplier cannot be absorbed, or None when it can."""
    kind = type(module).__name__
    if getattr(module, "weight", None) is None:
        return (
            f"{name} ({kind}): it has no weight of its own, so its multiplier acts after a "
            "map with no parameters to take it"
        )
    if not linear_in_parameters(module):
        return (
            f"{name} ({kind}): its output is not known to be linear in its parameters (a "
            "multiplier after a non-linear map)"
        )
    if is_norm(module) and offset:
        return (
            f"{name} ({kind}): a post-norm computing x_hat * ({offset:g} + w); the factor "
            f"would make w' = s ({offset:g} + w) - {offset:g}, not a pure scale, so its weight "
            "decay and init would change meaning"
        )
    return None


def carrier_factors(
    rules: Rules,
    placement: Placement,
    width: float,
    depth: float,
    *,
    multiplier: BaseValue = 1.0,
) -> dict[int, float]:
    """id(parameter) -> the factor s its module's multiplier hook would apply, for every
    parameter of a module a multiplier scales (the *carriers*).

    Raises ValueError naming every module whose multiplier cannot be absorbed (why, per
    module), a placement the adapter does not find, and a parameter shared with a module
    that does not carry the same factor (tied embeddings with alpha_in != alpha_out).
    """
    model, family = placement.model, placement.family
    if family is None:
        raise UnsupportedModelError(
            unplaced_message(
                model,
                "pass adapter=; the multipliers are absorbed into the modules the "
                "adapter's input, branches and output patterns name",
            )
        )
    placed = placements(model, family)
    problems = placement_problems(placed, family, depth)
    values = rules.folded_multipliers(width, depth, multiplier)  # type: ignore[attr-defined]
    factors: dict[int, float] = {}
    owner: dict[int, str] = {}
    carriers: set[int] = set()
    for layer, modules in placed.items():
        for name, module in modules:
            why = _why_not(name, module, family.norm_offset)
            if why is not None:
                problems.append(why)
                continue
            carriers.add(id(module))
            built_in = built_in_scale(name, module, family) if layer == "input" else 1.0
            s = values[layer] / built_in
            for p in module.parameters(recurse=False):
                if id(p) in factors and factors[id(p)] != s:
                    problems.append(
                        f"{name} shares a parameter with {owner[id(p)]} (tied weights) and "
                        "their multipliers differ: one matrix cannot carry both; untie them "
                        "(Hugging Face: tie_word_embeddings=False) or keep the hooks"
                    )
                factors[id(p)], owner[id(p)] = s, name
    for name, module in model.named_modules(remove_duplicate=False):
        for p in module.parameters(recurse=False):
            if id(p) in factors and id(module) not in carriers:
                problems.append(
                    f"{name} uses {owner[id(p)]}'s parameter (tied weights) without its "
                    "multiplier: one matrix cannot carry it for one user only; untie them "
                    "or keep the hooks"
                )
    if problems:
        raise UnsupportedModelError(
            "cannot absorb the multipliers (use the config without --absorb-multipliers, "
            "which keeps them as hooks): " + "; ".join(dict.fromkeys(problems))
        )
    return factors


def absorbed_values(
    values: dict[str, float], s: float, degrees: tuple[float, float | None]
) -> dict[str, float]:
    """One role's numbers for a parameter that carries the factor ``s``: multiplier 1,
    init std * s, lr * s**(1+p), weight decay * s**-(1+p), eps * s**-q."""
    p, q = degrees
    out: dict[str, Any] = dict(values)
    out["multiplier"] = 1.0
    if "init_std" in out:
        out["init_std"] = values["init_std"] * s
    out["lr"] = values["lr"] * s ** (1.0 + p)
    out["weight_decay"] = values["weight_decay"] * s ** -(1.0 + p)
    if "eps" in out and q is not None:
        out["eps"] = values["eps"] * s**-q
    return out


def carriers_of(
    rules: Rules,
    placement: Placement,
    width: float,
    depth: float,
    multiplier: BaseValue,
) -> dict[int, float]:
    """carrier_factors in the hook-free form; no carriers in the hooked form."""
    if getattr(rules, "absorbed", None) is None:
        return {}
    return carrier_factors(rules, placement, width, depth, multiplier=multiplier)


def hparams_by_parameter(
    rules: Rules,
    placement: Placement,
    width: float,
    depth: float,
    **base: Any,
) -> dict[str, dict[str, Any]]:
    """Parameter name -> role, optimizer, carrier factor and the numbers init_ and
    build_optimizers give it (init_std before a dense input layer's 1/sqrt(d_in); a norm's
    gain starts at the carrier factor, or 1, whatever init_std says)."""
    given = BaseValues.of(base, "parameter_hparams")
    multiplier = given.multiplier
    hp = rules.hparams(width, depth, **given.given())
    factors = carriers_of(rules, placement, width, depth, multiplier)
    degrees = getattr(rules, "absorbed", None) or {}
    out: dict[str, dict[str, Any]] = {}
    for name, p, role, _ in placement:
        rules.covered(role, f"parameter {name!r}")
        opt = rules.optimizers[role]
        values: dict[str, Any] = dict(hp[role])
        s = factors.get(id(p), 1.0)
        if id(p) in factors:
            values = absorbed_values(values, s, degrees[opt])
        out[name] = {"role": role, "optimizer": opt, "carrier_factor": s, **values}
    return out


def scales_in_forward(model: nn.Module) -> bool:
    """Whether the forward pass scales by some multiplier other than 1: a hook, or a model
    that applies them itself (spectral.models built with multipliers=None apply 1s)."""
    if our_hooks(model):
        return True
    for module in model.modules():
        if getattr(module, "applies_mup_multipliers", False):
            alphas = [
                getattr(module, f"alpha_{x}", None)
                for x in ("input", "hidden", "output")
            ]
            if any(a is None or float(a) != 1.0 for a in alphas):
                return True
    return False


def absorbed_problems(
    rules: Rules,
    placement: Placement,
    width: float,
    depth: float,
    multiplier: BaseValue,
) -> list[str]:
    """check()'s findings on a model trained in the hook-free form."""
    if scales_in_forward(placement.model):
        message = (
            "this config absorbs the block multipliers, and the model's forward pass applies "
            "them too (hooks or built in): they are applied twice; remove the hooks"
        )
        return [message]
    try:
        carrier_factors(rules, placement, width, depth, multiplier=multiplier)
    except UnsupportedModelError as exc:  # found on the model; a bad argument raises
        return [str(exc)]
    return []


def clip_by_hooked_norm(
    rules: Rules,
    placement: Placement | None,
    width: float,
    depth: float,
    max_norm: float,
    *,
    norm_type: float = 2.0,
    multiplier: BaseValue = 1.0,
    given: nn.Module,
) -> torch.Tensor:
    """``torch.nn.utils.clip_grad_norm_`` as the hooked form clips: returns the total norm.

    In the hook-free form a carrier's parameter is ``W' = s W``, so its gradient is the
    hooked one divided by ``s``: the global norm torch computes from these gradients is
    not the hooked model's, and a clip that binds scales the two runs differently. This
    takes the norm of the hooked gradients (each carrier's gradient norm times its ``s``)
    and scales every gradient by the same ``max_norm / (norm + 1e-6)`` (at most 1) torch
    would apply to the hooked ones, which moves the hook-free run exactly as the hooked run
    is moved. In the hooked form it is ``clip_grad_norm_`` itself.
    """
    model = given  # the hooked form needs no placement (None): called every step
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    if (
        not isinstance(max_norm, (int, float))
        or isinstance(max_norm, bool)
        or not max_norm > 0  # NaN too
    ):
        raise ConfigError(f"max_norm must be a number > 0, got {max_norm!r}")
    if (
        not isinstance(norm_type, (int, float))
        or isinstance(norm_type, bool)
        or not (norm_type > 0 or norm_type == -math.inf)  # NaN, 0 and negatives refused
    ):
        raise ConfigError(
            f"norm_type must be a number > 0 (or inf, -inf), got {norm_type!r}"
        )
    factors = (
        {}
        if placement is None
        else carriers_of(rules, placement, width, depth, multiplier)
    )
    if (
        not factors
    ):  # hooked form (or nothing carries): the gradients are the hooked ones
        return torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm, norm_type)
    if not grads:
        return torch.tensor(0.0)
    norms = [
        torch.linalg.vector_norm(p.grad, norm_type) * factors.get(id(p), 1.0)
        for p in model.parameters()
        if p.grad is not None
    ]
    total = torch.linalg.vector_norm(torch.stack(norms), norm_type)
    coefficient = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    torch._foreach_mul_(grads, coefficient)
    return total
