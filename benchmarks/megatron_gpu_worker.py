"""Megatron-core's GPTModel trained through a generated module on a GPU (benchmarks/gpu_megatron_titan.sh).

    torchrun --standalone --nproc_per_node 1 benchmarks/megatron_gpu_worker.py OUT.json \
        --module-dir DIR --width W --depth L [--plain] [--steps N]

Builds GPTModel (local spec, learned positions, biases, untied head) in bf16 with the
generated ``transformer_config`` values (``--plain``: Megatron's own
``TransformerConfig(init_method_std=0.02)`` and its default optimizer overrides), wraps it in
Megatron's ``Float16Module`` and ``DistributedDataParallel`` with the distributed optimizer,
builds the optimizer with ``get_megatron_optimizer`` and the generated
``optimizer_overrides``, checks every parameter's group (lr, weight decay, eps against
``parameter_hparams``) and every matrix's init std (within 5 % of ``init_stds``), then
trains ``--steps`` steps on seeded random tokens and writes the losses. ``--smoke`` runs
the checks on the CPU (gloo, no DDP, no training): what can be run without a GPU.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import re
import sys
from pathlib import Path

import torch
import torch.distributed as dist

VOCAB, SEQ, BATCH, HEAD_DIM = 512, 128, 8, 32
LR, MIN_LR, WD, EPS = 3e-3, 3e-4, 0.1, 1e-8


def _module(folder: str):
    path = Path(folder) / "mup_megatron.py"
    spec = importlib.util.spec_from_file_location("mup_megatron", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _model(mup, width: int, depth: int, plain: bool, cpu: bool):
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.transformer.transformer_config import TransformerConfig

    init = (
        {"init_method_std": 0.02} if plain else mup.transformer_config(width, depth, init_std=0.02)
    )
    config = TransformerConfig(
        num_layers=depth,
        hidden_size=width,
        num_attention_heads=width // HEAD_DIM,
        kv_channels=HEAD_DIM,
        add_bias_linear=True,
        use_cpu_initialization=cpu,
        bf16=not cpu,
        params_dtype=torch.float32 if cpu else torch.bfloat16,
        **init,
    )
    model = GPTModel(
        config,
        get_gpt_layer_local_spec(),
        vocab_size=VOCAB,
        max_sequence_length=SEQ,
        position_embedding_type="learned_absolute",
        share_embeddings_and_output_weights=False,
    )
    if not plain:
        assert mup.scale_output_layer_(model, width, depth, init_std=0.02) == 1
    return config, model


def _init_checks(mup, model, width: int, depth: int, plain: bool) -> dict[str, float]:
    """Every matrix's std against the rule's (Megatron's own at the base): within 5 %."""
    stds = (
        dict.fromkeys(("init_method", "embedding_init_method", "output_layer"), 0.02)
        | {"output_layer_init_method": 0.02 / math.sqrt(2 * depth)}
        if plain
        else mup.init_stds(width, depth, init_std=0.02)
    )
    where = (
        (r"linear_(proj|fc2)\.weight$", "output_layer_init_method"),
        (r"(linear_qkv|linear_fc1)\.weight$", "init_method"),
        (r"embeddings\.weight$", "embedding_init_method"),
        (r"output_layer\.weight$", "output_layer"),
    )
    out = {}
    for name, p in model.named_parameters():
        if p.dim() < 2:
            continue
        key = next(k for pattern, k in where if re.search(pattern, name))
        std = p.detach().float().std().item()
        out[name] = std
        assert abs(std / stds[key] - 1) < 0.05, (name, std, stds[key])
    return out


def _group_checks(mup, model, optimizer, width: int, depth: int) -> int:
    """Every parameter's group (lr after the warmup's end, weight decay, eps) is its rule's."""
    want = mup.parameter_hparams(model, width, depth, lr=LR, weight_decay=WD, eps=EPS)
    checked = 0
    for opt in getattr(optimizer, "chained_optimizers", [optimizer]):
        index = getattr(opt, "model_param_group_index_map", None)
        groups = opt.optimizer.param_groups
        for name, p in model.named_parameters():
            if index is not None:
                if p not in index:
                    continue
                group = groups[index[p][0]]
            else:
                group = next((g for g in groups if any(q is p for q in g["params"])), None)
                if group is None:
                    continue
            rule = want[re.sub(r"^(module\.)+", "", name)]
            for key in ("lr", "weight_decay", "eps"):
                assert math.isclose(group[key], rule[key], rel_tol=1e-9), (name, key)
            checked += 1
    assert checked == len(want), (checked, len(want))
    return checked


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--module-dir", required=True)
    parser.add_argument("--width", type=int, required=True)
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--plain", action="store_true")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    from megatron.core import parallel_state, tensor_parallel
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler
    from megatron.core.transformer.module import Float16Module

    mup = _module(args.module_dir)
    cpu = args.smoke
    if cpu:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    else:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
        dist.init_process_group("nccl")
    parallel_state.initialize_model_parallel(1, 1)
    torch.manual_seed(0)
    if not cpu:
        tensor_parallel.model_parallel_cuda_manual_seed(0)
    config, model = _model(mup, args.width, args.depth, args.plain, cpu)
    result: dict = {"width": args.width, "depth": args.depth, "plain": args.plain}
    if not cpu:
        model = model.cuda()
    result["init_std"] = _init_checks(mup, model, args.width, args.depth, args.plain)
    opt_config = OptimizerConfig(
        optimizer="adam", lr=LR, min_lr=MIN_LR, weight_decay=WD, adam_eps=EPS, clip_grad=0.0,
        bf16=not cpu, use_distributed_optimizer=not cpu,
    )  # fmt: skip
    if cpu:
        model.ddp_config = DistributedDataParallelConfig()
        chunks = [model]
    else:
        ddp = DistributedDataParallelConfig(
            grad_reduce_in_fp32=True, use_distributed_optimizer=True, overlap_grad_reduce=False
        )
        chunks = [DistributedDataParallel(config, ddp, Float16Module(config, model))]
    overrides = None if args.plain else mup.optimizer_overrides(opt_config, chunks)
    if not args.plain:
        assert mup.check_overrides(chunks, overrides) == [], mup.check_overrides(chunks, overrides)
    if cpu:  # FP32Optimizer puts its loss scale on CUDA: build only the param groups
        from megatron.core.optimizer import _get_param_groups

        groups = _get_param_groups(chunks, opt_config, overrides)
        result["groups"] = len(groups)
        print(json.dumps({k: v for k, v in result.items() if k != "init_std"}))
        with open(args.out, "w") as f:
            json.dump(result, f)
        return
    optimizer = get_megatron_optimizer(opt_config, chunks, config_overrides=overrides)
    scheduler = OptimizerParamScheduler(
        optimizer, init_lr=0.0, max_lr=LR, min_lr=MIN_LR, lr_warmup_steps=1,
        lr_decay_steps=args.steps, lr_decay_style="constant", start_wd=WD, end_wd=WD,
        wd_incr_steps=args.steps, wd_incr_style="constant",
    )  # fmt: skip
    scheduler.step(1)  # the end of the warmup: every group at its rule's lr
    if not args.plain:
        result["groups_checked"] = _group_checks(mup, model, optimizer, args.width, args.depth)
    generator = torch.Generator(device="cuda").manual_seed(1)
    position_ids = torch.arange(SEQ, device="cuda").unsqueeze(0).expand(BATCH, -1)
    losses = []
    for _ in range(args.steps):
        tokens = torch.randint(0, VOCAB, (BATCH, SEQ + 1), device="cuda", generator=generator)
        for chunk in chunks:
            chunk.zero_grad_buffer()
        optimizer.zero_grad()
        loss = chunks[0](tokens[:, :-1], position_ids, None, labels=tokens[:, 1:]).float().mean()
        loss.backward()
        for chunk in chunks:
            chunk.finish_grad_sync()
        ok, _, _ = optimizer.step()
        assert ok, "optimizer step skipped"
        scheduler.step(1)
        losses.append(loss.item())
    result["losses"] = losses
    print(json.dumps({k: v for k, v in result.items() if k != "init_std"}))
    with open(args.out, "w") as f:
        json.dump(result, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
