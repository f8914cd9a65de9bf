"""The reference models, the GPT and the paper's residual MLP, in PyTorch and in flax.

:mod:`~spectral.models.torch` is re-exported here (``from spectral.models import GPT``);
:mod:`~spectral.models.flax` holds the flax nnx twins (needs the ``jax`` extra, imported
only by name).
"""

from .torch import GPT, LAYERS, ResidualMLP, resolve_multipliers

__all__ = ["GPT", "LAYERS", "ResidualMLP", "resolve_multipliers"]
