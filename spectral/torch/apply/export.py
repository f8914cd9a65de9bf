"""Export: the block multipliers folded into the weights, for a model saved without hooks.

A multiplier hook scales a module's output by a plain float. Where the output is linear in
the module's parameters (a Linear, an Embedding, HF's Conv1D, a norm's gain and bias), the
same float multiplied into those parameters gives the same output with no hook, so the
model saved with ``save_pretrained`` or ``state_dict`` and loaded anywhere computes what
the hooked model computes. A parameter shared with another module (tied embeddings) cannot
take a factor one of its users does not have: that is refused, with what to do instead.
"""

from __future__ import annotations

import torch
from torch import nn

from spectral.errors import ConfigError, UnsupportedModelError
from spectral.scaling import BaseValue, Rules
from spectral.torch.apply.hooks import builtin_multipliers, our_hooks
from spectral.torch.model.placement import Placement
from spectral.torch.model.shapes import is_norm


def _foldable(module: nn.Module) -> bool:
    linear = (nn.Linear, nn.Embedding, nn.Conv1d, nn.Conv2d)
    return (
        isinstance(module, linear)
        or type(module).__name__ == "Conv1D"
        or is_norm(module)
    )


@torch.no_grad()
def fold_into_weights(
    rules: Rules,
    placement: Placement,
    width: float,
    depth: float,
    *,
    multiplier: BaseValue = 1.0,
) -> list[str]:
    """Fold every multiplier hook of the placed model into its module's parameters and
    remove the hooks (the public ``fold_multipliers`` in spectral.torch.config says when
    it refuses); returns the names of the modules folded."""
    model = placement.model
    if builtin_multipliers(model):
        raise ConfigError(
            "this model applies the block multipliers in its forward pass: it needs no "
            "folding (its alpha attributes are saved with it)"
        )
    hooks = our_hooks(model)
    if not hooks and getattr(rules, "absorbed", None) is not None:
        raise ConfigError(
            "this config absorbs the block multipliers (--absorb-multipliers): init_ and "
            "build_optimizers already put them in the parameters, so there are no hooks "
            "to fold; save the model as it is"
        )
    if not hooks:
        raise ConfigError("no multiplier hooks to fold: call apply_multipliers first")
    want = rules.multipliers(width, depth, multiplier)
    offset = float(getattr(placement.family, "norm_offset", 0.0))
    users: dict[int, list[str]] = {}
    for name, module in model.named_modules(remove_duplicate=False):
        for p in module.parameters(recurse=False):
            users.setdefault(id(p), []).append(name)
    plan = []
    for name, module, hook_id, hook in hooks:
        layer, factor = hook.layer, hook.factor
        if abs(factor - want[layer]) > 1e-9 * max(1.0, abs(want[layer])):
            raise ConfigError(
                f"{name}: alpha_{layer} is {factor:.6g}, the rules give {want[layer]:.6g} "
                f"at width {width}, depth {depth}: fold at the size the hooks were made for"
            )
        if not _foldable(module) or getattr(module, "weight", None) is None:
            raise UnsupportedModelError(
                f"{name} ({type(module).__name__}): its output is not linear in its own "
                "parameters, so alpha cannot be folded into them; keep the hook"
            )
        for p in module.parameters(recurse=False):
            shared = [u for u in users[id(p)] if u != name]
            if shared:
                raise UnsupportedModelError(
                    f"{name}'s parameters are shared with {shared[0]} (tied weights): "
                    f"alpha_{layer} = {factor:.6g} would scale both; untie them (Hugging "
                    "Face: tie_word_embeddings=False) or keep the hook and multiply the "
                    "logits by it where you serve"
                )
        # the hook scales by alpha / (built_in * outside) (factors the module applies
        # itself, as Gemma's embedding does, or the model after it, as Granite's
        # constants): that quotient is what the weights must carry
        plan.append((module, hook_id, hook.weight_factor))
    for module, hook_id, factor in plan:
        norm = is_norm(module)
        for pname, p in module.named_parameters(recurse=False):
            if norm and pname == "weight" and offset:
                # a gain parameterised as (offset + w): (offset + w') = factor (offset + w)
                p.mul_(factor).add_(offset * (factor - 1.0))
            else:
                p.mul_(factor)
        del module._forward_hooks[hook_id]
    return [name for name, *_ in hooks]
