"""SSO (Spectral Sphere Optimizer): a step of fixed RMS operator norm, ``‖A‖_R = 1``.

Idealised update (App. C.8): the update direction is normalised in the RMS→RMS operator
norm, so its size does not depend on width, depth or the gradient. Matrices only.
"""

from typing import Any

import sympy as sp

from spectral.optimizers import records_on_first_use
from spectral.spec import OptimizerSpec

SPEC = OptimizerSpec(
    name="sso",
    update_norm=sp.Integer(1),
    applies_to="matrices",
    summary="spectral-sphere constrained step, unit RMS operator norm",
    paper="App. C.8 (Table sso-mup); k = 1: App. D.5",
    doc=__doc__,
)

# TORCH (the torch implementation the generated module builds, and how it was checked),
# PROBE (how `spectral probe` steps it to measure its update) and JAX (the optax
# implementation of the generated JAX module, or why it has none): built on first use,
# since deriving the rules needs SPEC alone (spectral.optimizers.records_on_first_use).
def _records() -> dict[str, Any]:
    from spectral.optimizers.entry import NoJax, ProbeSetup, TorchImpl

    TORCH = TorchImpl(
        cls="pytorch_optimizer.SpectralSphere",
        compensation="sso-shape",
        sharding="gathered",
        notes=(
            "SSO: pytorch_optimizer.SpectralSphere steps by lr * msign(m + mu theta)",
            "(Polar-Express Newton-Schulz), whose spectral norm is 1: its RMS->RMS norm is",
            "sqrt(n_in / n_out), while the declaration idealises a unit RMS->RMS step. No",
            "option rescales it, so each group's lr is multiplied by sqrt(n_out / n_in) and",
            "its weight_decay divided by it (decay is decoupled, lr * wd): see",
            "_compensation; (n_out, n_in) come from the owning module (nn.Linear stores",
            "(out, in), nn.Embedding and HF Conv1D (in, out)). It does not retract the",
            "weights onto a sphere, matching the declaration's plain step. Default",
            "weight_decay=0.01 is replaced by each group's value.",
        ),
    )

    PROBE = ProbeSetup(
        label="pytorch_optimizer.SpectralSphere",
        kwargs={"foreach": False},
    )

    JAX = NoJax(
        reason="optax implements no spectral-sphere optimizer (SSO)",
    )
    return {"TORCH": TORCH, "PROBE": PROBE, "JAX": JAX}


__getattr__ = records_on_first_use(__name__, _records)
