"""Print how AdamW's first step scales with the width on Gaussian stand-ins (no model).

Not a test module: docs/your-model.md quotes it beside the AdamW Llama control. AdamW's first
step is ``-lr * sign(G)`` (bias-corrected ``m / sqrt(v)`` is ``g / |g|`` when ε is far below
``|g|``). Two cases, each at widths n = 64 ... 1024, lr 1/n as the rules give a hidden matrix:

* ``tokens T``: a hidden n x n matrix whose gradient sums T token outer products
  ``G = sum_t d_t x_t^T`` (d, x standard normal); printed, the RMS of ``sign(G) x_s / n`` on
  the batch's own inputs, and for contrast Muon's step (the polar factor of G, norm 1);
* ``vocab V``: a readout W (V x n, standard normal, multiplier 1/n) and a stream moved by
  ``-sign(W^T d)``, d the loss gradient of one token over V logits (``e_y - 1/V``);
  printed, the RMS over the V logits of ``W sign(W^T d) / n``.

Each line gives the slope between successive widths and ``-K / (2 (K + 2n/π))`` (K = T or
V, n the pair's geometric mean): the slope of ``sqrt(2 / (π K) + 1 / n)``, a part that the
step aligns with the input (or with d), Θ(1) in n, plus a part that it does not, n^-1/2.
"""

from __future__ import annotations

import math
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

WIDTHS = [64, 128, 256, 512, 1024]


def tokens(n: int, t: int, polar: bool) -> float:
    d, x = torch.randn(n, t, dtype=torch.float64), torch.randn(n, t, dtype=torch.float64)
    g = d @ x.T
    if polar:
        u, s, vh = torch.linalg.svd(g, full_matrices=False)
        r = int((s > s[0] * 1e-10).sum())
        step = u[:, :r] @ vh[:r]
    else:
        step = torch.sign(g) / n
    return float((step @ x).pow(2).mean().sqrt())


def vocab(n: int, v: int) -> float:
    w = torch.randn(v, n, dtype=torch.float64)
    d = torch.full((v,), -1.0 / v, dtype=torch.float64)
    d[0] += 1.0
    return float((w @ torch.sign(w.T @ d) / n).pow(2).mean().sqrt())


def line(label: str, k: int | None, rms: list[float]) -> None:
    pairs = list(zip(WIDTHS[:-1], WIDTHS[1:], rms[:-1], rms[1:], strict=True))
    slopes = " ".join(f"{math.log(b / a, 2):+.2f}" for _, _, a, b in pairs)
    print(f"{label:18s} slopes {slopes}")
    if k is not None:
        form = [-k / (2 * (k + 2 * math.sqrt(m * n) / math.pi)) for m, n, _, _ in pairs]
        print(f"{'':18s} form   " + " ".join(f"{s:+.2f}" for s in form))


def main() -> None:
    torch.manual_seed(0)
    print("widths", " -> ".join(map(str, WIDTHS)))
    for t in (8, 256):
        line(f"tokens T={t} AdamW", t, [tokens(n, t, False) for n in WIDTHS])
        line(f"tokens T={t} Muon", None, [tokens(n, t, True) for n in WIDTHS])
    for v in (16, 128, 1024):
        rms = [sum(vocab(n, v) for _ in range(32)) / 32 for n in WIDTHS]
        line(f"vocab V={v}", v, rms)


if __name__ == "__main__":
    main()
