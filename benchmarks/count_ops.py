"""How many aten ops one training step of the sweep's GPT dispatches (forward, backward,
gradient clipping, optimizer step), per optimizer and size.

On a GPU at the sweep's small sizes, each op is at least one kernel launch, so this count,
not the arithmetic, bounds the time per step; it explains why an H100 and an H200 run the
``gpu-8min`` preset at about the same speed. Counted on the CPU (the count does not depend
on the device):

    .venv/bin/python benchmarks/count_ops.py
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from spectral.sweep import Job, SweepConfig, build_run, recipe


class _Count(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.n += 1
        return func(*args, **(kwargs or {}))


def count(optimizer: str, width: int, depth: int) -> int:
    cfg = SweepConfig(optimizer=optimizer, base_width=128, base_depth=2, head_dim=64, batch_size=2, block_size=16)
    model, opts = build_run(Job("mup", width, depth, -8), cfg, recipe(optimizer, "mup", cfg), 256, "cpu")
    x = torch.randint(0, 256, (2, 16))

    def step() -> None:
        loss = F.cross_entropy(model(x).reshape(-1, 256), x.reshape(-1))
        for o in opts:
            o.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(model.parameters()), 1.0)
        for o in opts:
            o.step()

    step()  # the optimizers create their state on the first step
    with _Count() as c:
        step()
    return c.n


def main() -> int:
    torch.set_num_threads(1)
    for optimizer in ("muon-kimi+adamw", "adamw"):
        for width, depth in ((128, 2), (128, 4), (128, 16), (1024, 2)):
            print(f"{optimizer:16s} n={width:<5d} L={depth:<3d} {count(optimizer, width, depth):6d} aten ops per step")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
