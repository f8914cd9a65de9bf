"""NAdam: Adam with Nesterov momentum, ``A = (μ_{t+1} m̂ + (1-μ_t) ĝ)/(sqrt(v̂) + ε)``.

Idealised update (Dozat 2016, Alg. 2; implementation ``torch.optim.NAdam``): the Nesterov
look-ahead mixes the momentum and the current gradient with width-independent weights
``μ_t = β₁(1 - ½·0.96^{tψ})``; with ``β₁ = β₂ = 0`` and ``ε = 0`` it is sign descent, as
Adam: ``‖A‖_R = n_in`` for a low-rank gradient, and ε is added to ``sqrt(v̂)``, the
entrywise RMS of the gradient, ``Θ(G / sqrt(n_in n_out))``. torch's ``weight_decay`` is
coupled (L2) unless ``decoupled_weight_decay=True``, which the generated module fixes.
Applies to weights and biases.
"""

from typing import Any

import sympy as sp

from spectral.optimizers import records_on_first_use
from spectral.spec import OptimizerSpec
from spectral.symbols import G, n_in, n_out

SPEC = OptimizerSpec(
    name="nadam",
    update_norm=n_in,
    eps=G / sp.sqrt(n_in * n_out),
    eps_label="NAdam ε",
    applies_to="all",
    summary="Adam with Nesterov momentum ≈ sign(∇W) (torch.optim.NAdam)",
    paper="Dozat 2016, Alg. 2; as AdamW, App. C.5",
    doc=__doc__,
)

# TORCH (the torch implementation the generated module builds, and how it was checked),
# PROBE (how `spectral probe` steps it to measure its update) and JAX (the optax
# implementation of the generated JAX module, or why it has none): built on first use,
# since deriving the rules needs SPEC alone (spectral.optimizers.records_on_first_use).
def _records() -> dict[str, Any]:
    from spectral.optimizers.entry import NoJax, ProbeSetup, TorchImpl

    TORCH = TorchImpl(
        cls="torch.optim.NAdam",
        fixed={"decoupled_weight_decay": True},
        default_eps=1e-08,
        sharding="elementwise",
        notes=(
            "NAdam: torch.optim.NAdam, Adam with Nesterov momentum (width-independent",
            "momentum schedule); idealised as sign(grad). eps is added to sqrt(v_hat) and",
            "scaled per role (base default 1e-8). Coupled L2 decay would be divided by",
            "sqrt(v_hat): decoupled_weight_decay=True is fixed here.",
        ),
    )

    PROBE = ProbeSetup(
        label="torch.optim.NAdam",
    )

    JAX = NoJax(
        reason="no optax factory is set up for it",
    )
    return {"TORCH": TORCH, "PROBE": PROBE, "JAX": JAX}


__getattr__ = records_on_first_use(__name__, _records)
