"""DDP run for tests/families/test_adapters.py: a Hugging Face Llama with apply_multipliers.

    python tests/hf_worker.py CONFIG.py PORT OUT.pt

Two CPU processes (gloo) train the same tiny LlamaForCausalLM, built from a config object,
for 3 steps with build_optimizers(...) from CONFIG.py; each rank takes its half of every
global batch. Rank 0 writes the losses (the mean over both halves), the final parameters
and the largest cross-rank parameter difference to OUT.pt. The test runs train() in one
process on the same global batches and compares.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

from gloo_exit import leave  # a sibling file: these workers run as scripts from tests/

WORLD = 2
WIDTH, DEPTH, VOCAB = 128, 2, 128
STEPS, BATCH, SEQ = 3, 8, 17


def load(path: str):
    spec = importlib.util.spec_from_file_location("hf_worker_cfg", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # as an import does (dataclasses look it up)
    spec.loader.exec_module(mod)
    return mod


def build() -> torch.nn.Module:
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM

    transformers.logging.set_verbosity_error()
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=WIDTH,
        intermediate_size=2 * WIDTH,
        num_hidden_layers=DEPTH,
        num_attention_heads=WIDTH // 16,
        max_position_embeddings=32,
        tie_word_embeddings=False,
        use_cache=False,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    return LlamaForCausalLM(config)


def train(cfg: Any, rank: int | None) -> dict[str, Any]:
    """Three steps on the global batches. rank None: one process takes each batch as its
    WORLD parts, one backward each on loss / WORLD (gradients summed: DDP's average);
    otherwise this rank's part under DistributedDataParallel."""
    model = build()
    handle = cfg.apply_multipliers(model, WIDTH, DEPTH)
    cfg.init_(model, WIDTH, DEPTH, 0.02)
    net = model
    if rank is not None:
        from torch.nn.parallel import DistributedDataParallel as DDP

        net = DDP(model)
    opt = cfg.build_optimizers(net, WIDTH, DEPTH, lr=3e-3, weight_decay=0.1)
    gen = torch.Generator().manual_seed(2)
    losses = []
    for _ in range(STEPS):
        parts = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen).chunk(WORLD)
        mine = parts if rank is None else [parts[rank]]
        total = torch.zeros(())
        for tokens in mine:
            out = net(tokens[:, :-1]).logits
            loss = F.cross_entropy(out.flatten(0, 1), tokens[:, 1:].flatten())
            (loss / len(mine)).backward()
            total += loss.detach()
        if rank is not None:
            dist.all_reduce(total)
        losses.append(total.item() / WORLD)
        opt.step()
        opt.zero_grad()
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    return {"losses": losses, "params": params, "multipliers": handle.multipliers}


def worker(rank: int, config: str, port: int, out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD
    )
    result = train(load(config), rank)
    flat = torch.cat([p.reshape(-1) for p in result["params"].values()])
    gathered = [torch.zeros_like(flat) for _ in range(WORLD)]
    dist.all_gather(gathered, flat)
    if rank == 0:
        result["max_rank_diff"] = max((g - gathered[0]).abs().max().item() for g in gathered)
        torch.save(result, out)
    leave()  # barrier, teardown, exit without C++ destructors (gloo_exit.py)


if __name__ == "__main__":
    config, port, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    # transformers' Llama and the config imported here, once: the ranks are forked from this
    # process (it has run no torch op, so no thread pool is copied) and import nothing again;
    # spawned, each rank imported torch and transformers anew (about 10 of the test's 20 s)
    import transformers.models.llama.modeling_llama  # noqa: F401

    load(config)
    mp.start_processes(
        worker, args=(config, port, out), nprocs=WORLD, join=True, start_method="fork"
    )
