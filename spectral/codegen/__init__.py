"""Code generation: config modules written from derived rules.

:mod:`~spectral.codegen.torch` renders the PyTorch config (and is what this package
re-exports, the public ``spectral.codegen.render`` / ``load_generated``),
:mod:`~spectral.codegen.jax` the JAX/optax one, and :mod:`~spectral.codegen.vendor` lays the
runtime's own sources end to end for ``--vendor``. Nothing here imports torch or jax.
"""

from .torch import FRAMEWORKS, TORCH_RUNTIME, load_generated, render, write

__all__ = ["FRAMEWORKS", "TORCH_RUNTIME", "load_generated", "render", "write"]
