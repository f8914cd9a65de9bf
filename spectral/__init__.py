"""spectral: μP hyperparameter rules under joint width–depth scaling, for any optimizer.

Declare how large an optimizer's update direction is; :func:`derive` imposes the spectral
conditions for residual blocks of ``k`` maps and returns verified rules.

>>> from spectral import derive
>>> derive("muon-kimi", k=2).rule("hidden_weight", "lr").ratio("η_base")
'η_base/√r_n'
"""

from .catalog import catalog, resolve
from .errors import (
    DerivationError,
    IncomparableError,
    SpecError,
    SpectralError,
    UnknownOptimizerError,
    VerificationError,
)
from .result import CheckGroup, Derivation, Entry, Exponent, RoleScales
from .roles import HPS, ROLE_NAMES
from .solve import MAX_K, derive
from .spec import OptimizerSpec
from .theta import Theta

__all__ = [
    "derive",
    "catalog",
    "resolve",
    "load_spec",
    "OptimizerSpec",
    "Derivation",
    "Entry",
    "Exponent",
    "CheckGroup",
    "RoleScales",
    "Theta",
    "ROLE_NAMES",
    "HPS",
    "MAX_K",
    "SpectralError",
    "SpecError",
    "UnknownOptimizerError",
    "DerivationError",
    "IncomparableError",
    "VerificationError",
]


def __getattr__(name: str):
    # TOML loading pulls in pydantic; import it only when asked for.
    if name == "load_spec":
        from .spec_file import load_spec

        return load_spec
    raise AttributeError(f"module 'spectral' has no attribute {name!r}")
