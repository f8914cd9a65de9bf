"""Adafactor: Adam with a factored second moment, ``A = ∇W / max(sqrt(V̂), ε₁)``.

Idealised update (Shazeer & Stern 2018, Alg. 4; implementation ``torch.optim.Adafactor``):
``V̂ = R C / (1ᵀR)`` from the row and column means of ``∇W ⊙ ∇W``; for a rank-1 gradient
``u vᵀ`` it is exactly ``u_i² v_j²``, so the step is ``sign(∇W)`` and ``‖A‖_R = n_in`` for
a low-rank gradient, as Adam's. Its ε₁ floors ``sqrt(V̂)``, the entrywise RMS of the
gradient, so ``ε₁ = Θ(G / sqrt(n_in n_out))``; torch holds it in ``eps=(ε₁, ε₂)``, index 0
(``None`` there means the dtype's machine epsilon, 1.19e-7 in float32; torch also floors
the mean row variance ``1ᵀR/n``, a ``Θ(G²/(n_in n_out))`` quantity, with the same ε₁ — a
floor that a default-size ε₁ never reaches). Update clipping (``d = 1``) rescales the step
to unit RMS at most: a constant factor. Applies to weights and biases (vectors keep an
unfactored ``v̂``).

Outside the declaration: torch steps by ``α_t = max(ε₂, RMS(W)) · min(lr, 1/sqrt(t))`` —
the *relative step size* of the paper's Sec. 8, which scales the step with the weights
(``RMS(W) ∝ n^-1/2`` on μP-initialised hidden weights), something no declaration in
``n_in, n_out, L, G`` can say. The generated module therefore sets ``ε₂ = 1`` by default, so
``α_t = min(lr, 1/sqrt(t))`` while ``RMS(W) ≤ 1`` (true of μP-initialised weights): the lr
rules then set the step. ``min(lr, 1/sqrt(t))`` still caps a role's lr at ``1/sqrt(t)``
(width-independent; reached only by lrs above ``1/sqrt(t)``). Pass ``eps=(None, 1e-3)`` in
``optimizer_kwargs`` for torch's default, and the relative step is back: the rules then
misstate the step by the factor ``RMS(W)``. torch decays ``W ← (1 - lr·λ) W``: decoupled,
as assumed.
"""

from typing import Any

import sympy as sp

from spectral.optimizers import records_on_first_use
from spectral.spec import OptimizerSpec
from spectral.symbols import G, n_in, n_out

SPEC = OptimizerSpec(
    name="adafactor",
    update_norm=n_in,
    eps=G / sp.sqrt(n_in * n_out),
    eps_label="Adafactor ε₁",
    eps_key="eps",
    eps_index=0,  # torch.optim.Adafactor(eps=(eps1, eps2))
    applies_to="all",
    summary="∇W / sqrt(factored v̂) ≈ sign(∇W), relative step off (torch.optim.Adafactor, ε₂ = 1)",
    paper="Shazeer & Stern 2018, Alg. 4; as AdamW, App. C.5",
    doc=__doc__,
)

# TORCH (the torch implementation the generated module builds, and how it was checked),
# PROBE (how `spectral probe` steps it to measure its update) and JAX (the optax
# implementation of the generated JAX module, or why it has none): built on first use,
# since deriving the rules needs SPEC alone (spectral.optimizers.records_on_first_use).
def _records() -> dict[str, Any]:
    from spectral.optimizers.entry import NoJax, ProbeSetup, TorchImpl

    TORCH = TorchImpl(
        cls="torch.optim.Adafactor",
        defaults={"eps": (None, 1.0)},
        default_eps=1.1920928955078125e-07,
        sharding="gathered",
        notes=(
            "Adafactor: torch.optim.Adafactor. Idealised: grad / sqrt(factored v_hat),",
            "which is sign(grad) for a rank-1 gradient. eps1 = eps[0] floors sqrt(v_hat)",
            "and is scaled per role (base default 1.19e-7, torch's float32 machine eps for",
            "eps1=None); build_optimizers writes it into the tuple. torch scales each step",
            "by max(eps2, RMS(W)) (relative step size), a dependence on the weights that the",
            "rules cannot follow; eps2 = 1 is the default here, which turns it off for",
            "weights of RMS <= 1. Pass optimizer_kwargs={'adafactor': {'eps': (None,",
            "1e-3)}} for torch's default, and the step is then lr * RMS(W) * ... instead.",
            "The step is also capped by min(lr, 1/sqrt(t)) (width-independent). Decay is",
            "decoupled, W *= 1 - lr * wd.",
        ),
    )

    PROBE = ProbeSetup(
        label="torch.optim.Adafactor(eps=(None, 1.0))",
        kwargs={"eps": (None, 1.0)},
        note=(
            "eps2 = 1 turns the relative step max(eps2, RMS(W)) off, as the generated module "
            "does"
        ),
    )

    JAX = NoJax(
        reason="no optax factory is set up for it",
    )
    return {"TORCH": TORCH, "PROBE": PROBE, "JAX": JAX}


__getattr__ = records_on_first_use(__name__, _records)
