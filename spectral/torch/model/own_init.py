"""The model's own init law: how the std its code draws a parameter with moves with the width.

init_ keeps the model's own init as the base and scales it by the rules' ratio. Where the
model's code already draws a parameter with a width-dependent std, that dependence must be
divided out, or it adds to the rule's: the parameter would start at the rule's ratio times
its own move, not at its base std times the ratio. Two sources say where it does:

* a family's ``own_width_exponents`` (torchtitan's lm_head: std dim**-0.5), by name;
* torch's default init, recognised by its values: ``nn.Linear`` and ``nn.ConvNd`` draw
  their weight from U(-b, b) with b = 1/sqrt(fan_in) (``kaiming_uniform_(a=sqrt(5))``) and
  their bias from the same range, so a weight whose largest entry is within b and whose RMS
  is b/sqrt(3) (within its sampling error) was drawn so; its std moves as fan_in**-1/2,
  i.e. width**-1/2 where its role's fan-in grows (spectral.engine.dims).
  ``nn.MultiheadAttention`` draws its packed ``in_proj_weight`` with ``xavier_uniform_``
  (b = sqrt(6 / (fan_in + fan_out))): width**-1/2 where either dimension grows.

Read once per placement, from the values the model's own init left (before init_ scales
them): :attr:`Placement.own_exponents`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from torch import nn

from spectral.engine.dims import GROWS
from spectral.families import Adapter
from spectral.measure.fit import rms

MIN_ENTRIES = 32
"""Fewer entries than this are not read as torch's default init (too few to tell)."""
_DEFAULT_INIT_MODULES = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)
"""Modules whose reset_parameters draws torch's kaiming-uniform default."""


def torch_default_init(module: nn.Module) -> bool:
    """Whether ``module`` (a Linear or a ConvNd) holds the weight torch's own
    reset_parameters drew: every entry within 1/sqrt(fan_in), and an RMS of
    1/sqrt(3 fan_in) within six of its standard errors (0.45/sqrt(N) relative, for N
    uniform draws), at most 30 %."""
    # isinstance: nn.MultiheadAttention's out_proj is a subclass of nn.Linear
    if not isinstance(module, _DEFAULT_INIT_MODULES):
        return False
    weight = getattr(module, "weight", None)
    if not _drawn_values(weight):
        return False
    assert isinstance(weight, nn.Parameter)
    return _drawn_uniform(weight, 1.0 / math.sqrt(weight[0].numel()))


def xavier_init(module: nn.Module, p: nn.Parameter) -> bool:
    """Whether ``p`` is ``nn.MultiheadAttention``'s packed ``in_proj_weight`` (or one of its
    separate q/k/v weights) as its own _reset_parameters drew it: xavier_uniform_, every
    entry within sqrt(6 / (fan_in + fan_out)) and an RMS of that bound over sqrt(3)."""
    if not isinstance(module, nn.MultiheadAttention) or not _drawn_values(p):
        return False
    if p is not module.in_proj_weight and not any(
        p is getattr(module, f"{x}_proj_weight", None) for x in "qkv"
    ):
        return False
    return _drawn_uniform(p, math.sqrt(6.0 / (p.shape[0] + p[0].numel())))


def _drawn_values(weight: object) -> bool:
    return (
        isinstance(weight, nn.Parameter)
        and weight.device.type != "meta"
        and type(weight).__name__ != "DTensor"
        and weight.is_floating_point()
        and weight.ndim >= 2
        and weight.numel() >= MIN_ENTRIES
    )


def _drawn_uniform(weight: nn.Parameter, bound: float) -> bool:
    """Every entry within ``bound`` and the RMS bound/sqrt(3) within six standard errors
    (0.45/sqrt(N) relative, for N uniform draws), at most 30 %."""
    top = float(weight.detach().abs().max())
    if not math.isfinite(top) or top > bound * (1.0 + 1e-5):
        return False
    tolerance = min(0.3, max(0.05, 6 * 0.45 / math.sqrt(weight.numel())))
    return abs(rms(weight) / (bound / math.sqrt(3.0)) - 1.0) <= tolerance


def own_exponents(
    entries: Sequence[tuple[str, nn.Parameter, str, nn.Module]],
    family: Adapter | None,
) -> dict[str, float]:
    """Parameter name -> the exponent of the width in the std the model's own init drew it
    with, for every parameter where it is not 0: the family's ``own_width_exponents``
    first, else torch's default init (a weight whose role's fan-in grows: -1/2; its
    module's bias, within the same bound, the same)."""
    named = family.own_width_exponents if family is not None else ()
    role_of = {id(p): role for _, p, role, _ in entries}
    out: dict[str, float] = {}
    defaults: dict[int, bool] = {}  # id(module) -> torch's default init
    for name, p, _, module in entries:
        hit = next((e for pattern, e in named if re.search(pattern, name)), None)
        if hit is not None:
            if hit:
                out[name] = hit
            continue
        if xavier_init(module, p):
            grows = GROWS.get(role_of.get(id(p), ""), (False, False))
            if grows[0] or grows[1]:  # std sqrt(2 / (fan_in + fan_out))
                out[name] = -0.5
            continue
        if id(module) not in defaults:
            defaults[id(module)] = torch_default_init(module)
        if not defaults[id(module)]:
            continue
        weight = module.weight
        assert isinstance(weight, nn.Parameter)  # torch_default_init checked it
        weight_role = role_of.get(id(weight), "")
        if weight_role not in GROWS or not GROWS[weight_role][1]:
            continue
        if p is not weight:  # the module's bias: drawn within the weight's bound
            bound = 1.0 / math.sqrt(weight[0].numel())
            if p.numel() == 0 or float(p.detach().abs().max()) > bound * (1.0 + 1e-5):
                continue
        out[name] = -0.5
    return out
