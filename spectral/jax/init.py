"""Initialisation by role: a new parameter pytree drawn from each role's rule.

Flax stores a Dense kernel as (in, out) and an Embed table as (vocab, features): the
fan-in of a kernel is the product of every axis but the last. Biases and norm gains follow
the PyTorch runtime (spectral.torch.apply.init): norm gains 1, biases 0 unless their role is
named in init_std, since the paper's base bias variance is 0.
"""

from __future__ import annotations

import math
from typing import Any

import jax

from spectral.jax.labels import (
    AdapterLike,
    Patterns,
    as_adapter,
    is_table,
    norm_part,
    path_name,
    placed,
)
from spectral.scaling import BaseValue, Rules, keeps_own_init


def init_params(
    rules: Rules,
    params: Any,
    key: jax.Array,
    width: float,
    depth: float,
    *,
    init_std: BaseValue = 0.02,
    patterns: Patterns | None = None,
    adapter: AdapterLike | None = None,
) -> Any:
    """A new pytree like params, every leaf drawn by its role: N(0, init_std_of(role)^2).

    Norm gains are set to 1 and norm biases to 0; other biases start at 0 unless their role
    is named in init_std (the paper's base bias variance is 0); a per-channel vector
    (hidden_vector: SSM A_log, D, a depthwise conv kernel) keeps its leaf as given unless
    its role is named in init_std. A dense input kernel (not
    an embedding table) is drawn with init_std / sqrt(d_in), d_in its fan-in: the paper's
    input variance is sigma^2 for one-hot (language) inputs and sigma^2/d_0 for dense
    ones. Each leaf gets its own key, split from `key` in pytree order. Only the leaves'
    paths, shapes and dtypes are read, so an abstract tree (jax.eval_shape, nnx.eval_shape)
    works too. With flax nnx:
    nnx.update(model, init(nnx.state(model, nnx.Param), key, width, depth)).
    """
    leaves = placed(params, patterns, adapter)
    family = as_adapter(adapter, (path for path, _, _ in leaves))
    keys = jax.random.split(key, max(len(leaves), 1))
    new = {}
    for (path, leaf, role), subkey in zip(leaves, keys, strict=False):
        norm = norm_part(path)
        if norm is not None:
            rules.covered(role, f"parameter {path!r}")
            fill = jax.numpy.ones if norm == "gain" else jax.numpy.zeros
            new[path] = fill(leaf.shape, leaf.dtype)
            continue
        rules.covered(role, f"parameter {path!r}")
        # a per-channel vector: the model's own values
        if keeps_own_init(role, init_std):
            new[path] = leaf
            continue
        d_in = None
        if role == "input_weight" and not is_table(path, family):
            d_in = math.prod(leaf.shape[:-1])
        std = rules.init_std_of(role, width, depth, init_std, d_in)
        if std == 0.0:
            new[path] = jax.numpy.zeros(leaf.shape, leaf.dtype)
        else:
            new[path] = std * jax.random.normal(subkey, leaf.shape, leaf.dtype)
    return jax.tree_util.tree_map_with_path(lambda kp, _: new[path_name(kp)], params)
