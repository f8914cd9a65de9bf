"""Hook-free vs hooked training losses: the numbers behind docs/absorb.md.

    .venv/bin/python benchmarks/absorbed_losses.py

For the reference GPT and a Hugging Face Llama (96 wide, 3 layers, from base 64 x 2: every
multiplier 2/3, so no product is exact by luck), and AdamW, Muon-Kimi + AdamW, SGD, Lion:
20 float32 steps with the hooked config and with the --absorb-multipliers one; prints the
largest absolute and relative loss difference. Muon runs twice: with torch.optim.Muon as it
is (its Newton-Schulz iteration casts to bfloat16) and with that iteration in float32 (as
tests/engine/test_absorb.py does), to separate the bf16 rounding from the symmetry.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch.optim._muon as muon

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_absorb import CASES, _losses, _ns_float32  # noqa: E402  (the tests' own loop)

from spectral.codegen.torch import load_generated  # noqa: E402


def main() -> int:
    folder = tempfile.mkdtemp()
    bf16 = muon._zeropower_via_newtonschulz
    for kind in ("gpt", "llama"):
        for case, (hidden, others, base) in CASES.items():
            for ns in (("bf16", bf16), ("fp32", _ns_float32)) if "muon" in case else (("", bf16),):
                muon._zeropower_via_newtonschulz = ns[1]
                hooked = load_generated(hidden, others, 2, base_width=64, base_depth=2, folder=folder)
                free = load_generated(hidden, others, 2, base_width=64, base_depth=2, folder=folder,
                                      absorb=True)
                a, b = _losses(kind, hooked, False, base), _losses(kind, free, True, base)
                absolute = max(abs(x - y) for x, y in zip(a, b, strict=True))
                relative = max(abs(x - y) / abs(x) for x, y in zip(a, b, strict=True))
                label = f"{case} ({ns[0]} Newton-Schulz)" if ns[0] else case
                print(f"{kind:6s} {label:38s} loss {a[0]:.4f} -> {a[-1]:.4f}   max |diff| "
                      f"{absolute:.2e}   max relative {relative:.2e}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
