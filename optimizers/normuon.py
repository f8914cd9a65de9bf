"""NorMuon: Muon's orthogonalised momentum with its rows normalised, norm preserved.

Idealised update (Li et al. 2025, Alg. 1; implementation ``pytorch_optimizer.NorMuon``,
``update_scale="preserve_norm"``, its default and the official code's): ``O = NS(M) ≈ U Vᵀ``
(``M`` the momentum), each row of ``O`` divided by its running RMS, then the result
rescaled to ``‖O‖_F``. A wide matrix (``n_out ≤ n_in``) has orthonormal rows, all of the
same norm, so the row normalisation changes nothing and the step is Muon's,
``‖A‖_R = sqrt(n_in/n_out)``. A tall one (``n_out > n_in``) has orthonormal columns and
rows of unequal norm; equalising them spreads the step evenly over the ``n_out`` outputs,
and its RMS→RMS norm becomes ``Θ(1)``. Together:
``‖A‖_R = sqrt(max(n_in, n_out)/n_out)``, i.e. ``max(1, sqrt(n_in/n_out))`` — Muon's on the
output layer and on square hidden matrices, ``Θ(1)`` on the input layer.

Matrices only: pytorch-optimizer steps parameters of groups without ``use_muon=True`` with
its own AdamW at ``adamw_lr`` (ignoring the group's lr), so the generated module sets
``use_muon=True`` on every group it builds, and biases go to another optimizer
(``--others adamw``). Its ε (1e-10) guards the row normalisation and the rescaling; the
paper tabulates none and it is not scaled. Weight decay is decoupled
(``W ← (1 - η λ) W``).
"""

from typing import Any

import sympy as sp

from spectral.optimizers import records_on_first_use
from spectral.spec import OptimizerSpec
from spectral.symbols import n_in, n_out

SPEC = OptimizerSpec(
    name="normuon",
    update_norm=sp.sqrt(sp.Max(n_in, n_out) / n_out),
    applies_to="matrices",
    summary="row-normalised NS(momentum), rescaled to ‖NS(momentum)‖_F (preserve_norm)",
    paper="Li et al. 2025, Alg. 1 (official code's preserve_norm); as Muon, App. C.2",
    doc=__doc__,
)

# TORCH (the torch implementation the generated module builds, and how it was checked),
# PROBE (how `spectral probe` steps it to measure its update) and JAX (the optax
# implementation of the generated JAX module, or why it has none): built on first use,
# since deriving the rules needs SPEC alone (spectral.optimizers.records_on_first_use).
def _records() -> dict[str, Any]:
    from spectral.optimizers.entry import NoJax, ProbeSetup, TorchImpl

    TORCH = TorchImpl(
        cls="pytorch_optimizer.NorMuon",
        group_defaults={"use_muon": True},
        sharding="gathered",
        notes=(
            "NorMuon: pytorch_optimizer.NorMuon (update_scale='preserve_norm'): NS(m) with",
            "its rows normalised, rescaled to |NS(m)|_F; RMS->RMS norm sqrt(max(n_in,",
            "n_out) / n_out): Muon's on wide matrices, 1 on tall ones. use_muon=True is set",
            "on every group (without it NorMuon uses adamw_lr and ignores the group lr).",
            "Matrices only. Its eps (1e-10) guards a division and is not scaled. Decoupled",
            "weight decay.",
        ),
    )

    PROBE = ProbeSetup(
        label="pytorch_optimizer.NorMuon(use_muon=True)",
        group_keys={"use_muon": True},
    )

    JAX = NoJax(
        reason="no optax factory is set up for it",
    )
    return {"TORCH": TORCH, "PROBE": PROBE, "JAX": JAX}


__getattr__ = records_on_first_use(__name__, _records)
