"""A model's norm offset, measured: whether its norms compute x_hat * w or x_hat * (c + w).

Gemma's and Nemotron's norms compute x_hat * (1 + w); init_ must then write w = 1 - c for
an effective gain of 1, and the check must judge the gain at that value. A family may say
so (``norm_offset``); here it is measured instead, on the model itself: each norm with a
one-dimensional weight is run on one centred input with w = 0 and with w = 1 (its bias at
0), and its gains g0, g1 against x_hat give c = g0 / (g1 - g0). The model's parameters are
left as they were.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from spectral.measure.fit import rms
from spectral.torch.model.shapes import is_norm

AGREE = 0.05
"""Norms whose offsets differ by more than this leave the offset unmeasured (None)."""


@torch.no_grad()
def _offset(module: nn.Module) -> float | None:
    weight = getattr(module, "weight", None)
    if (
        not isinstance(weight, nn.Parameter)
        or weight.ndim != 1
        or weight.device.type == "meta"
        or type(weight).__name__ == "DTensor"
        or isinstance(module, nn.GroupNorm)
    ):
        return None
    n = weight.shape[0]
    x = torch.randn(4, n, generator=torch.Generator().manual_seed(1))
    x = (x - x.mean(-1, keepdim=True)).to(device=weight.device, dtype=weight.dtype)
    x_hat = x / x.pow(2).mean(-1, keepdim=True).add(1e-6).sqrt()
    saved = weight.detach().clone()
    bias = getattr(module, "bias", None)
    saved_bias = bias.detach().clone() if isinstance(bias, torch.Tensor) else None
    gains = []
    try:
        if isinstance(bias, torch.Tensor):
            bias.zero_()
        for w in (0.0, 1.0):
            weight.fill_(w)
            y = module.forward(x)  # not module(x): a multiplier hook would count
            if not isinstance(y, torch.Tensor) or y.shape != x.shape:
                return None
            gains.append(rms(y) / rms(x_hat))
    except Exception:  # noqa: BLE001 - a norm that needs other inputs: not measured
        return None
    finally:
        weight.copy_(saved)
        if isinstance(bias, torch.Tensor) and saved_bias is not None:
            bias.copy_(saved_bias)
    slope = gains[1] - gains[0]
    if not math.isfinite(slope) or abs(slope - 1.0) > AGREE:  # not x_hat * (c + w)
        return None
    return gains[0]


def measured_norm_offset(model: nn.Module) -> float | None:
    """The offset c that every measurable norm of ``model`` shares (0 for torch's
    LayerNorm and RMSNorm, 1 for Gemma's and Nemotron's), rounded to a thousandth; None
    when no norm could be measured or the norms disagree."""
    found = [c for m in model.modules() if is_norm(m) and (c := _offset(m)) is not None]
    if not found or max(found) - min(found) > AGREE:
        return None
    return round(sum(found) / len(found), 3)
