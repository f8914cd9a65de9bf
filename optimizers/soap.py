"""SOAP: Adam in Shampoo's eigenbasis.

Idealised update (App. C.7): without momentum, Adam reduces to ``sign`` of the rotated
gradient ``Q_Lᵀ G Q_R = diag(Σ, 0)``, which rotates back to ``U Vᵀ`` — Muon's direction,
``‖A‖_R = sqrt(n_in/n_out)``. Matrices only. ε is Adam's, added to ``sqrt(v̂)`` of the
*rotated* gradient, whose nonzero entries are the singular values ``Σ`` of a low-rank
gradient, ``Θ(‖∇W‖_2)``; so ``ε = Θ(G)`` (not Adam's entrywise ``G/sqrt(n_in n_out)``).
The paper tabulates no ε for SOAP; ``pytorch_optimizer.SOAP`` reads it from ``eps``.
"""

from typing import Any

import sympy as sp

from spectral.optimizers import records_on_first_use
from spectral.spec import OptimizerSpec
from spectral.symbols import G, n_in, n_out

SPEC = OptimizerSpec(
    name="soap",
    update_norm=sp.sqrt(n_in / n_out),
    eps=G,
    eps_label="SOAP ε",
    eps_key="eps",  # pytorch_optimizer.SOAP(eps=1e-8)
    applies_to="matrices",
    summary="Adam in the eigenbasis of Shampoo's preconditioners",
    paper="App. C.7 (Table muon-wd); k = 1: App. D.2",
    doc=__doc__,
)

# TORCH (the torch implementation the generated module builds, and how it was checked),
# PROBE (how `spectral probe` steps it to measure its update) and JAX (the optax
# implementation of the generated JAX module, or why it has none): built on first use,
# since deriving the rules needs SPEC alone (spectral.optimizers.records_on_first_use).
def _records() -> dict[str, Any]:
    from spectral.optimizers.entry import NoJax, ProbeSetup, TorchImpl

    TORCH = TorchImpl(
        cls="pytorch_optimizer.SOAP",
        sharding="gathered",
        default_eps=1e-08,
        not_homogeneous=(
            "it rotates the gradient into the eigenbasis of GGᵀ (torch.linalg.eigh), which is not unique where eigenvalues repeat (a low-rank gradient's), so a scaled gradient can get another basis"
        ),
        notes=(
            "SOAP: pytorch_optimizer.SOAP, Adam in the eigenbasis of Shampoo's L and R.",
            "Decoupled weight decay (lr * wd), as assumed. Its first step only sets up the",
            "eigenbasis (no update). eps (group key 'eps', base default 1e-8) is added to",
            "sqrt(v) of the rotated gradient, whose nonzero entries are the gradient's",
            "singular values, so it is scaled like G (not like Adam's entrywise G/sqrt(n_in",
            "n_out)); the paper tabulates none for SOAP. A dimension above",
            "max_precondition_dim (10000) is not rotated, and the step there is Adam's, not",
            "Muon's scale: keep large embedding tables with --others. Default",
            "weight_decay=0.01 is replaced.",
        ),
    )

    PROBE = ProbeSetup(
        label="pytorch_optimizer.SOAP",
        steps=2,
        note="SOAP's first step only builds the preconditioner; the second step is measured",
    )

    JAX = NoJax(
        reason="optax implements no SOAP",
    )
    return {"TORCH": TORCH, "PROBE": PROBE, "JAX": JAX}


__getattr__ = records_on_first_use(__name__, _records)
