"""Initialisation by role: the model's own pytree rescaled by each role's rule (the
default), or a new one drawn from it when a base ``init_std`` is given.

Flax stores a Dense kernel as (in, out) and an Embed table as (vocab, features): the
fan-in of a kernel is the product of every axis but the last. Biases and norm gains follow
the PyTorch runtime (spectral.torch.apply.init): kept in the default form; when drawn, norm
gains 1, biases 0 unless their role is named in init_std (the paper's base bias variance is 0).
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
from spectral.errors import ConfigTypeError
from spectral.scaling import BaseValue, Rules, keeps_own_init


def init_params(
    rules: Rules,
    params: Any,
    key: jax.Array | None,
    width: float,
    depth: float,
    *,
    init_std: BaseValue | None = None,
    patterns: Patterns | None = None,
    adapter: AdapterLike | None = None,
) -> Any:
    """A new pytree like params, every leaf set by its role; the model's own init is the base.

    ``init_std=None`` (the default): each leaf the rules cover is the given leaf times
    ``init_ratio(role, width, depth)``, its role's std at this size over its std at the
    base size: at the base width and depth the tree comes back as given (the model's own
    init, bit for bit), away from it each leaf is scaled by the rule, as the PyTorch
    runtime's init_ does. ``key`` is not used (None is fine); norm gains and biases keep
    their values (their rule's ratio is 1). The values are read, so pass real arrays.

    ``init_std`` given (a number or a dict by role, optimizer or "default"): every leaf is
    drawn, N(0, init_std_of(role)^2), sigma_base being init_std. Norm gains are set to 1
    and norm biases to 0; other biases start at 0 unless their role is named in init_std
    (the paper's base bias variance is 0). A dense input kernel (not an embedding table) is
    drawn with init_std / sqrt(d_in), d_in its fan-in: the paper's input variance is
    sigma^2 for one-hot (language) inputs and sigma^2/d_0 for dense ones. Each leaf gets
    its own key, split from `key` in pytree order. Only the leaves' paths, shapes and
    dtypes are read, so an abstract tree (jax.eval_shape, nnx.eval_shape) works too.

    In both, a per-channel vector (hidden_vector: SSM A_log, D, a depthwise conv kernel)
    keeps its leaf as given unless its role is named in init_std. With flax nnx:
    nnx.update(model, init(nnx.state(model, nnx.Param), key, width, depth)).
    """
    leaves = placed(params, patterns, adapter, rules)
    if init_std is None:
        new = {
            path: _own(rules, path, leaf, role, width, depth)
            for path, leaf, role in leaves
        }
        return jax.tree_util.tree_map_with_path(
            lambda kp, _: new[path_name(kp)], params
        )
    if key is None:
        raise ConfigTypeError(
            "init: drawing by init_std needs a key (jax.random.key(0))"
        )
    family = as_adapter(adapter, (path for path, _, _ in leaves))
    keys = jax.random.split(key, max(len(leaves), 1))
    new = {}
    for (path, leaf, role), subkey in zip(leaves, keys, strict=False):
        new[path] = _drawn(
            rules, path, leaf, role, subkey, width, depth, init_std, family
        )
    return jax.tree_util.tree_map_with_path(lambda kp, _: new[path_name(kp)], params)


def _own(
    rules: Rules, path: str, leaf: Any, role: str, width: float, depth: float
) -> Any:
    """One leaf of the model's own init, times its role's std ratio (norms: as given)."""
    rules.covered(role, f"parameter {path!r}")
    if norm_part(path) is not None or keeps_own_init(role, None):
        return leaf
    ratio = rules.init_ratio(role, width, depth)
    return leaf if ratio == 1.0 else leaf * ratio  # 1.0: the leaf itself, bit for bit


def _drawn(
    rules: Rules,
    path: str,
    leaf: Any,
    role: str,
    subkey: jax.Array,
    width: float,
    depth: float,
    init_std: BaseValue,
    family: Any,
) -> Any:
    """One leaf drawn by its role from N(0, init_std_of(role)^2) (norms: gain 1, bias 0)."""
    rules.covered(role, f"parameter {path!r}")
    norm = norm_part(path)
    if norm is not None:
        fill = jax.numpy.ones if norm == "gain" else jax.numpy.zeros
        return fill(leaf.shape, leaf.dtype)
    if keeps_own_init(role, init_std):  # a per-channel vector: the model's own values
        return leaf
    d_in = None
    if role == "input_weight" and not is_table(path, family):
        d_in = math.prod(leaf.shape[:-1])
    std = rules.init_std_of(role, width, depth, init_std, d_in)
    if std == 0.0:
        return jax.numpy.zeros(leaf.shape, leaf.dtype)
    return std * jax.random.normal(subkey, leaf.shape, leaf.dtype)
