"""DDP smoke run for tests/torch/test_training.py: 2 CPU processes, gloo, a generated config.

    python tests/ddp_worker.py CONFIG.py PORT OUT.json

Trains spectral.models.ResidualMLP under DistributedDataParallel for 5 steps with
build_optimizers(...) from CONFIG.py, each rank on its own data, then writes per-rank
parameter checksums and the largest cross-rank parameter difference to OUT.json.
"""

from __future__ import annotations

import importlib.util
import json
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

from gloo_exit import leave  # a sibling file: these workers run as scripts from tests/

WORLD = 2
WIDTH, DEPTH = 64, 2


def load(path: str):
    spec = importlib.util.spec_from_file_location("ddp_cfg", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # as an import does (dataclasses look it up)
    spec.loader.exec_module(mod)
    return mod


def worker(rank: int, config: str, port: int, out: str) -> None:
    from spectral.models import ResidualMLP

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD
    )
    cfg = load(config)
    torch.manual_seed(0)  # same initial weights on every rank (DDP also broadcasts them)
    model = ResidualMLP(8, 4, WIDTH, DEPTH, k=2, multipliers=cfg)
    cfg.init_(model, WIDTH, DEPTH, 0.125)
    ddp = DDP(model)
    opts = cfg.build_optimizers(ddp, WIDTH, DEPTH, lr=3e-3, weight_decay=0.01)
    gen = torch.Generator().manual_seed(1000 + rank)  # different data per rank
    losses = []
    for _ in range(5):
        x = torch.randn(32, 8, generator=gen)
        loss = (ddp(x) - x[:, :4].sin()).pow(2).mean()
        loss.backward()
        opts.step()
        opts.zero_grad()
        losses.append(loss.item())
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    gathered = [torch.zeros_like(flat) for _ in range(WORLD)]
    dist.all_gather(gathered, flat)
    if rank == 0:
        diff = max((g - gathered[0]).abs().max().item() for g in gathered)
        with open(out, "w") as fh:
            json.dump(
                {
                    "max_diff": diff,
                    "checksums": [g.double().sum().item() for g in gathered],
                    "losses": losses,
                    "optimizers": sorted(opts.parts),
                },
                fh,
            )
    leave()  # barrier, teardown, exit without C++ destructors (gloo_exit.py)


if __name__ == "__main__":
    config, port, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    # imported once here and inherited by both forked ranks (a spawned rank imports torch
    # again, and each rank imported the config's modules, sympy included, and DDP's lazy
    # torch._dynamo itself): most of this worker's time on the 2-core CPU; nothing here has
    # started a thread or a process group
    import torch._dynamo  # noqa: F401

    import spectral.models  # noqa: F401

    load(config)
    mp.start_processes(worker, args=(config, port, out), nprocs=WORLD, join=True,
                       start_method="fork")
