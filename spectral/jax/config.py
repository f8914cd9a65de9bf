"""A generated JAX config's API: its numbers (JaxRules) and the functions that apply them.

``spectral codegen --framework jax`` writes ``CONFIG = Config(...)`` and binds ``init =
CONFIG.init`` and so on, so a user calls plain functions. Each method of :class:`Config` is
the runtime function of the module that owns the concern, bound as it is (it takes the
rules as its first argument), with that function's own signature and documentation. The
runtime functions have other names than the bindings (init_params, build_optimizer)
because ``--vendor`` lays this package and the bindings out in one namespace.
"""

from __future__ import annotations

from spectral.jax.init import init_params
from spectral.jax.optim import build_optimizer
from spectral.jax.rules import JaxRules


class Config(JaxRules):
    """One config's rules with the runtime's functions bound to them."""

    init = init_params
    optimizer = build_optimizer
