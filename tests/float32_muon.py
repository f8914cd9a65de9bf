"""torch.optim.Muon's Newton-Schulz iteration in float32, for tests that patch it in.

torch casts the momentum to bfloat16 before the iteration. On a CPU without bfloat16 matrix
units (this build machine's AVX2) a bfloat16 addmm is 3-5 times slower than a float32 one,
and tests that train Muon-Kimi twins at several widths spend most of their time there. The
bfloat16 rounding is also not scale-equivariant: bf16(θ·M) is not θ·bf16(M), which moves the
losses of two mathematically equal runs by ~1e-3 (docs/absorb.md). Tests whose subject is
the rules (slopes, the hook-free symmetry) patch this in; tests of the optimizer as users
run it do not. It is the iteration the check across widths runs its CPU twins with.
"""

from __future__ import annotations

import torch.optim._muon as _muon

from spectral.torch.check.twin_rows import newton_schulz_float32

__all__ = ["newton_schulz_float32", "use_float32_newton_schulz"]

_TORCH_OWN = _muon._zeropower_via_newtonschulz


def use_float32_newton_schulz(on: bool = True) -> None:
    """For a whole process (a worker or script, which has no ``monkeypatch``): torch.optim.Muon's
    Newton-Schulz in float32, or torch's own bfloat16 one back (``on=False``)."""
    _muon._zeropower_via_newtonschulz = newton_schulz_float32 if on else _TORCH_OWN
