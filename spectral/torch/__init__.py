"""The PyTorch runtime that every generated config module calls.

Standard library and torch only (pytorch-optimizer is imported when an optimizer of its
is built): importing it imports neither sympy nor pydantic, jinja2 or rich. A generated
module holds the numbers (``CONFIG = Config(...)``) and binds the API to them; ``spectral
codegen --vendor`` copies these modules' sources into one standalone file instead.

Laid out along the pipeline, each folder building on those before it:

* :mod:`spectral.families` (data, no torch): model families, one module each
* ``model/``: reading a model once — its family, each parameter's role and growing
  dimensions, ties — into a :class:`Placement`
* ``rules``: the config's numbers with their torch implementations (:class:`TorchRules`)
* ``apply/``: the block multipliers as hooks, init by role, the hook-free form, export
* ``optim/``: real optimizers, FSDP2, one Optimizer over several, param groups by role
* ``check/``: the model and optimizer against the rules, at one width and across widths
* ``config``: :class:`Config`, the numbers with the functions bound to them
"""

from spectral.optimizers.entry import TorchImpl
from spectral.scaling import BIAS_ROLES, LAYER_OF, BaseValue, Rules
from spectral.torch.apply.hooks import MultiplierHandle, multipliers_applied
from spectral.torch.config import (
    Config,
    check_widths,
    final_module,
    parameter_hparams,
    titan_init,
)
from spectral.torch.model.classify import ADAPTERS, DEFAULT_PATTERNS, Adapter, classify
from spectral.torch.optim.composite import CompositeOptimizer, unwrap_optimizer
from spectral.torch.optim.factories import TorchFactory
from spectral.torch.optim.sharded import CheckpointState, GatheredOptimizer
from spectral.torch.optim.torchtitan import param_group_configs
from spectral.torch.model.placement import Placement, place
from spectral.torch.model.trace import Structure, structure_adapter, trace_structure

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
    "Placement",
    "Rules",
    "Structure",
    "TorchFactory",
    "TorchImpl",
    "check_widths",
    "classify",
    "final_module",
    "multipliers_applied",
    "param_group_configs",
    "parameter_hparams",
    "place",
    "structure_adapter",
    "titan_init",
    "trace_structure",
    "unwrap_optimizer",
]
