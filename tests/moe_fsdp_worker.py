"""FSDP2 run of a tiny HF Mixtral for tests/torch/test_moe.py: 2 CPU processes (gloo).

    python tests/moe_fsdp_worker.py PORT OUT.json CONFIG.py

Every rank trains the same model twice from the same weights on the same batch: in one
process (the reference, no collectives) and sharded by fully_shard (per decoder layer,
then the whole model), with the config's Muon-Kimi + AdamW. The fused experts (3-D,
sharded on the expert dimension) are gathered whole by GatheredOptimizer and stepped one
expert matrix at a time by SlicedOptimizer, so the sharded update must be the one-process
update. Rank 0 writes the largest difference over the parameters.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from gloo_exit import leave  # a sibling file: this worker runs as a script from tests/

WORLD, WIDTH, DEPTH, STEPS = 2, 64, 2, 3
warnings.filterwarnings("ignore")


def build(cfg):
    import transformers

    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    model = transformers.MixtralForCausalLM(
        transformers.MixtralConfig(
            vocab_size=128, hidden_size=WIDTH, intermediate_size=2 * WIDTH,
            num_hidden_layers=DEPTH, num_attention_heads=4, num_key_value_heads=2,
            head_dim=16, num_local_experts=4, num_experts_per_tok=2,
            max_position_embeddings=64, tie_word_embeddings=False,
        )
    )
    cfg.apply_multipliers(model, WIDTH, DEPTH)
    cfg.init_(model, WIDTH, DEPTH)
    return model


def train(model, opt, x) -> None:
    for _ in range(STEPS):
        model(x, labels=x).loss.backward()
        opt.step()
        opt.zero_grad()


def worker(rank: int, port: int, out: str, config: str) -> None:
    torch.set_num_threads(1)
    # Muon's Newton-Schulz in float32 (tests/float32_muon.py): the sharded step and the
    # one-process step run the same iteration on the same gathered matrix, so what is compared
    # (the sharding) is the same, and the bfloat16 one was most of this worker's time here
    from float32_muon import use_float32_newton_schulz

    use_float32_newton_schulz()
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD
    )
    spec = importlib.util.spec_from_file_location("moe_fsdp_cfg", config)
    cfg = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = cfg  # the vendored form's dataclasses look themselves up
    spec.loader.exec_module(cfg)
    x = torch.randint(0, 128, (4, 16), generator=torch.Generator().manual_seed(0))
    ref = build(cfg)
    train(ref, cfg.build_optimizers(ref, WIDTH, DEPTH, lr=0.02, weight_decay=0.1), x)
    model = build(cfg)
    mesh = init_device_mesh("cpu", (WORLD,))
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = cfg.build_optimizers(model, WIDTH, DEPTH, lr=0.02, weight_decay=0.1)
    parts = {name: type(part).__name__ for name, part in opt.parts.items()}
    inner = type(getattr(opt.parts["muon-kimi"], "inner", None)).__name__
    train(model, opt, x)
    diff = 0.0
    for p, q in zip(model.parameters(), ref.parameters(), strict=True):
        full = p.full_tensor() if hasattr(p, "full_tensor") else p
        diff = max(diff, float((full.detach() - q.detach()).abs().max()))
    if rank == 0:
        with open(out, "w") as fh:
            json.dump({"max_diff": diff, "parts": parts, "inner": inner}, fh)
    leave()


if __name__ == "__main__":
    port, out, config = sys.argv[1:]
    # imported once here and inherited by both forked ranks (a spawned rank imports torch
    # again, and each rank imported transformers' Mixtral, the config's modules and
    # fully_shard's lazy torch._dynamo itself): most of this worker's time on the 2-core
    # CPU; nothing here has started a thread or a process group
    import torch._dynamo  # noqa: F401
    import transformers

    from float32_muon import use_float32_newton_schulz  # noqa: F401

    transformers.MixtralForCausalLM, transformers.MixtralConfig  # noqa: B018 (lazy imports)
    spec = importlib.util.spec_from_file_location("moe_fsdp_cfg_imports", config)
    sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # as in worker()
    spec.loader.exec_module(sys.modules[spec.name])
    mp.start_processes(worker, args=(int(port), out, config), nprocs=WORLD, join=True,
                       start_method="fork")
