"""Adam: ``A = m̂/(sqrt(v̂) + ε)``, idealised as ``sign(∇W)`` — AdamW without weight decay.

Idealised update (Kingma & Ba 2015, Alg. 1; the paper's App. C.5 for AdamW): with
``β₁ = β₂ = 0`` and ``ε = 0`` the step is sign descent, ``‖A‖_R = n_in`` for a low-rank
gradient, and ε sits where AdamW's does, ``Θ(G / sqrt(n_in n_out))``. The declaration is
AdamW's; what differs is weight decay. ``torch.optim.Adam(weight_decay=λ)`` is L2
regularisation: ``λW`` is added to the gradient *before* the normalisation, so the decay
term is divided by ``sqrt(v̂)`` and is not the ``-η λ W`` the rules assume. Use it with the
default base weight decay 0; the generated module fixes ``decoupled_weight_decay=True`` so
that a non-zero base value means what the weight-decay rule says (that is AdamW).
Applies to weights and biases.
"""

from typing import Any

import sympy as sp

from spectral.engine.axes import ADAM_SDE
from spectral.optimizers import records_on_first_use
from spectral.spec import OptimizerSpec
from spectral.symbols import G, n_in, n_out

SPEC = OptimizerSpec(
    name="adam",
    update_norm=n_in,
    eps=G / sp.sqrt(n_in * n_out),
    eps_label="Adam ε",
    applies_to="all",
    summary="m̂ / (sqrt(v̂) + ε) ≈ sign(∇W), no weight decay (torch.optim.Adam)",
    paper="Kingma & Ba 2015, Alg. 1; as AdamW, App. C.5",
    lr_batch=ADAM_SDE[0],
    eps_batch=ADAM_SDE[1],
    momentum_batch=ADAM_SDE[2],
    doc=__doc__,
)

# TORCH (the torch implementation the generated module builds, and how it was checked),
# PROBE (how `spectral probe` steps it to measure its update) and JAX (the optax
# implementation of the generated JAX module, or why it has none): built on first use,
# since deriving the rules needs SPEC alone (spectral.optimizers.records_on_first_use).
def _records() -> dict[str, Any]:
    from spectral.optimizers.entry import NoJax, ProbeSetup, TorchImpl

    TORCH = TorchImpl(
        cls="torch.optim.Adam",
        fixed={"decoupled_weight_decay": True},
        default_eps=1e-08,
        sharding="elementwise",
        notes=(
            "Adam: torch.optim.Adam. Idealised (beta1 = beta2 = 0, eps = 0): sign(grad).",
            "eps is added to sqrt(v_hat), the declared place, scaled per role (group key",
            "'eps'; base default 1e-8). torch's weight_decay is L2 by default (added to the",
            "gradient before the normalisation, so not the -eta lambda W the rules assume);",
            "decoupled_weight_decay=True is fixed here, so with the default base weight",
            "decay 0 this is plain Adam and a non-zero one is decoupled (AdamW).",
        ),
    )

    PROBE = ProbeSetup(
        label="torch.optim.Adam",
    )

    JAX = NoJax(
        reason="no optax factory is set up for it",
    )
    return {"TORCH": TORCH, "PROBE": PROBE, "JAX": JAX}


__getattr__ = records_on_first_use(__name__, _records)
