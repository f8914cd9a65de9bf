"""Flax (nnx) reference models, the JAX twins of :mod:`spectral.models` (needs the ``jax`` extra).

``pip install -e '.[jax]'``. Nothing in the derivation engine imports this module.

:class:`ResidualMLP` — the paper's residual network with biases, the same maps as the
PyTorch ``ResidualMLP``::

    h_0     = α_0 (W_0 x + b_0)
    h_l     = h_{l-1} + α_l (W_l^(k) φ(… φ(W_l^(1) h_{l-1} + b_l^(1)) …) + b_l^(k)),  l = 1..L
    h_{L+1} = α_{L+1} W_{L+1} h_L

Parameter paths (``nnx.state(model, nnx.Param)``): ``input.kernel``, ``input.bias``,
``blocks.{l}.layers.{i}.kernel`` / ``.bias``, ``output.kernel`` — the PyTorch names with
flax's ``kernel`` (stored ``(in, out)``, the transpose of ``nn.Linear.weight``).

:class:`GPT` — a GPT-2 style decoder with nanoGPT's module names (``wte``, ``wpe``,
``h.{l}.ln_1`` / ``attn.c_attn`` / ``attn.c_proj`` / ``ln_2`` / ``mlp.c_fc`` /
``mlp.c_proj``, ``ln_f``, ``lm_head``): pre-LayerNorm, head dimension fixed (64 by
default), FFN width ``4·width``, byte vocabulary, untied embeddings::

    x = α_0 (wte[idx] + wpe[pos]);  x = x + α_hidden · attn(ln_1(x));  x = x + α_hidden · mlp(ln_2(x))
    logits = α_output · lm_head(ln_f(x))

Multipliers: ``multipliers=`` is ``None`` (every α is 1: standard parameterisation), a
generated config module (its ``multipliers(width, depth)``, either framework's), or a dict
``{"input": a0, "hidden": a, "output": a_out}``. They are kept as plain Python floats, so
``jax.jit`` bakes them in. Weights start as flax initialises them; for μP call the
generated module's ``init`` (``nnx.update(model, cfg.init(nnx.state(model, nnx.Param),
key, width, depth))``: flax's init is the base, scaled by each role's rule away from it;
``init_std=...`` draws every leaf instead).

``model(x, return_hidden=True)`` returns ``(output, h_L)`` for coordinate checks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

__all__ = ["GPT", "ResidualMLP", "resolve_multipliers"]

LAYERS = ("input", "hidden", "output")

_List = getattr(nnx, "List", list)
"""nnx.List (flax >= 0.12 wants lists of modules wrapped); a plain list before that."""


def resolve_multipliers(source: Any, width: int, depth: int) -> dict[str, float]:
    """``{"input": α_0, "hidden": α_l, "output": α_{L+1}}`` from ``None``, a generated
    config module or a dict with those three keys."""
    if source is None:
        return {layer: 1.0 for layer in LAYERS}
    fn = getattr(source, "multipliers", None)
    if callable(fn):
        source = fn(width, depth)
    if isinstance(source, Mapping) and all(layer in source for layer in LAYERS):
        return {layer: float(source[layer]) for layer in LAYERS}
    raise TypeError(
        "multipliers must be None (SP), a generated config module or "
        "{'input': a0, 'hidden': a, 'output': a_out}; "
        f"got {type(source).__name__}"
    )


class _Block(nnx.Module):
    """``k`` dense maps with optional ReLU between them (none after the last)."""

    def __init__(self, width: int, k: int, relu: bool, bias: bool, rngs: nnx.Rngs):
        self.layers = _List(
            [nnx.Linear(width, width, use_bias=bias, rngs=rngs) for _ in range(k)]
        )
        self.relu = relu

    def __call__(self, h: jax.Array) -> jax.Array:
        for i, layer in enumerate(self.layers):
            if i > 0 and self.relu:
                h = jax.nn.relu(h)
            h = layer(h)
        return h


class ResidualMLP(nnx.Module):
    """The paper's residual MLP: ``L = depth`` blocks of ``k`` maps of width ``width``."""

    def __init__(
        self,
        d_in: int,
        d_out: int,
        width: int,
        depth: int,
        *,
        k: int = 2,
        relu: bool = True,
        bias: bool = True,
        multipliers: Any = None,
        rngs: nnx.Rngs | None = None,
    ):
        if k < 1 or depth < 1 or width < 1:
            raise ValueError(f"need k, depth, width >= 1, got k={k}, depth={depth}, width={width}")
        rngs = rngs if rngs is not None else nnx.Rngs(0)
        self.width, self.depth, self.k = width, depth, k
        self.input = nnx.Linear(d_in, width, use_bias=bias, rngs=rngs)
        self.blocks = _List([_Block(width, k, relu, bias, rngs) for _ in range(depth)])
        self.output = nnx.Linear(width, d_out, use_bias=False, rngs=rngs)
        m = resolve_multipliers(multipliers, width, depth)
        self.alpha_input, self.alpha_hidden, self.alpha_output = (
            m["input"],
            m["hidden"],
            m["output"],
        )

    def __call__(self, x: jax.Array, return_hidden: bool = False):
        h = self.alpha_input * self.input(x)
        for block in self.blocks:
            h = h + self.alpha_hidden * block(h)
        out = self.alpha_output * self.output(h)
        return (out, h) if return_hidden else out


