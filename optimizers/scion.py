"""Scion: a step of unit size in a per-layer operator norm, ``A = lmo(m)``.

Idealised update (Pethick et al. 2025, Sec. 3 and Table 2; implementation
``pytorch_optimizer.SCION``, ``norm_type=AUTO``): the linear minimisation oracle of the
RMS→RMS norm ball. For a matrix it is ``sqrt(n_out/n_in) U Vᵀ`` (``∇W = U Σ Vᵀ``), of RMS→RMS
norm exactly 1; for a vector ``g/RMS(g)``, of RMS 1. So ``‖A‖_R = 1`` for every role —
Scion's point. The paper's other layer norms (sign for the readout, column-normalised
embeddings) are also of ``Θ(1)`` RMS→RMS size on a low-rank gradient, so the declaration does
not depend on which one a layer uses. The unconstrained variant (``constraint=False``, the
default) decays ``W ← (1 - η λ) W``: decoupled, as assumed; ``constraint=True`` replaces
that by ``W ← (1 - η) W``, which is weight decay with ``λ = 1``. No ε (the ``1e-8`` inside
the column and row normalisations guards a division). Applies to weights and biases.
"""

from typing import Any

import sympy as sp

from spectral.optimizers import records_on_first_use
from spectral.spec import OptimizerSpec

SPEC = OptimizerSpec(
    name="scion",
    update_norm=sp.Integer(1),
    applies_to="all",
    summary="LMO of the RMS→RMS norm ball: sqrt(n_out/n_in) U Vᵀ (matrices), g/RMS(g) (vectors)",
    paper="Pethick et al. 2025, Sec. 3, Table 2; as SSO, App. C.8",
    doc=__doc__,
)

# TORCH (the torch implementation the generated module builds, and how it was checked),
# PROBE (how `spectral probe` steps it to measure its update) and JAX (the optax
# implementation of the generated JAX module, or why it has none): built on first use,
# since deriving the rules needs SPEC alone (spectral.optimizers.records_on_first_use).
def _records() -> dict[str, Any]:
    from spectral.optimizers.entry import NoJax, ProbeSetup, TorchImpl

    TORCH = TorchImpl(
        cls="pytorch_optimizer.SCION",
        fixed={"constraint": False},
        sharding="gathered",
        notes=(
            "Scion: pytorch_optimizer.SCION (norm_type AUTO): sqrt(n_out / n_in) NS(m) for",
            "matrices and m / RMS(m) for vectors, RMS->RMS norm 1 as declared (scale=1).",
            "The unconstrained form decays W *= 1 - lr * wd, as assumed; constraint=True",
            "would replace that by W *= 1 - lr, so constraint=False is fixed here. No eps.",
        ),
    )

    PROBE = ProbeSetup(
        label="pytorch_optimizer.SCION (norm_type AUTO)",
    )

    JAX = NoJax(
        reason="no optax factory is set up for it",
    )
    return {"TORCH": TORCH, "PROBE": PROBE, "JAX": JAX}


__getattr__ = records_on_first_use(__name__, _records)
