"""The PyTorch runtime that every generated config module calls.

Standard library and torch only (pytorch-optimizer is imported when an optimizer of its
is built): importing it imports neither sympy nor pydantic, jinja2 or rich. A generated
module holds the numbers (``CONFIG = Config(...)``) and binds the API to them; ``spectral
codegen --vendor`` copies these modules' sources into one standalone file instead.

The modules, in the order they build on one another:

* ``families`` / ``adapters``: model families (:class:`Adapter`, :data:`ADAPTERS`) and
  parameter roles by name (:func:`classify`)
* ``shapes``: which dimensions of each parameter grow with the width, read from a twin
  at another width on the meta device (:func:`record_base_shapes`), and the role a
  parameter's shape gives it where its name placed it
* ``hooks``: the block multipliers as forward hooks (:func:`apply_multipliers`)
* ``init``: initialisation by role (:func:`init_`)
* ``factories`` / ``sharded`` / ``composite``: real optimizers, FSDP2, one Optimizer over them
* ``optim``: param groups with each role's numbers (:func:`build_optimizers`)
* ``measure`` / ``check``: the model and optimizer against the rules, measured on the
  forward pass too (:func:`check`)
* ``export``: the multipliers folded into the weights, for saving (:func:`fold_multipliers`)
* ``config``: :class:`Config`, the numbers with the functions bound to them
"""

from spectral.optimizers.entry import TorchImpl
from spectral.scaling import BIAS_ROLES, LAYER_OF, BaseValue, Rules
from spectral.torch.model.classify import ADAPTERS, DEFAULT_PATTERNS, Adapter, classify
from spectral.torch.optim.composite import CompositeOptimizer, unwrap_optimizer
from spectral.torch.config import Config
from spectral.torch.optim.factories import TorchFactory
from spectral.torch.apply.hooks import MultiplierHandle, final_module, multipliers_applied
from spectral.torch.optim.sharded import CheckpointState, GatheredOptimizer

__all__ = [
    "ADAPTERS",
    "Adapter",
    "BIAS_ROLES",
    "BaseValue",
    "CheckpointState",
    "CompositeOptimizer",
    "Config",
    "DEFAULT_PATTERNS",
    "GatheredOptimizer",
    "LAYER_OF",
    "MultiplierHandle",
    "Rules",
    "TorchFactory",
    "TorchImpl",
    "classify",
    "final_module",
    "multipliers_applied",
    "unwrap_optimizer",
]
