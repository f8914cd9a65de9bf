"""A generated config's API: its numbers (TorchRules) and the functions that apply them.

``spectral codegen`` writes ``CONFIG = Config(...)`` and binds ``hparams = CONFIG.hparams``
and so on, so a user calls plain functions. Each method of :class:`Config` is the runtime
function of the module that owns the concern, bound as it is: the function takes the rules
as its first argument, so ``CONFIG.init_(model, ...)`` is ``init_by_role(CONFIG, model,
...)``, with that function's own signature and documentation.
"""

from __future__ import annotations

from spectral.torch.apply.export import fold_into_weights
from spectral.torch.apply.hooks import install_multipliers
from spectral.torch.apply.init import init_by_role, init_factors
from spectral.torch.apply.absorb import clip_by_hooked_norm
from spectral.torch.check.model import check_model
from spectral.torch.model.shapes import record_shapes_at_base
from spectral.torch.optim.groups import build_composite, role_param_groups
from spectral.torch.rules import TorchRules


class Config(TorchRules):
    """One config's rules with the runtime's functions bound to them."""

    apply_multipliers = install_multipliers
    init_ = init_by_role
    init_factors = init_factors
    param_groups = role_param_groups
    build_optimizers = build_composite
    check = check_model
    fold_multipliers = fold_into_weights
    set_base_shapes = record_shapes_at_base
    clip_grad_norm_ = clip_by_hooked_norm