class _Attention(nnx.Module):
    def __init__(self, width: int, head_dim: int, bias: bool, rngs: nnx.Rngs):
        self.n_head = width // head_dim
        self.head_dim = head_dim
        self.c_attn = nnx.Linear(width, 3 * width, use_bias=bias, rngs=rngs)
        self.c_proj = nnx.Linear(width, width, use_bias=bias, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        B, T, C = x.shape
        q, k, v = (
            a.reshape(B, T, self.n_head, self.head_dim)
            for a in jnp.split(self.c_attn(x), 3, axis=-1)
        )
        # head_dim is fixed, so the usual 1/sqrt(head_dim) logit scale needs no μP change
        logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(self.head_dim)
        causal = jnp.tril(jnp.ones((T, T), dtype=bool))
        weights = jax.nn.softmax(jnp.where(causal, logits, -jnp.inf), axis=-1)
        y = jnp.einsum("bhqk,bkhd->bqhd", weights, v)
        return self.c_proj(y.reshape(B, T, C))


class _MLP(nnx.Module):
    def __init__(self, width: int, bias: bool, rngs: nnx.Rngs):
        self.c_fc = nnx.Linear(width, 4 * width, use_bias=bias, rngs=rngs)
        self.c_proj = nnx.Linear(4 * width, width, use_bias=bias, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.c_proj(jax.nn.gelu(self.c_fc(x), approximate=False))


class _GPTBlock(nnx.Module):
    def __init__(self, width: int, head_dim: int, bias: bool, rngs: nnx.Rngs):
        self.ln_1 = nnx.LayerNorm(width, epsilon=1e-5, use_bias=bias, rngs=rngs)
        self.attn = _Attention(width, head_dim, bias, rngs)
        self.ln_2 = nnx.LayerNorm(width, epsilon=1e-5, use_bias=bias, rngs=rngs)
        self.mlp = _MLP(width, bias, rngs)


class GPT(nnx.Module):
    """GPT-2 style decoder (nanoGPT's module names), block multipliers in ``__call__``."""

    def __init__(
        self,
        width: int,
        depth: int,
        *,
        vocab_size: int = 256,
        block_size: int = 256,
        head_dim: int = 64,
        bias: bool = True,
        multipliers: Any = None,
        rngs: nnx.Rngs | None = None,
    ):
        if width % head_dim:
            raise ValueError(f"width {width} is not a multiple of head_dim {head_dim}")
        rngs = rngs if rngs is not None else nnx.Rngs(0)
        self.width, self.depth = width, depth
        self.wte = nnx.Embed(vocab_size, width, rngs=rngs)
        self.wpe = nnx.Embed(block_size, width, rngs=rngs)
        self.h = _List([_GPTBlock(width, head_dim, bias, rngs) for _ in range(depth)])
        self.ln_f = nnx.LayerNorm(width, epsilon=1e-5, use_bias=bias, rngs=rngs)
        self.lm_head = nnx.Linear(width, vocab_size, use_bias=False, rngs=rngs)
        m = resolve_multipliers(multipliers, width, depth)
        self.alpha_input, self.alpha_hidden, self.alpha_output = (
            m["input"],
            m["hidden"],
            m["output"],
        )

    def __call__(self, idx: jax.Array, return_hidden: bool = False):
        x = self.alpha_input * (self.wte(idx) + self.wpe(jnp.arange(idx.shape[-1])))
        for block in self.h:
            x = x + self.alpha_hidden * block.attn(block.ln_1(x))
            x = x + self.alpha_hidden * block.mlp(block.ln_2(x))
        logits = self.alpha_output * self.lm_head(self.ln_f(x))
        return (logits, x) if return_hidden else logits
