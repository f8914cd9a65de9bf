"""Shampoo: Kronecker-factored preconditioning, ``A = L̂^{-1/4} G R̂^{-1/4}``.

Idealised update (App. C.6): without momentum and ε, ``L̂ = G Gᵀ`` and ``R̂ = Gᵀ G`` turn
the step into ``U Vᵀ`` — Muon's direction, ``‖A‖_R = sqrt(n_in/n_out)``. Its ε is added to
``L̂`` and ``R̂``, whose spectral norm is ``‖∇W‖_2²``, so ``ε = Θ(G²)``. Matrices only.
pytorch-optimizer's ``Shampoo`` reads that ε from ``matrix_eps``.
"""

from typing import Any

import sympy as sp

from spectral.optimizers import records_on_first_use
from spectral.spec import OptimizerSpec
from spectral.symbols import G, n_in, n_out

SPEC = OptimizerSpec(
    name="shampoo",
    update_norm=sp.sqrt(n_in / n_out),
    eps=G**2,
    eps_label="Shampoo ε",
    eps_key="matrix_eps",  # pytorch_optimizer.Shampoo(matrix_eps=1e-6)
    applies_to="matrices",
    summary="(L̂ + εI)^{-1/4} G (R̂ + εI)^{-1/4}, no grafting",
    paper="App. C.6 (Table muon-wd, Shampoo ε); k = 1: App. D.2",
    doc=__doc__,
)

# TORCH (the torch implementation the generated module builds, and how it was checked),
# PROBE (how `spectral probe` steps it to measure its update) and JAX (the optax
# implementation of the generated JAX module, or why it has none): built on first use,
# since deriving the rules needs SPEC alone (spectral.optimizers.records_on_first_use).
def _records() -> dict[str, Any]:
    from spectral.optimizers.entry import NoJax, ProbeSetup, TorchImpl

    TORCH = TorchImpl(
        cls="pytorch_optimizer.Shampoo",
        fixed={"weight_decouple": True},
        default_eps=1e-06,
        sharding="gathered",
        notes=(
            "Shampoo: pytorch_optimizer.Shampoo. It steps by L^(-1/4) G R^(-1/4) with",
            "L = eps I + sum_t G G^T and R = eps I + sum_t G^T G: no grafting, as the",
            "declaration assumes, and eps ('matrix_eps', scaled per role; base default",
            "1e-6) is added to L and R, the declared place. Its default weight_decouple=",
            "False would add lambda W to the gradient before preconditioning (coupled);",
            "the declaration assumes decoupled dW = -eta (A + lambda W), so",
            "weight_decouple=True is fixed here. The statistics are summed over all steps",
            "(no EMA), so the step shrinks like 1/sqrt(t) at every width alike. The",
            "inverse roots are recomputed every step (preconditioning_compute_steps=1):",
            "raise it for large models.",
        ),
    )

    PROBE = ProbeSetup(
        label="pytorch_optimizer.Shampoo(momentum=0)",
        kwargs={"momentum": 0.0},
    )

    JAX = NoJax(
        reason="optax implements no Shampoo",
    )
    return {"TORCH": TORCH, "PROBE": PROBE, "JAX": JAX}


__getattr__ = records_on_first_use(__name__, _records)
