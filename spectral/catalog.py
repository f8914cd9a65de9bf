"""The optimizer catalog: one explicit registry, extended per call, never mutated.

The declarations live in :mod:`spectral.optimizers` (the repository's ``optimizers/``
folder), one module each; this module loads them and looks names up. Extra declarations (``derive(..., catalog={...})``) are layered
over the built-in catalog with a ``ChainMap`` for that call alone.
"""

from __future__ import annotations

import importlib
from collections import ChainMap
from collections.abc import Iterable, Mapping
from functools import cache
from types import MappingProxyType, ModuleType

from typing import TYPE_CHECKING

from .errors import SpecError, UnknownOptimizerError

if TYPE_CHECKING:  # the declarations need sympy; importing this module must not
    from .engine.result import Derivation
    from .spec import OptimizerSpec

__all__ = ["build_catalog", "catalog", "derive", "module_of", "modules", "resolve"]


def build_catalog(specs: Iterable[OptimizerSpec]) -> Mapping[str, OptimizerSpec]:
    """A read-only name → spec mapping; duplicate names are refused loudly."""
    from .spec import OptimizerSpec

    out: dict[str, OptimizerSpec] = {}
    for spec in specs:
        if not isinstance(spec, OptimizerSpec):
            raise TypeError(f"catalog entries must be OptimizerSpec, got {type(spec).__name__}")
        if spec.name in out:
            raise ValueError(f"duplicate optimizer name {spec.name!r} in the catalog")
        out[spec.name] = spec
    return MappingProxyType(out)


@cache
def modules() -> tuple[ModuleType, ...]:
    """The catalog's modules (``spectral.optimizers.<name>``), in catalog order."""
    from spectral.optimizers import MODULES

    return tuple(importlib.import_module(f"spectral.optimizers.{m}") for m in MODULES)


@cache
def catalog() -> Mapping[str, OptimizerSpec]:
    """The built-in declarations, in catalog order."""
    return build_catalog(m.SPEC for m in modules())


def module_of(name: str) -> ModuleType | None:
    """The catalog module of optimizer ``name`` (its implementations), or None."""
    for module in modules():
        if module.SPEC.name == name:
            return module
    return None


def _own_module_spec(key: str) -> OptimizerSpec | None:
    """The declaration of catalog name ``key`` from its own module alone, or None."""
    from spectral.optimizers import MODULES

    module = key.replace("-", "_")
    if module not in MODULES:
        return None
    spec: OptimizerSpec = importlib.import_module(f"spectral.optimizers.{module}").SPEC
    return spec if spec.name == key else None


def resolve(
    optimizer: str | OptimizerSpec, extra: Mapping[str, OptimizerSpec] | None = None
) -> OptimizerSpec:
    """Look ``optimizer`` up (``extra`` first); a spec passes through unchanged."""
    from .spec import OptimizerSpec

    if isinstance(optimizer, OptimizerSpec):
        return optimizer
    if not isinstance(optimizer, str):
        raise SpecError(f"optimizer must be a name or an OptimizerSpec, got {type(optimizer).__name__}")
    key = optimizer.strip().lower()
    if extra and key in extra:
        return extra[key]
    # one name, one module (``muon-kimi`` in ``muon_kimi.py``): import that declaration
    # alone (``spectral derive adamw`` pays for one module, not the catalog's 21)
    spec = _own_module_spec(key)
    if spec is not None:
        return spec
    known = ChainMap(dict(extra or {}), dict(catalog()))
    if key not in known:
        names = ", ".join(sorted(known))
        raise UnknownOptimizerError(f"unknown optimizer {optimizer!r}; known optimizers: {names}")
    return known[key]


def derive(
    optimizer: str | OptimizerSpec,
    k: int = 2,
    *,
    catalog: Mapping[str, OptimizerSpec] | None = None,
    all_roles: bool = False,
) -> Derivation:
    """Derive and verify the HP rules of ``optimizer`` for residual blocks of ``k`` maps.

    ``optimizer`` is a catalog name or an :class:`OptimizerSpec`; ``catalog`` adds
    declarations for this call only (looked up before the built-in catalog);
    ``all_roles`` adds the roles placed by their dimensions (``docs/roles.md``). The engine's
    :func:`spectral.engine.solve.derive_spec` does the work; this layer only looks the name up.

    >>> d = derive("adamw", k=2)
    >>> d.rule("hidden_weight", "lr").ratio("η_base")
    'η_base/r_n'
    >>> d.rule("hidden_weight", "multiplier").ratio("α_base")
    'α_base/r_L'
    """
    from .engine.solve import derive_spec

    return derive_spec(resolve(optimizer, catalog), k, all_roles=all_roles)
