"""FSDP2 (fully_shard) with the generated config: the one-process update, DCP resume.

One spawn of tests/fsdp_worker.py (2 CPU processes, gloo) runs every job below; the tests
read its report. The bar (issue 14): parameters after 5 steps within 1e-5 (max relative
difference) of the one-process run, and the same after a DCP checkpoint at step 3 is
resumed into a fresh model and optimizer.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import re
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("pytorch_optimizer")
if not torch.distributed.is_available():  # pragma: no cover - torch built without it
    pytest.skip("torch.distributed is not available", allow_module_level=True)

import torch.distributed.checkpoint as dcp  # noqa: E402

from spectral.catalog import catalog  # noqa: E402
from spectral.codegen import render  # noqa: E402

pytestmark = pytest.mark.generated  # also run on the --vendor form

HERE = Path(__file__).resolve().parents[1]  # tests/: the shared helpers and workers
TOL = 1e-5
GPT = {"model": "gpt", "width": 128, "depth": 4}  # the reference GPT
# a bias-free MLP that one optimizer trains alone: input 33x8, hidden 33x33, output 4x33
# (shards of 17 and 16 rows, non-square matrices for the per-matrix scale factors)
MLP = {"model": "mlp", "width": 33, "depth": 1, "bias": False}

JOBS: dict[str, tuple[tuple[str, str | None], dict]] = {
    "adamw": (("adamw", None), GPT),
    # depth 2 (the base depth; width 128 keeps every width multiplier away from 1): its
    # bfloat16 Newton-Schulz, run 27 times per matrix here, was half of the worker's time at
    # depth 4; the sharding is per block either way, and adamw and lion train depth 4
    "muon-kimi+adamw": (("muon-kimi", "adamw"), {**GPT, "depth": 2, "control": True, "ddp": True}),
    # two more whole-matrix optimizers beside AdamW, on the MLP with biases: the GPT's
    # attention and embeddings under a gathered optimizer are muon-kimi+adamw's (the same
    # GatheredOptimizer); on the GPT these two took 35% of the worker's time
    "muon+adamw": (("muon", "adamw"), {**MLP, "bias": True}),
    "shampoo+adamw": (("shampoo", "adamw"), {**MLP, "bias": True}),
    "lion": (("lion", None), GPT),
    "muon-kimi+adamw, HSDP mesh": (
        ("muon-kimi", "adamw"),
        {**MLP, "bias": True, "mesh": [1, 2]},
    ),
    "lion, cautious": (("lion", None), {**MLP, "optimizer_kwargs": {"lion": {"cautious": True}}}),
    "adamw, user factory": (("adamw", None), {**MLP, "user_factory": True}),
}
# refused on sharded parameters: build_optimizers' error is the result
REFUSED = {f"catalog: {name}" for name in ("sophia",) if name in catalog()}
if "adan" in catalog():
    JOBS["adan, max_grad_norm"] = (
        ("adan", None),
        {**MLP, "optimizer_kwargs": {"adan": {"max_grad_norm": 1.0}}},
    )
    REFUSED.add("adan, max_grad_norm")
# every catalog optimizer, the moment it is declared
JOBS.update({f"catalog: {name}": ((name, None), MLP) for name in catalog()})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config_path(folder: Path, hidden: str, others: str | None) -> Path:
    path = folder / f"cfg_{hidden.replace('-', '_')}_{others}.py"
    if not path.exists():
        path.write_text(render(hidden, others, base_width=64, base_depth=2))
    return path


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # as an import does (dataclasses look it up)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def worker():
    return _load(HERE / "fsdp_worker.py", "fsdp_worker")


@pytest.fixture(scope="module")
def tables():
    """Which catalog optimizer steps shards, gathered matrices or is refused (the
    ``sharding`` of each optimizer file's TORCH record)."""
    from types import SimpleNamespace

    from spectral.catalog import modules
    from spectral.torch.optim.sharded import ENTRY_MIXING_OPTIONS

    def named(how):
        return {m.SPEC.name for m in modules() if m.TORCH.sharding == how}

    return SimpleNamespace(
        ELEMENTWISE=named("elementwise"),
        WHOLE_MATRIX=named("gathered"),
        NOT_SHARDABLE=named("refused"),
        ENTRY_MIXING_OPTIONS=ENTRY_MIXING_OPTIONS,
    )


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("fsdp")
    jobs = []
    for (hidden, others), job in JOBS.values():
        jobs.append({**job, "config": str(_config_path(folder, hidden, others))})
    out = folder / "report.json"
    r = subprocess.run(
        [
            sys.executable,
            str(HERE / "fsdp_worker.py"),
            str(_free_port()),
            str(out),
            str(folder / "ckpt"),
            *[json.dumps(job) for job in jobs],
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert r.returncode == 0, r.stderr[-4000:]
    result = json.loads(out.read_text())
    result["folder"] = folder
    return result


def _job(report: dict, label: str) -> dict:
    return report["jobs"][list(JOBS).index(label)]


RUNS = [label for label in JOBS if label not in REFUSED]


@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.parametrize("label", RUNS)
def test_sharded_training_is_the_one_process_training(report, tables, label):
    job = _job(report, label)
    assert "refused" not in job, job["refused"]
    assert job["max_rel"] <= TOL, job
    assert job["problems"] == []  # check() on the sharded model and its optimizer
    assert job["losses"] == pytest.approx(job["ref_losses"], rel=TOL)
    options = JOBS[label][1].get("optimizer_kwargs", {})
    for kind, part in job["parts"].items():
        # whole-matrix optimizers (and element-wise ones given an option that mixes a
        # tensor's entries, or built by a user's factory) are stepped whole; element-wise
        # ones on the shards
        mixing = any(options.get(kind, {}).get(o) for o in tables.ENTRY_MIXING_OPTIONS)
        user = JOBS[label][1].get("user_factory", False)
        whole = kind not in tables.ELEMENTWISE or mixing or user
        assert part == ("GatheredOptimizer" if whole else job["inner"][kind]), kind


@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.parametrize("label", RUNS)
def test_dcp_resume_at_step_3_is_the_one_process_training(report, label):
    job = _job(report, label)
    assert job["resumed_rel"] <= TOL, job
    assert job["resumed_vs_run"] <= TOL, job


@pytest.mark.slow
@pytest.mark.distributed
def test_refusals_name_the_parameter(report, tables):
    assert {f"catalog: {n}" for n in tables.NOT_SHARDABLE if n in catalog()} <= REFUSED
    assert _job(report, "catalog: sophia")["refused"] == (
        "parameter 'input.weight' is sharded (FSDP2 DTensor) and trained by sophia, which "
        "cannot step sharded parameters: its Hutchinson Hessian estimate differentiates "
        "the gradient again (loss.backward(create_graph=True)), and the gradients FSDP2 "
        "reduce-scatters onto the shards carry no graph. Train these roles with another "
        "optimizer or leave their modules unsharded."
    )
    if "adan, max_grad_norm" not in JOBS:
        return
    assert _job(report, "adan, max_grad_norm")["refused"].startswith(
        "parameter 'input.weight' is sharded (FSDP2 DTensor) and trained by adan, which "
        "cannot step sharded parameters: its option max_grad_norm= takes one norm over "
        "all parameters."
    )


@pytest.mark.slow
@pytest.mark.distributed
def test_real_optimizers_on_shards_differ(report):
    """The comparison catches a wrong update: torch.optim.Muon stepping the DTensor
    shards itself (Newton-Schulz in bfloat16 on DTensors) ends far from the one-process
    run, as issue 14 measured (2e-1), while the gathered step matches."""
    job = _job(report, "muon-kimi+adamw")
    assert job["control_rel"] > 1e-2, job
    assert job["max_rel"] <= TOL


@pytest.mark.slow
@pytest.mark.distributed
def test_each_rank_its_own_data_sharded_is_ddp(report):
    """With a different half batch per rank (real data parallelism) the gradient differs
    from the one-process whole-batch gradient in its last bits (the summation order),
    and Muon's bfloat16 Newton-Schulz and Adam's normalisation of entries whose gradient
    is rounding noise (attention key biases) turn that into visible differences after 5
    steps; the sharded run is still the DDP run, where every rank steps whole matrices."""
    job = _job(report, "muon-kimi+adamw")
    assert job["split_fsdp_vs_ddp"] <= TOL, job
    assert job["split_ddp_vs_one"] > 1e-3  # data parallelism itself, not the sharding


@pytest.mark.slow
@pytest.mark.distributed
def test_init_classify_multipliers_and_check_on_sharded_model(report):
    api = report["api"]
    # init_ on the shards draws what one process draws (DTensor's own normal_ on a CPU
    # mesh repeats the same numbers on every rank)
    assert api["init_rel"] == 0.0
    assert api["roles_same"]
    assert api["roles"] == [
        "hidden_bias",
        "hidden_weight",
        "input_bias",
        "input_weight",
        "output_weight",
    ]
    # apply_multipliers on the sharded GPT: wte + wpe, attn/mlp c_proj x 4, lm_head
    assert api["hooked"] == {"input": 2, "hidden": 8, "output": 1}
    assert api["hooked_vs_builtin"] == 0.0
    # a sharded forward pass is a collective: check says it did not run it
    assert api["check_hooked"] == [
        "check did not run the sharded model (DTensor parameters: its forward pass is "
        "a collective every rank would have to join): check the unsharded model after "
        "apply_multipliers, or pass measure=False"
    ]


@pytest.mark.slow
@pytest.mark.distributed
def test_checkpoint_of_two_ranks_loads_in_one_process(report, worker, monkeypatch):
    """The DCP checkpoint written by 2 FSDP2 ranks at step 3 (each gathered matrix's
    state on its owner only), loaded by CheckpointState into an unsharded model and
    optimizer, continues to the one-process parameters at step 5.

    The ranks computed steps 0-2 with one thread each (fsdp_worker sets it), so this
    process does too: with two threads the matmul and reduction summation order
    differs in the last bits, and Adam's normalisation of entries whose gradient is
    rounding noise turns that into a 2e-1 difference after 5 steps (the one-process run
    alone, 1 vs 2 threads), which is not the checkpoint's doing. Muon's Newton-Schulz runs
    in float32, as the ranks ran it (fsdp_worker's use_float32_newton_schulz)."""
    import torch.optim._muon as muon
    from float32_muon import newton_schulz_float32

    monkeypatch.setattr(muon, "_zeropower_via_newtonschulz", newton_schulz_float32)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _continue_two_rank_checkpoint(report, worker)
    finally:
        torch.set_num_threads(threads)


def _continue_two_rank_checkpoint(report, worker):
    label = "muon-kimi+adamw"
    (hidden, others), shape = JOBS[label]
    job = {**shape, "config": str(_config_path(report["folder"], hidden, others))}
    cfg = _load(Path(job["config"]), "fsdp_cfg_one_process")
    data = worker.batches(job)

    ref = worker.make_model(cfg, job)
    ref_opt = cfg.build_optimizers(ref, job["width"], job["depth"], **worker.BASE)
    worker.train(ref, [ref_opt], data)

    model = worker.make_model(cfg, job, seed=1)
    opt = cfg.build_optimizers(model, job["width"], job["depth"], **worker.BASE)
    ckpt = report["folder"] / "ckpt" / str(list(JOBS).index(label))
    dcp.load({"train": cfg.CheckpointState(model, opt)}, checkpoint_id=str(ckpt), no_dist=True)
    assert opt.param_groups[0] is opt.parts["adamw"].param_groups[0]
    worker.train(model, [opt], data[worker.SAVE_AT :])
    assert worker.rel_diff(worker.full(model), worker.full(ref)) <= TOL


def test_tables_name_every_catalog_optimizer_once(tables):
    names = [*tables.ELEMENTWISE, *tables.WHOLE_MATRIX, *tables.NOT_SHARDABLE]
    assert len(names) == len(set(names))
    assert set(catalog()) <= set(names)
    # the documented table is today's
    doc = (Path(__file__).parents[2] / "docs" / "scale-out.md").read_text(encoding="utf-8")
    for how, names_of in (("elementwise", tables.ELEMENTWISE), ("refused", tables.NOT_SHARDABLE)):
        row = next(line for line in doc.splitlines() if line.startswith(f"| `{how}`"))
        assert set(re.findall(r"[a-z][a-z0-9-]+", row.split("|")[2])) >= names_of, how


def _tiny(cfg, seed=0):
    from spectral.models import GPT

    model = GPT(64, 2, block_size=8, multipliers=cfg)
    torch.manual_seed(seed)
    cfg.init_(model, 64, 2, 0.02)
    return model


def _steps(model, opt, total, start=0, sched=None):
    """Steps start..total-1 of one fixed stream of batches."""
    gen = torch.Generator().manual_seed(0)
    for i in range(total):
        x = torch.randint(0, 256, (4, 9), generator=gen)
        if i < start:
            continue
        logits = model(x[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), x[:, 1:].flatten())
        loss.backward()
        opt.step()
        opt.zero_grad()
        if sched is not None:
            sched.step()


def test_gathered_optimizer_on_plain_tensors_is_the_optimizer(tmp_path):
    """Without DTensors, GatheredOptimizer steps the parameters in place: the same
    numbers as the implementation, LR schedulers reach it, state_dict round-trips."""
    cfg = _load(_config_path(tmp_path, "muon-kimi", "adamw"), "fsdp_cfg_plain")
    models, opts, scheds = [], [], []
    for wrap in (False, True):
        model = _tiny(cfg)
        groups = [
            g for g in cfg.param_groups(model, 64, 2, lr=0.01) if g["optimizer"] == "muon-kimi"
        ]
        opt = (
            cfg.GatheredOptimizer(cfg.FACTORIES["muon-kimi"], groups)
            if wrap
            else cfg.FACTORIES["muon-kimi"](groups)
        )
        models.append(model)
        opts.append(opt)
        scheds.append(torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5))
    for model, opt, sched in zip(models, opts, scheds, strict=True):
        _steps(model, opt, 3, sched=sched)
    for (name, p), q in zip(models[0].named_parameters(), models[1].parameters(), strict=True):
        assert torch.equal(p, q), name
    plain, gathered = opts
    assert gathered.param_groups[0]["lr"] == plain.param_groups[0]["lr"] == 0.01 / 8
    assert gathered.inner.param_groups[0]["lr"] == 0.01 / 4  # the lr of step 3, copied in
    again = cfg.GatheredOptimizer(cfg.FACTORIES["muon-kimi"], gathered.param_groups)
    assert again.state == {}
    again.load_state_dict(gathered.state_dict())
    assert again.param_groups[0]["lr"] == 0.01 / 8
    momentum = [s["momentum_buffer"] for s in again.state.values()]
    want = [plain.state[p]["momentum_buffer"] for p in plain.param_groups[0]["params"]]
    assert len(momentum) == 8
    assert all(torch.equal(m, w) for m, w in zip(momentum, want, strict=True))


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_checkpoint_state_resumes_one_process(tmp_path):
    """CheckpointState without any process group: a Shampoo + AdamW run saved after step
    1 and loaded into a fresh model and optimizer continues bit for bit."""
    cfg = _load(_config_path(tmp_path, "shampoo", "adamw"), "fsdp_cfg_ckpt")
    ref = _tiny(cfg)
    _steps(ref, cfg.build_optimizers(ref, 64, 2, lr=0.01), 2)
    model = _tiny(cfg)
    opt = cfg.build_optimizers(model, 64, 2, lr=0.01)
    _steps(model, opt, 1)
    dcp.save({"train": cfg.CheckpointState(model, opt)}, checkpoint_id=str(tmp_path / "c"))
    fresh = _tiny(cfg, seed=3)
    fresh_opt = cfg.build_optimizers(fresh, 64, 2, lr=0.01)
    dcp.load({"train": cfg.CheckpointState(fresh, fresh_opt)}, checkpoint_id=str(tmp_path / "c"))
    _steps(fresh, fresh_opt, 2, start=1)
    for (name, p), q in zip(ref.named_parameters(), fresh.parameters(), strict=True):
        assert torch.equal(p, q), name
