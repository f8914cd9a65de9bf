"""The JAX / optax runtime that every generated JAX config module calls.

Standard library, jax and optax only: importing it imports neither torch nor flax, sympy,
pydantic, jinja2 or rich. A generated module holds the numbers (``CONFIG = Config(...)``)
and binds the API to them; ``spectral codegen --framework jax --vendor`` copies these
modules' sources into one standalone file instead (:data:`spectral.codegen.jax.JAX_RUNTIME`).

The modules, in the order they build on one another:

* ``labels``: pytree paths, model families, roles (:func:`labels`, :func:`classify`)
* ``init``: initialisation by role (:func:`init_params`)
* ``transforms``: one optimizer's optax transformation from its record (JaxImpl)
* ``rules``: :class:`JaxRules`, the numbers and the implementation records
* ``optim``: optax.multi_transform over the roles (:func:`build_optimizer`)
* ``config``: :class:`Config`, the numbers with the functions bound to them
"""

from spectral.jax.config import Config
from spectral.jax.init import init_params
from spectral.jax.labels import (
    ADAPTERS,
    DEFAULT_PATTERNS,
    Adapter,
    AdapterLike,
    Patterns,
    classify,
    labels,
    path_name,
)
from spectral.jax.optim import build_optimizer
from spectral.jax.rules import JaxRules
from spectral.jax.transforms import JaxTransform, Rate
from spectral.optimizers.entry import JaxImpl
from spectral.scaling import BIAS_ROLES, LAYER_OF, BaseValue, Rules

__all__ = [
    "ADAPTERS",
    "BIAS_ROLES",
    "DEFAULT_PATTERNS",
    "LAYER_OF",
    "Adapter",
    "AdapterLike",
    "BaseValue",
    "Config",
    "JaxImpl",
    "JaxRules",
    "JaxTransform",
    "Patterns",
    "Rate",
    "Rules",
    "build_optimizer",
    "classify",
    "init_params",
    "labels",
    "path_name",
]
