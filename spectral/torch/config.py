"""A generated config's API: its numbers (TorchRules) and the functions that apply them.

``spectral codegen`` writes ``CONFIG = Config(...)`` and binds ``hparams = CONFIG.hparams``
and so on, so a user calls plain functions. Each method of :class:`Config` is the runtime
function of the module that owns the concern, bound as it is: the function takes the rules
as its first argument, so ``CONFIG.init_(model, ...)`` is ``init_by_role(CONFIG, model,
...)``, with that function's own signature and documentation.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from spectral.torch.check import check_model
from spectral.torch.export import fold_into_weights
from spectral.torch.hooks import install_multipliers
from spectral.torch.init import init_by_role
from spectral.torch.optim import build_composite, role_param_groups
from spectral.torch.rules import TorchRules
from spectral.torch.shapes import Dims, record_base_shapes


class Config(TorchRules):
    """One config's rules with the runtime's functions bound to them."""

    apply_multipliers = install_multipliers
    init_ = init_by_role
    param_groups = role_param_groups
    build_optimizers = build_composite
    check = check_model
    fold_multipliers = fold_into_weights

    def set_base_shapes(
        self,
        model: nn.Module,
        base_model: nn.Module | None = None,
        *,
        factory: Callable[[int], nn.Module] | None = None,
    ) -> dict[str, Dims]:
        """Record which dimensions of each parameter of ``model`` grow with the width, read
        from ``base_model`` or from ``factory`` at this config's base width and twice it
        (:func:`spectral.torch.shapes.record_base_shapes`), as microsoft/mup's
        ``set_base_shapes`` does. Roles then follow from shapes where names disagree."""
        return record_base_shapes(
            model,
            base_model,
            factory=factory,
            widths=(self.base_width, 2 * self.base_width),
        )
