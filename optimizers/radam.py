"""RAdam: Adam with a rectified variance, ``A = r_t m̂/(sqrt(v̂) + ε)`` once ``ρ_t > 5``.

Idealised update (Liu et al. 2020, Alg. 2; implementation ``torch.optim.RAdam``): once the
rectification is on, the step is Adam's times ``r_t``, a width-independent factor that tends
to 1, so ``‖A‖_R = n_in`` for a low-rank gradient and ε is Adam's,
``Θ(G / sqrt(n_in n_out))``.

Outside the declaration: while ``ρ_t ≤ 5`` — the first 5 steps at ``β₂ = 0.999`` — RAdam
steps by the bias-corrected momentum ``m̂`` itself, un-normalised, which is SGD with
momentum: ``‖A‖_R = sqrt(n_in/n_out) G`` there. The rules hold from step 6 on; during the
first 5 steps the hidden and output learning rates (Adam's, ``∝ 1/n``) are smaller than
SGD's rules would give, so those steps shrink with width — a slow start, not an
instability. torch's ``weight_decay`` is coupled unless ``decoupled_weight_decay=True``,
which the generated module fixes. Applies to weights and biases.
"""

from typing import Any

import sympy as sp

from spectral.optimizers import records_on_first_use
from spectral.spec import OptimizerSpec
from spectral.symbols import G, n_in, n_out

SPEC = OptimizerSpec(
    name="radam",
    update_norm=n_in,
    eps=G / sp.sqrt(n_in * n_out),
    eps_label="RAdam ε",
    applies_to="all",
    summary="rectified Adam ≈ sign(∇W) from step 6; un-normalised momentum before (torch.optim.RAdam)",
    paper="Liu et al. 2020, Alg. 2; as AdamW, App. C.5",
    doc=__doc__,
)

# TORCH (the torch implementation the generated module builds, and how it was checked),
# PROBE (how `spectral probe` steps it to measure its update) and JAX (the optax
# implementation of the generated JAX module, or why it has none): built on first use,
# since deriving the rules needs SPEC alone (spectral.optimizers.records_on_first_use).
def _records() -> dict[str, Any]:
    from spectral.optimizers.entry import NoJax, ProbeSetup, TorchImpl

    TORCH = TorchImpl(
        cls="torch.optim.RAdam",
        fixed={"decoupled_weight_decay": True},
        default_eps=1e-08,
        sharding="elementwise",
        not_homogeneous=(
            "while the variance estimate is not yet rectified (about the first 5 steps) it steps by the bias-corrected momentum, a raw-gradient step (degree 1 in the gradient), and by Adam's normalised step (degree 0) after"
        ),
        notes=(
            "RAdam: torch.optim.RAdam. From step 6 (rho_t > 5 at beta2 = 0.999) the step is",
            "Adam's times a rectification factor that tends to 1: the declared sign-like",
            "step. Steps 1-5 are un-normalised momentum (SGD-like, not declared): with",
            "Adam's lr rules they shrink with width, a slower start at large width. eps",
            "(base default 1e-8) is scaled per role; decoupled_weight_decay=True is fixed.",
        ),
    )

    PROBE = ProbeSetup(
        label="torch.optim.RAdam",
        steps=7,
        note=(
            "RAdam steps by un-normalised momentum until rho_t > 5 (step 6); step 7 is "
            "measured"
        ),
    )

    JAX = NoJax(
        reason="no optax factory is set up for it",
    )
    return {"TORCH": TORCH, "PROBE": PROBE, "JAX": JAX}


__getattr__ = records_on_first_use(__name__, _records)
