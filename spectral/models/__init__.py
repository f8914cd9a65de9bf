"""Reference models: :mod:`~spectral.models.torch` (PyTorch, re-exported here: ``from
spectral.models import GPT``) and :mod:`~spectral.models.flax` (flax nnx twins; needs the
``jax`` extra, imported only by name)."""

from .torch import GPT, LAYERS, ResidualMLP, resolve_multipliers

__all__ = ["GPT", "LAYERS", "ResidualMLP", "resolve_multipliers"]
