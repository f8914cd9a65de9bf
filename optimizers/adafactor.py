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

import sympy as sp

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
