"""spectral: μP hyperparameter rules under joint width–depth scaling, for any optimizer.

Declare how large an optimizer's update direction is; :func:`derive` imposes the spectral
conditions for residual blocks of ``k`` maps and returns verified rules.

>>> from spectral import derive
>>> derive("muon-kimi", k=2).rule("hidden_weight", "lr").ratio("η_base")
'η_base/√r_n'
"""

import importlib
from typing import Any

# Eager, and light (no sympy): the function must shadow the submodule of the same name.
from .catalog import catalog, derive, resolve

_EXPORTS = {
    "MAX_K": "engine.solve",
    "load_spec": "engine.spec_file",
    "OptimizerSpec": "spec",
    "Derivation": "engine.result",
    "Entry": "engine.result",
    "Exponent": "engine.result",
    "CheckGroup": "engine.result",
    "RoleScales": "engine.result",
    "Theta": "engine.theta",
    "ROLE_NAMES": "engine.roles",
    "HPS": "engine.roles",
    "SpectralError": "errors",
    "SpecError": "errors",
    "UnknownOptimizerError": "errors",
    "DerivationError": "errors",
    "IncomparableError": "errors",
    "VerificationError": "errors",
    "ConfigError": "errors",
    "ConfigTypeError": "errors",
    "UnsupportedModelError": "errors",
}
"""Public name -> the module that defines it. Imported on first use, so that importing a
light part of the package (``spectral.torch``, ``spectral.jax``, ``spectral.scaling``) does
not import the engine (sympy) or pydantic."""

__all__ = ["catalog", "derive", "resolve", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'spectral' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
