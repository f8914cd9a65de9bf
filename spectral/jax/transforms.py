"""One optimizer's optax transformation, built from its implementation record (JaxImpl).

A record names an optax function by dotted path and a recipe, the way that function is
called so that its step is the declared ``dW = -lr * (A + weight_decay * W)``:

* ``"decoupled"``: the function takes the learning rate and applies the weight decay
  itself, ``transform(learning_rate, weight_decay=wd, [eps=eps,] **kwargs)`` (optax.adamw,
  optax.lion, optax.contrib.muon);
* ``"coupled"``: the decay is added to the gradient first, as torch.optim.SGD does,
  ``chain(add_decayed_weights(wd), transform(learning_rate, **kwargs))``;
* ``"unscaled-muon"``: optax.contrib.muon's own chain without its scale_by_shape, since
  the declared Muon step is the orthogonalised momentum alone: ``chain(transform(<(in,
  out) kernels>, **kwargs), add_decayed_weights(wd), scale_by_learning_rate(lr))``.

The record's ``fixed`` arguments are the ones the rules need (Muon-Kimi's
``consistent_rms=0.2``): a user value that differs is refused, not silently replaced.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import jax
import optax

from spectral.errors import ConfigError
from spectral.optimizers.entry import JaxImpl

Rate = float | Callable[[Any], Any]
"""A learning rate: a number or an optax schedule (step -> number)."""


def resolve(dotted: str) -> Callable[..., Any]:
    """The object a dotted path names ("optax.contrib.muon"), importing what it needs."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for part in parts[cut:]:
                obj = getattr(obj, part)
        except AttributeError:
            break  # installed, but too old to have it
        return obj
    raise ConfigError(f"cannot import {dotted}: is the optax installed new enough?")


def fixed_kwargs(kwargs: dict[str, Any], required: dict[str, Any]) -> dict[str, Any]:
    """kwargs with the arguments the rules need; a user value that differs is refused."""
    for key, value in required.items():
        if key in kwargs and kwargs[key] != value:
            raise ConfigError(f"{key}={kwargs[key]!r} would break muP; use {value!r}")
    return {**kwargs, **required}


def _in_out_kernels(tree: Any) -> Any:
    # flax kernels are (in, out): reduce over axis 0, the fan-in (optax's default too)
    dims = optax.contrib.MuonDimensionNumbers()
    return jax.tree.map(lambda _: dims, tree)


class JaxTransform:
    """fn(*, learning_rate, weight_decay[, eps], **kwargs) -> the optax transformation of
    one catalog optimizer, built from its JaxImpl record (TRANSFORMS of a config)."""

    def __init__(self, name: str, impl: JaxImpl) -> None:
        self.name = name
        self.impl = impl

    def __repr__(self) -> str:
        return f"JaxTransform({self.name!r}, {self.impl.transform})"

    def __call__(
        self,
        *,
        learning_rate: Rate,
        weight_decay: float,
        eps: float | None = None,
        **kwargs: Any,
    ) -> optax.GradientTransformation:
        impl = self.impl
        fn = resolve(impl.transform)
        kwargs = fixed_kwargs(kwargs, impl.fixed)
        if eps is not None and impl.recipe != "unscaled-muon":
            kwargs["eps"] = eps  # only optimizers with an eps rule are handed one
        if impl.recipe == "decoupled":
            return fn(learning_rate, weight_decay=weight_decay, **kwargs)
        if impl.recipe == "coupled":
            return optax.chain(
                optax.add_decayed_weights(weight_decay), fn(learning_rate, **kwargs)
            )
        return optax.chain(
            fn(weight_dimension_numbers=_in_out_kernels, **kwargs),
            optax.add_decayed_weights(weight_decay),
            optax.scale_by_learning_rate(learning_rate),
        )
