"""The reference models of a coordinate check: the paper's residual MLP and the GPT.

:func:`build` makes one point (model, init, optimizers) from the generated config module;
:func:`train_reference` trains it on one fixed batch and records the metrics of each step,
including, for the MLP, the top-order update term of the residual blocks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..measure.fit import rms
from .config import CoordCheckConfig
from .generated import base_init_std, config_module
from .slopes import record_step

__all__ = ["build", "train_reference"]


@dataclass
class _Setup:
    model: Any
    optimizers: list
    hparams: dict[str, dict[str, Any]]
    needs_graph: bool


def build(cfg: CoordCheckConfig, param: str, width: int, depth: int, seed: int) -> _Setup:
    """Model, init and optimizers of ``param`` at ``(width, depth)`` from the generated
    config module: ``multipliers``, ``init_`` and ``build_optimizers``; ``sp`` evaluates the
    module at ``(BASE_WIDTH, BASE_DEPTH)``, where every ratio is 1."""
    import torch

    from ..models.torch import GPT, ResidualMLP  # imports torch: only when a model is built

    mod = config_module(cfg, param)
    w, d = (mod.BASE_WIDTH, mod.BASE_DEPTH) if param == "sp" else (width, depth)
    mult = dict(mod.multipliers(w, d))
    mult["hidden"] *= cfg.alpha  # α_base: the hidden blocks' base multiplier only
    torch.manual_seed(seed)
    if cfg.model == "mlp":
        model = ResidualMLP(
            cfg.d_in, cfg.d_out, width, depth, k=cfg.k, relu=cfg.relu, multipliers=mult
        )
    else:
        model = GPT(width, depth, block_size=max(cfg.seq_len, 8), multipliers=mult)
    torch.manual_seed(10_007 * seed + 17)
    mod.init_(model, w, d, base_init_std(cfg))
    model.to(cfg.device)
    lr: Any = cfg.main_lr()
    if cfg.hybrid:
        lr = {cfg.optimizer: cfg.main_lr(), cfg.others: cfg.other_lr()}
    factories = cfg.factories()
    extra = {"factories": factories} if factories else {}
    opts = mod.build_optimizers(model, w, d, lr=lr, weight_decay=cfg.weight_decay, **extra)
    # a dict of optimizers (one per name), or one optimizer over every group
    parts = list(opts.values()) if isinstance(opts, dict) else [opts]
    names = {id(p): n for n, p in model.named_parameters()}
    hp_table = {
        names[id(p)]: {
            "role": g["role"],
            "optimizer": g["optimizer"],
            "lr": g["lr"],
            "weight_decay": g["weight_decay"],
        }
        for opt in parts
        for g in opt.param_groups
        for p in g["params"]
    }
    needs_graph = any(h["optimizer"] == "sophia" for h in hp_table.values())
    return _Setup(model, parts, hp_table, needs_graph=needs_graph)


def _top_order_term(model, x, weights0) -> float:
    """``‖Σ_l α_l ΔW^(k) D … D ΔW^(1) h_{l-1}‖_R`` on ``x`` (masks ``D`` at the current step)."""
    import torch

    with torch.no_grad():
        h = model.alpha_input * model.input(x)
        total = torch.zeros_like(h)
        for li, block in enumerate(model.blocks):
            z = h
            dz = h
            for i, layer in enumerate(block.layers):
                if i > 0 and block.relu:
                    mask = (z > 0).to(z.dtype)
                    z = torch.relu(z)
                    dz = dz * mask
                dw = layer.weight - weights0[(li, i)]
                dz = dz @ dw.T
                z = layer(z)
            total = total + model.alpha_hidden * dz
            h = h + model.alpha_hidden * z
    return rms(total)


def _data(cfg: CoordCheckConfig, seed: int):
    import torch

    gen = torch.Generator().manual_seed(1_000 + seed)
    if cfg.model == "mlp":
        x = torch.randn(cfg.batch, cfg.d_in, generator=gen)
        y = torch.randn(cfg.batch, cfg.d_out, generator=gen)
    else:
        x = torch.randint(0, 256, (cfg.batch, cfg.seq_len + 1), generator=gen)
        y = None
    return x.to(cfg.device), (y.to(cfg.device) if y is not None else None)


def train_reference(
    cfg: CoordCheckConfig, param: str, axis: str, width: int, depth: int, seed: int
) -> list[dict[str, Any]]:
    """Train one reference model (``cfg.model``: mlp or gpt); one point per step ``t = 0..steps``."""
    import torch
    import torch.nn.functional as F

    s = build(cfg, param, width, depth, seed)
    model = s.model
    x, y = _data(cfg, seed)
    inp = x if cfg.model == "mlp" else x[:, :-1]
    weights0 = {}
    if cfg.model == "mlp":
        weights0 = {
            (li, i): layer.weight.detach().clone()
            for li, block in enumerate(model.blocks)
            for i, layer in enumerate(block.layers)
        }

    def loss_of(out):
        if cfg.model == "mlp":
            return F.mse_loss(out, y)
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), x[:, 1:].reshape(-1))

    points = []
    out0 = h0 = None
    for t in range(cfg.steps + 1):
        with torch.no_grad():
            out, h = model(inp, return_hidden=True)
            loss = float(loss_of(out))
        if t == 0:
            out0, h0 = out.detach().clone(), h.detach().clone()
        values = {
            "h": rms(h),
            "delta_h": rms(h - h0),
            "out": rms(out),
            "delta_out": rms(out - out0),
            "loss": loss,
        }
        if cfg.model == "mlp":
            values["delta_top"] = _top_order_term(model, inp, weights0)
        if record_step(points, (param, axis, width, depth, seed), t, cfg.steps, values):
            break
        for opt in s.optimizers:
            opt.zero_grad(set_to_none=True)
        loss_t = loss_of(model(inp))
        loss_t.backward(create_graph=s.needs_graph)
        for opt in s.optimizers:
            opt.step()
    return points
