"""Model families: which parameter has which role and where the block multipliers go.

One module per family (an :class:`~spectral.families.adapter.Adapter`, data only, no
torch); :data:`ADAPTERS` lists them in the order they are tried (a family that has
another's names comes before it: spectral.families.registry). :mod:`spectral.torch.model`
applies them.
"""

from __future__ import annotations

from spectral.families.adapter import Adapter
from spectral.families.registry import FAMILIES, FAMILY_PATTERNS

__all__ = ["ADAPTERS", "DEFAULT_PATTERNS", "FAMILIES", "FAMILY_PATTERNS", "Adapter"]

ADAPTERS: tuple[Adapter, ...] = FAMILIES
"""Known families, tried in order (the first that recognises the model wins, so a family
comes before those whose names it shares); pass adapter= for any other model."""
DEFAULT_PATTERNS: tuple[tuple[str, str], ...] = FAMILY_PATTERNS
"""Every family's (parameter-name pattern, role) pairs; classify's fallback."""
