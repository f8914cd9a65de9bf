"""LAMB: Adam's direction rescaled per tensor, ``ΔW = -η φ(‖W‖_F) u/‖u‖_F``.

Idealised update (You et al. 2020, Alg. 2; implementation ``pytorch_optimizer.Lamb``):
``u = m̂/(sqrt(v̂) + ε)`` is Adam's step (``≈ sign(∇W)``) and the trust ratio
``φ(‖W‖_F)/‖u‖_F`` rescales it per tensor. ``u/‖u‖_F`` has unit Frobenius norm and, for a
low-rank gradient, a spectral norm of the same order, so with the numerator held at
``φ = 1``: ``‖A‖_R = sqrt(n_in/n_out) ‖u‖_2/‖u‖_F = Θ(sqrt(n_in/n_out))`` — Muon's scale.
ε is Adam's (added to ``sqrt(v̂)``), ``Θ(G / sqrt(n_in n_out))``: it decides where ``u``
turns from sign-like to gradient-like.

Outside the framework: the numerator ``φ(‖W‖_F) = min(‖W‖_F, 10)`` is the weights' own
norm, and a declaration is a function of ``n_in, n_out, L, G`` only (``spectral infer``
measures ``‖ΔW‖ ∝ ‖W‖`` and refuses). The rules are for LAMB with the numerator taken as
Θ(1): they set ``η`` in units of ``‖W‖_F``. At μP initialisation ``‖W‖_F`` grows like
``sqrt(n)`` on hidden and input weights (and so stays below 10 only for small models), so
the real LAMB steps larger by that factor; to follow the rules literally, divide each
role's lr by ``‖W‖_F`` at initialisation. The probe measures with ``‖W‖_F = 1`` (each
parameter initialised on the unit sphere), where ``φ = 1`` — the declared update. Weight
decay is decoupled (``W ← (1 - η λ) W`` before the trust ratio). Applies to weights and
biases.
"""

from typing import Any

import sympy as sp

from spectral.optimizers import records_on_first_use
from spectral.spec import OptimizerSpec
from spectral.symbols import G, n_in, n_out

SPEC = OptimizerSpec(
    name="lamb",
    update_norm=sp.sqrt(n_in / n_out),
    eps=G / sp.sqrt(n_in * n_out),
    eps_label="LAMB ε",
    applies_to="all",
    summary="Adam's direction scaled to ‖W‖_F/‖u‖_F per tensor; trust-ratio numerator taken as 1",
    paper="You et al. 2020, Alg. 2 (trust ratio outside the framework: see the note)",
    doc=__doc__,
)

# TORCH (the torch implementation the generated module builds, and how it was checked),
# PROBE (how `spectral probe` steps it to measure its update) and JAX (the optax
# implementation of the generated JAX module, or why it has none): built on first use,
# since deriving the rules needs SPEC alone (spectral.optimizers.records_on_first_use).
def _records() -> dict[str, Any]:
    from spectral.optimizers.entry import NoJax, ProbeSetup, TorchImpl

    TORCH = TorchImpl(
        cls="pytorch_optimizer.Lamb",
        default_eps=1e-06,
        sharding="gathered",
        coupling_option="pre_norm",
        not_homogeneous=(
            "its trust ratio min(‖W‖_F, 10)/‖u‖_F scales the step with the weights' own norm, which the reparametrisation W' = αW changes"
        ),
        notes=(
            "LAMB: pytorch_optimizer.Lamb steps by lr * min(|W|_F, 10) * u / |u|_F, u",
            "Adam's step. The declaration takes the trust-ratio numerator as 1: the rules",
            "set lr in units of min(|W|_F, 10), which depends on the weights (at muP init",
            "|W|_F grows like sqrt(n) on hidden and input weights) and is outside the",
            "framework; divide each role's lr by its |W|_F at init to follow them",
            "literally. eps (base default 1e-6) is Adam's, scaled per role. Decoupled decay.",
        ),
    )

    PROBE = ProbeSetup(
        label="pytorch_optimizer.Lamb",
        note=(
            "every parameter starts with ‖W‖_F = 1, so the trust ratio's numerator is 1 (the "
            "declared update); at μP init it is min(‖W‖_F, 10), which no declaration can "
            "express"
        ),
        init="unit-sphere",
    )

    JAX = NoJax(
        reason="no optax factory is set up for it",
    )
    return {"TORCH": TORCH, "PROBE": PROBE, "JAX": JAX}


__getattr__ = records_on_first_use(__name__, _records)
