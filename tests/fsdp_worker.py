"""FSDP2 runs for tests/torch/test_fsdp.py: 2 CPU processes (gloo), generated config modules.

    python tests/fsdp_worker.py PORT OUT.json CKPT_DIR JOB [JOB ...]

Each JOB is a JSON object: {"config": path, "model": "gpt" | "mlp", "width", "depth",
and optionally "bias": bool (mlp), "mesh": [2] (fully_shard, the default) or [1, 2]
(HSDP), "optimizer_kwargs": {...}, "user_factory": bool (the module's factories passed
as factories=), "control": bool, "ddp": bool}. Per job: trains the model
for 5 steps in one process (the reference: on every rank, no collectives) and sharded
with fully_shard (per block, then the whole model); saves a DCP checkpoint at step 3,
resumes it into a freshly built model and optimizer (other weights) and runs that to
step 5. Every rank sees the whole batch, so FSDP2's averaged gradient is the one-process
gradient bit for bit and any difference comes from the optimizer; with a different
batch per rank the gradient differs from the one-process one in its last bits (the
summation order), as under DDP, and Adam's normalisation of entries whose gradient is
rounding noise (key biases) would show that instead. Muon's Newton-Schulz runs in float32
here (float32_muon.use_float32_newton_schulz).
"control" also trains with the real optimizers stepping the shards directly (what
build_optimizers did before), to show the comparison catches a different update; "ddp"
also trains with a different half of every batch on each rank, under DDP and sharded,
which should agree with each other.

The first GPT job also runs init_, classify, apply_multipliers and check on a sharded
model. Where build_optimizers refuses the sharded model, the job records its error.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
import time
import warnings

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP

# sibling files: these workers run as scripts from tests/
from float32_muon import use_float32_newton_schulz
from gloo_exit import leave

WORLD = 2
BLOCK, BATCH, STEPS, SAVE_AT = 16, 8, 5, 3
BASE = {"lr": 0.01, "weight_decay": 0.1}

# DTensor warns that its random ops are incomplete on CPU meshes; init_ does not use them
warnings.filterwarnings("ignore", message=".*DTensor random operators.*")


def load(path: str):
    spec = importlib.util.spec_from_file_location(f"fsdp_cfg_{abs(hash(path))}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # as an import does (dataclasses look it up)
    spec.loader.exec_module(mod)
    return mod


def make_model(cfg, job: dict, seed: int = 0, init: bool = True):
    from spectral.models import GPT, ResidualMLP

    width, depth = job["width"], job["depth"]
    if job["model"] == "gpt":
        model = GPT(width, depth, block_size=BLOCK, multipliers=cfg)
    else:
        bias = job.get("bias", True)
        model = ResidualMLP(8, 4, width, depth, bias=bias, multipliers=cfg)
    if init:
        torch.manual_seed(seed)
        cfg.init_(model, width, depth, 0.02)
    return model


def shard(model, mesh):
    blocks = model.transformer.h if hasattr(model, "transformer") else model.blocks
    for block in blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def batches(job: dict) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(0)
    out = []
    for _ in range(STEPS):
        if job["model"] == "gpt":
            seq = torch.randint(0, 256, (BATCH, BLOCK + 1), generator=gen)
            out.append((seq[:, :-1], seq[:, 1:]))
        else:
            x = torch.randn(BATCH, 8, generator=gen)
            out.append((x, x[:, :4].sin()))
    return out


def loss_of(model, x, y):
    out = model(x)
    if out.ndim == 3:
        return F.cross_entropy(out.flatten(0, 1), y.flatten())
    return (out - y).pow(2).mean()


def train(model, opts, data) -> list[float]:
    losses = []
    for x, y in data:
        loss = loss_of(model, x, y)
        loss.backward()
        for opt in opts:
            opt.step()
            opt.zero_grad()
        losses.append(loss.item())
    return losses


def full(model) -> dict[str, torch.Tensor]:
    """Every parameter whole (a collective for DTensors)."""
    out = {}
    for name, p in model.named_parameters():
        value = p.detach()
        out[name] = value.full_tensor() if hasattr(value, "full_tensor") else value.clone()
    return out


def rel_diff(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> float:
    """max over parameters of max|got - want| / max|want|."""
    assert got.keys() == want.keys()
    return max(
        ((got[n] - want[n]).abs().max() / want[n].abs().max().clamp_min(1e-30)).item() for n in want
    )


def on_shards(cfg, model, width: int, depth: int) -> list[torch.optim.Optimizer]:
    """The real implementations stepping the DTensor shards directly (no gathering)."""
    groups = cfg.param_groups(model, width, depth, **BASE)
    opts = []
    for kind in dict.fromkeys(g["optimizer"] for g in groups):
        mine = [g for g in groups if g["optimizer"] == kind]
        opts.append(cfg.FACTORIES[kind](mine))
    return opts


def run_job(cfg, job: dict, mesh, ckpt: str) -> dict:
    t0 = time.perf_counter()
    width, depth = job["width"], job["depth"]
    kwargs = {**BASE, "optimizer_kwargs": job.get("optimizer_kwargs")}
    if job.get("user_factory"):  # the module's factories, passed in as a user's own
        kwargs["factories"] = {
            kind: functools.partial(factory) for kind, factory in cfg.FACTORIES.items()
        }
    data = batches(job)

    model = shard(make_model(cfg, job), mesh)
    try:
        opt = cfg.build_optimizers(model, width, depth, **kwargs)
    except ValueError as exc:
        return {"refused": str(exc)}

    ref = make_model(cfg, job)
    ref_opt = cfg.build_optimizers(ref, width, depth, **kwargs)
    ref_losses = train(ref, [ref_opt], data)
    want = full(ref)

    problems = cfg.check(model, width, depth, opt)
    losses = train(model, [opt], data[:SAVE_AT])
    dcp.save({"train": cfg.CheckpointState(model, opt)}, checkpoint_id=ckpt)
    losses += train(model, [opt], data[SAVE_AT:])
    got = full(model)

    again = shard(make_model(cfg, job, seed=1), mesh)  # other weights: the load replaces them
    again_opt = cfg.build_optimizers(again, width, depth, **kwargs)
    dcp.load({"train": cfg.CheckpointState(again, again_opt)}, checkpoint_id=ckpt)
    train(again, [again_opt], data[SAVE_AT:])
    resumed = full(again)

    result = {
        "parts": {k: type(v).__name__ for k, v in opt.parts.items()},
        "inner": {k: type(getattr(v, "inner", v)).__name__ for k, v in opt.parts.items()},
        "max_rel": rel_diff(got, want),
        "resumed_rel": rel_diff(resumed, want),
        "resumed_vs_run": rel_diff(resumed, got),
        "ref_losses": ref_losses,
        "losses": losses,
        "problems": problems,
    }
    if job.get("control"):  # torch's own bfloat16 iteration, on the shards (as issue 14 saw)
        use_float32_newton_schulz(on=False)
        plain = shard(make_model(cfg, job), mesh)
        train(plain, on_shards(cfg, plain, width, depth), data)
        result["control_rel"] = rel_diff(full(plain), want)
        use_float32_newton_schulz()
    if job.get("ddp"):  # each rank its own half of every batch, as in real training
        rank, rows = dist.get_rank(), BATCH // WORLD
        half = [
            (x[rank * rows : (rank + 1) * rows], y[rank * rows : (rank + 1) * rows])
            for x, y in data
        ]
        ddp_model = make_model(cfg, job)
        ddp = DDP(ddp_model)
        train(ddp, [cfg.build_optimizers(ddp, width, depth, **kwargs)], half)
        fsdp = shard(make_model(cfg, job), mesh)
        train(fsdp, [cfg.build_optimizers(fsdp, width, depth, **kwargs)], half)
        result["split_fsdp_vs_ddp"] = rel_diff(full(fsdp), full(ddp_model))
        result["split_ddp_vs_one"] = rel_diff(full(ddp_model), want)
    result["seconds"] = time.perf_counter() - t0
    return result


def sharded_api(cfg, job: dict, mesh) -> dict:
    """init_, classify, apply_multipliers and check on a sharded GPT."""
    from spectral.models import GPT

    width, depth = job["width"], job["depth"]
    before = make_model(cfg, job)  # init_ on the whole model, then sharded
    want = full(before)
    roles_before = {n: cfg.classify(n, p) for n, p in before.named_parameters()}
    after = shard(make_model(cfg, job, init=False), mesh)
    torch.manual_seed(0)
    cfg.init_(after, width, depth, 0.02)  # init_ on the shards, same seed
    got = full(after)
    roles = {n: cfg.classify(n, p) for n, p in after.named_parameters()}

    class Plain(GPT):  # the same GPT, its multipliers installed by apply_multipliers
        applies_mup_multipliers = False

    hooked = Plain(width, depth, block_size=BLOCK, multipliers=None)
    hooked.load_state_dict(before.state_dict())
    hooked = shard(hooked, mesh)
    handle = cfg.apply_multipliers(hooked, width, depth)  # on the sharded model
    x = batches(job)[0][0]
    with torch.no_grad():
        out_hooked = hooked(x)
        out_builtin = shard(before, mesh)(x)
    return {
        "init_rel": rel_diff(got, want),
        "roles_same": roles == roles_before,
        "roles": sorted(set(roles.values())),
        "hooked": {layer: len(names) for layer, names in handle.modules.items()},
        "hooked_vs_builtin": (out_hooked - out_builtin).abs().max().item(),
        "check_hooked": cfg.check(hooked, width, depth),
    }


def worker(rank: int, port: int, out: str, ckpt: str, jobs: list[dict]) -> None:
    torch.set_num_threads(1)
    # Muon's Newton-Schulz in float32: what these runs compare is the sharding (the sharded
    # step against the one-process step, the same iteration on the same gathered matrix either
    # way), and the bfloat16 iteration was most of the Muon jobs' time on a CPU without
    # bfloat16 matrix units; the "control" runs torch's own, as a user's shards would
    use_float32_newton_schulz()
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD
    )
    meshes = {}
    result = {"jobs": []}
    for i, job in enumerate(jobs):
        shape = tuple(job.get("mesh", [WORLD]))
        if shape not in meshes:  # a collective: the same order on every rank
            names = ("replicate", "shard") if len(shape) == 2 else None
            meshes[shape] = init_device_mesh("cpu", shape, mesh_dim_names=names)
        mesh = meshes[shape]
        cfg = load(job["config"])
        if "api" not in result and job["model"] == "gpt":
            result["api"] = sharded_api(cfg, job, mesh)
        result["jobs"].append({**job, **run_job(cfg, job, mesh, f"{ckpt}/{i}")})
    if rank == 0:
        with open(out, "w") as fh:
            json.dump(result, fh)
    leave()  # barrier, teardown, exit without C++ destructors (gloo_exit.py)


if __name__ == "__main__":
    port, out, ckpt, *jobs = sys.argv[1:]
    args = (int(port), out, ckpt, [json.loads(j) for j in jobs])
    # imported once here and inherited by both forked ranks (a spawned rank imports torch
    # again, and each rank's first job imported these lazily: torch._dynamo for fully_shard,
    # fsspec for DCP, pytorch-optimizer for the catalog's factories), a third of this
    # worker's time on the 2-core CPU; nothing here has started a thread or a process group
    import fsspec  # noqa: F401
    import pytorch_optimizer  # noqa: F401
    import torch._dynamo  # noqa: F401

    import spectral.models  # noqa: F401

    mp.start_processes(worker, args=args, nprocs=WORLD, join=True, start_method="fork")
