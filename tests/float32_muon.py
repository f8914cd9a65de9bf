"""torch.optim.Muon's Newton-Schulz iteration in float32, for tests that patch it in.

torch casts the momentum to bfloat16 before the iteration. On a CPU without bfloat16 matrix
units (this build machine's AVX2) a bfloat16 addmm is 3-5 times slower than a float32 one,
and tests that train Muon-Kimi twins at several widths spend most of their time there. The
bfloat16 rounding is also not scale-equivariant: bf16(θ·M) is not θ·bf16(M), which moves the
losses of two mathematically equal runs by ~1e-3 (docs/absorb.md). Tests whose subject is
the rules (slopes, the hook-free symmetry) patch this in; tests of the optimizer as users
run it do not.
"""

from __future__ import annotations

import torch


def newton_schulz_float32(grad, ns_coefficients, ns_steps, eps):
    """torch.optim._muon._zeropower_via_newtonschulz, computed in float32."""
    a, b, c = ns_coefficients
    x = grad.float()
    tall = grad.size(0) > grad.size(1)
    x = x.T if tall else x
    x = x / x.norm().clamp(min=eps)
    for _ in range(ns_steps):
        gram = x @ x.T
        x = torch.addmm(x, torch.addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x.T if tall else x
