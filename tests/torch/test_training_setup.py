"""The generated module inside the training setup people already use.

LR schedulers (LambdaLR, CosineAnnealingLR, OneCycleLR) drive the one CompositeOptimizer
that build_optimizers returns, each group keeping its role's lr ratio; a checkpoint
(model, optimizer, scheduler) resumes bit for bit; Hugging Face's Trainer takes the
optimizer and scheduler as they are; per-role base values (weight decay on hidden matrices
only, a zero readout, an lr per role) land where they are named and nowhere else; the
standard deviation init_ draws is the one hparams and `spectral transfer` print, for every
role; and an optimizer that keeps its eps inside a tuple (torch.optim.Adafactor) gets the
rule's eps in the declared place.

Norm gains are in the bias roles. hparams prints init_std 0 for every bias role, and init_
sets norm gains to 1 and every other bias-role parameter to 0: the printed std is the
spread around that starting value (0 for both), which is what these tests measure.
"""

from __future__ import annotations

import importlib.util
import io
import json
import math
import textwrap

import pytest

from spectral.cli import main
from spectral.codegen import load_generated, render, write
from spectral.engine.spec_file import load_spec

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from spectral.models import GPT, ResidualMLP  # noqa: E402

pytestmark = pytest.mark.generated  # also run on the --vendor form

BW, BD = 32, 1
"""Base size of every generated module here."""
W, D = 64, 2
"""Target size of the training runs (r_n = 2, r_L = 2: every rule is exercised)."""
FAMILIES = ["adamw", "muon-kimi+adamw"]
VOCAB, T = 64, 16


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """These models are tiny: one thread runs them several times faster than two threads
    spinning on a shared CPU, and a resumed run is compared bit for bit with a run on the
    same thread count."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def cfgs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("generated")
    return {
        "adamw": load_generated("adamw", None, 2, base_width=BW, base_depth=BD, folder=folder),
        "muon-kimi+adamw": load_generated(
            "muon-kimi", "adamw", 2, base_width=BW, base_depth=BD, folder=folder
        ),
    }


def _gpt(cfg, seed: int = 0, width: int = W, depth: int = D, **kw) -> GPT:
    torch.manual_seed(seed)
    model = GPT(
        width, depth, vocab_size=VOCAB, block_size=T, head_dim=32, multipliers=cfg, **kw
    )
    cfg.init_(model, width, depth)
    return model


def _batches(n: int, seed: int = 0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return list(torch.randint(0, VOCAB, (n, 4, T + 1), generator=g))


def _loss(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    logits = model(ids[:, :-1])
    return F.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))


def _step(model, opt, sched, ids) -> float:
    loss = _loss(model, ids)
    loss.backward()
    opt.step()
    sched.step()
    opt.zero_grad()
    return float(loss.detach())


# ------------------------------------------------------------------------------------
# LR schedulers
# ------------------------------------------------------------------------------------

SCHEDULERS = {
    "lambda": lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s)),
    "cosine": lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10),
    # OneCycleLR sets each group's lr from max_lr: one entry per group keeps the ratios
    "onecycle": lambda opt, **kw: torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=[g["lr"] for g in opt.param_groups], total_steps=10, **kw
    ),
}
SCHEDULER_CASES = [
    ("adamw", "lambda", {}),
    ("adamw", "cosine", {}),
    ("adamw", "onecycle", {}),  # cycles AdamW's beta1 too (cycle_momentum=True)
    ("muon-kimi+adamw", "lambda", {}),
    ("muon-kimi+adamw", "cosine", {}),
    ("muon-kimi+adamw", "onecycle", {"cycle_momentum": False}),
]


def _reference(name: str, steps: int, **kw) -> tuple[list[float], list[float]]:
    """The factor of the base lr, and AdamW's beta1, at each step: the same scheduler on a
    one-group torch.optim.AdamW with lr 1."""
    opt = torch.optim.AdamW([nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = SCHEDULERS[name](opt, **kw)
    factors, betas = [], []
    for _ in range(steps):
        factors.append(opt.param_groups[0]["lr"])
        betas.append(opt.param_groups[0]["betas"][0])
        opt.step()
        sched.step()
    return factors, betas


@pytest.mark.parametrize(
    "family,name,kw", SCHEDULER_CASES, ids=[f"{f}-{n}" for f, n, _ in SCHEDULER_CASES]
)
@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_schedulers_drive_every_part_and_keep_role_ratios(cfgs, family, name, kw):
    """Every part's groups (the dicts the real optimizers read at step time) follow the
    scheduler: group lr at step t = its own initial lr x the scheduler's factor, so the
    ratio between roles stays what the rules say."""
    cfg = cfgs[family]
    model = _gpt(cfg)
    opt = cfg.build_optimizers(model, W, D, lr=0.01, weight_decay=0.1)
    initial = [g["lr"] for g in opt.param_groups]
    assert len(set(initial)) > 1 or family == "adamw"  # the hybrid has different lrs
    sched = SCHEDULERS[name](opt, **kw)
    factors, betas = _reference(name, 10, **kw)
    assert factors[0] != factors[5]  # the schedule moves
    used = {kind: [] for kind in opt.parts}
    for t, ids in enumerate(_batches(10)):
        for kind, part in opt.parts.items():
            used[kind].append([(g["role"], g["lr"], dict(g)) for g in part.param_groups])
        assert [g["lr"] for g in opt.param_groups] == pytest.approx(
            [lr * factors[t] for lr in initial], rel=1e-12, abs=0
        )
        _step(model, opt, sched, ids)
    # what each real optimizer saw at each step, role by role
    want = {g["role"]: lr for g, lr in zip(opt.param_groups, initial, strict=True)}
    for kind, steps in used.items():
        assert {role for role, _, _ in steps[0]} <= set(want)
        for t, groups in enumerate(steps):
            for role, lr, group in groups:
                assert lr == pytest.approx(want[role] * factors[t], rel=1e-12, abs=0)
                if kind == "adamw" and name == "onecycle" and kw.get("cycle_momentum", True):
                    assert group["betas"][0] == pytest.approx(betas[t], rel=1e-12)
    if name == "onecycle" and family == "adamw":
        assert min(betas) < max(betas)  # beta1 really cycled


def test_onecycle_with_a_hybrid_needs_cycle_momentum_false(cfgs):
    """The parts name their momentum differently (Muon: momentum, AdamW: betas), so the
    hybrid has no common default to cycle; torch says so, as the docstring warns."""
    cfg = cfgs["muon-kimi+adamw"]
    opt = cfg.build_optimizers(_gpt(cfg), W, D, lr=0.01)
    assert "cycle_momentum=False" in type(opt).__doc__
    with pytest.raises(ValueError, match="momentum"):
        SCHEDULERS["onecycle"](opt)


# ------------------------------------------------------------------------------------
# checkpoints
# ------------------------------------------------------------------------------------


def _build(cfg, seed: int):
    model = _gpt(cfg, seed=seed)
    opt = cfg.build_optimizers(model, W, D, lr=0.01, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
    return model, opt, sched


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_checkpoint_at_step_5_resumes_bit_identically(cfgs, family):
    cfg = cfgs[family]
    batches = _batches(10)
    model, opt, sched = _build(cfg, seed=0)
    for ids in batches:
        _step(model, opt, sched, ids)
    uninterrupted = {n: p.detach().clone() for n, p in model.named_parameters()}

    model, opt, sched = _build(cfg, seed=0)
    for ids in batches[:5]:
        _step(model, opt, sched, ids)
    buf = io.BytesIO()
    torch.save(
        {"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict()},
        buf,
    )
    del model, opt, sched
    buf.seek(0)
    saved = torch.load(buf, weights_only=True)
    # a fresh run built the same way (another seed: loading must overwrite everything)
    model, opt, sched = _build(cfg, seed=1)
    model.load_state_dict(saved["model"])
    opt.load_state_dict(saved["opt"])
    sched.load_state_dict(saved["sched"])
    assert len(opt.state) == sum(1 for _ in model.parameters())  # the parts' state is back
    for ids in batches[5:]:
        _step(model, opt, sched, ids)
    for n, p in model.named_parameters():
        assert torch.equal(p, uninterrupted[n]), n
    assert sched.last_epoch == 10


# ------------------------------------------------------------------------------------
# Hugging Face Trainer
# ------------------------------------------------------------------------------------


def _llama(width: int = 64, depth: int = 2, seed: int = 0):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=width,
        intermediate_size=2 * width,
        num_hidden_layers=depth,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=32,
        tie_word_embeddings=False,
    )
    return transformers.LlamaForCausalLM(config)


@pytest.mark.slow  # trains with HF Trainer
def test_hf_trainer_takes_the_optimizer_and_scheduler(cfgs, tmp_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    cfg = cfgs["muon-kimi+adamw"]
    width, depth = 64, 2
    model = _llama(width, depth)
    cfg.apply_multipliers(model, width, depth)
    cfg.init_(model, width, depth)
    opt = cfg.build_optimizers(model, width, depth, lr=0.01, weight_decay=0.1)
    initial = [g["lr"] for g in opt.param_groups]
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=6)
    data = [{"input_ids": ids, "labels": ids} for ids in _batches(8)[0].reshape(-1, T + 1)[:8]]
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=3,
        per_device_train_batch_size=2,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        logging_strategy="no",
    )
    trainer = transformers.Trainer(
        model=model, args=args, train_dataset=data, optimizers=(opt, sched)
    )
    out = trainer.train()
    assert out.global_step == 3 and math.isfinite(out.training_loss)
    assert out.training_loss < math.log(VOCAB) + 1.0
    unchanged = [n for n, p in model.named_parameters() if torch.equal(p, before[n])]
    assert unchanged == []  # every parameter, norm gains included, was trained
    # Trainer stepped our scheduler, so our groups hold the cosine value after 3 of 6 steps
    assert sched.last_epoch == 3
    assert [g["lr"] for g in opt.param_groups] == pytest.approx(
        [lr * 0.5 for lr in initial], rel=1e-12
    )
    assert cfg.check(model, width, depth, opt) == []


# ------------------------------------------------------------------------------------
# per-role base values: weight decay, init, lr
# ------------------------------------------------------------------------------------


def _is_bias_or_gain(name: str, owner: nn.Module) -> bool:
    norm = isinstance(owner, (nn.LayerNorm, nn.RMSNorm)) or type(owner).__name__.endswith(
        "Norm"
    )
    return name.endswith("bias") or norm


def _owners(model: nn.Module) -> dict[int, tuple[str, nn.Module]]:
    out = {}
    for mod_name, module in model.named_modules():
        for p_name, p in module.named_parameters(recurse=False):
            out[id(p)] = (f"{mod_name}.{p_name}".lstrip("."), module)
    return out


def test_weight_decay_on_hidden_matrices_only(cfgs):
    cfg = cfgs["muon-kimi+adamw"]
    hp = cfg.hparams(512, 8, lr=0.01, weight_decay={"hidden_weight": 0.1})
    r_n, r_L = 512 / BW, 8 / BD
    a, b = cfg.RULES["hidden_weight"]["weight_decay"]
    assert hp["hidden_weight"]["weight_decay"] == pytest.approx(0.1 * r_n**a * r_L**b, rel=1e-12)
    assert hp["hidden_weight"]["weight_decay"] != 0.1  # the rule did scale it
    assert {r: h["weight_decay"] for r, h in hp.items() if r != "hidden_weight"} == {
        "input_weight": 0.0,
        "output_weight": 0.0,
        "router_weight": 0.0,  # a block matrix, but not named: no decay
        "input_bias": 0.0,
        "hidden_bias": 0.0,
    }


@pytest.mark.parametrize("model_name", ["gpt", "llama"])
@pytest.mark.parametrize("family", FAMILIES)
def test_biases_and_norm_gains_are_not_decayed_by_default(cfgs, family, model_name):
    """build_optimizers(..., weight_decay=0.1): every group holding a bias or a norm gain
    has weight decay 0; every other group has the rule's positive value."""
    cfg = cfgs[family]
    if model_name == "gpt":
        model = _gpt(cfg)
    else:
        model = _llama()
        cfg.apply_multipliers(model, 64, 2)
    opt = cfg.build_optimizers(model, 64, 2, lr=0.01, weight_decay=0.1)
    owners = _owners(model)
    seen_bias = seen_gain = 0
    for group in opt.param_groups:
        kinds = {_is_bias_or_gain(*owners[id(p)]) for p in group["params"]}
        assert len(kinds) == 1, group["role"]  # a group never mixes the two
        if kinds == {True}:
            assert group["weight_decay"] == 0.0, group["role"]
            seen_bias += any(owners[id(p)][0].endswith("bias") for p in group["params"])
            seen_gain += any(not owners[id(p)][0].endswith("bias") for p in group["params"])
        else:
            assert group["weight_decay"] > 0.0, group["role"]
    assert seen_gain and (seen_bias or model_name == "llama")  # Llama has no biases


def test_adamw_leaves_biases_and_gains_alone_on_a_zero_gradient(cfgs):
    """What the groups say is what AdamW does: with zero gradients only the decayed
    weights move (by lr x weight decay), biases stay 0 and norm gains 1."""
    cfg = cfgs["adamw"]
    model = _gpt(cfg)
    opt = cfg.build_optimizers(model, W, D, lr=0.01, weight_decay=0.1)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    owners = _owners(model)
    for group in opt.param_groups:
        for p in group["params"]:
            name, owner = owners[id(p)]
            if _is_bias_or_gain(name, owner):
                assert torch.equal(p, before[name]), name
            else:
                shrink = 1 - group["lr"] * group["weight_decay"]
                assert torch.allclose(p, before[name] * shrink, rtol=1e-6, atol=0), name


def test_init_leaves_biases_at_zero_and_gains_at_one(cfgs):
    cfg = cfgs["muon-kimi+adamw"]
    torch.manual_seed(0)
    model = GPT(W, D, vocab_size=VOCAB, block_size=T, head_dim=32, multipliers=cfg)
    mlp = ResidualMLP(32, 8, W, D, multipliers=cfg)  # nn.Linear draws its biases
    for m in (model, mlp):
        with torch.no_grad():
            for p in m.parameters():
                p.uniform_(0.5, 1.5)  # nothing starts where init_ puts it
        cfg.init_(m, W, D, init_std=0.02)  # the draw; with none it keeps these values
        owners = _owners(m)
        biases = gains = 0
        for p in m.parameters():
            name, owner = owners[id(p)]
            if name.endswith("bias"):
                assert torch.count_nonzero(p) == 0, name
                biases += 1
            elif _is_bias_or_gain(name, owner):
                assert torch.equal(p, torch.ones_like(p)), name
                gains += 1
            else:
                assert p.abs().max() < 0.5, name  # redrawn around 0
        assert biases > 0 and (gains > 0 or m is mlp)


def test_zero_readout_and_per_role_lr(cfgs):
    cfg = cfgs["muon-kimi+adamw"]
    model = GPT(W, D, vocab_size=VOCAB, block_size=T, head_dim=32, multipliers=cfg)
    cfg.init_(model, W, D, init_std={"default": 0.02, "output_weight": 0.0})
    assert torch.count_nonzero(model.lm_head.weight) == 0
    assert model.transformer.wte.weight.std() > 0.01
    logits = model(_batches(1)[0][:, :-1])
    assert torch.count_nonzero(logits) == 0  # the readout is exactly zero

    lr = {"default": 3e-4, "hidden_weight": 0.02, "output_weight": 1e-3}
    opt = cfg.build_optimizers(model, W, D, lr=lr)
    hp = cfg.hparams(W, D, lr=lr)
    hp1 = cfg.hparams(W, D, lr=1.0)
    assert {g["role"] for g in opt.param_groups} == set(hp) - {"router_weight"}  # no router here
    for group in opt.param_groups:
        role = group["role"]
        assert group["lr"] == hp[role]["lr"]
        base = lr.get(role, lr["default"])
        assert group["lr"] == pytest.approx(base * hp1[role]["lr"], rel=1e-12)
    assert cfg.check(model, W, D, opt) == []


# ------------------------------------------------------------------------------------
# measured init std = printed init std, every role
# ------------------------------------------------------------------------------------

MEASURE_W, MEASURE_D = 256, 4
"""Large enough for a 5% estimate: the smallest weight here has 64 x 256 entries."""


def _printed(cfg, family: str, d_in: int | None, capsys) -> dict[str, dict[str, float]]:
    """`spectral transfer --format json` for this size, checked equal to cfg.hparams."""
    hidden, _, others = family.partition("+")
    args = ["transfer", hidden, *(["--others", others] if others else [])]
    args += ["--base-width", str(BW), "--base-depth", str(BD)]
    args += ["--width", str(MEASURE_W), "--depth", str(MEASURE_D)]
    args += ["--lr", "0.01", "--init-std", "0.02", "--format", "json"]
    args += ["--d-in", str(d_in)] if d_in else []
    capsys.readouterr()
    assert main(args) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == cfg.hparams(MEASURE_W, MEASURE_D, lr=0.01, init_std=0.02, d_in=d_in)
    return printed


def measured_stds(cfg, model: nn.Module, adapter: str) -> dict[str, list[tuple[str, float]]]:
    """Role -> (parameter, RMS deviation from its starting centre): 1 for norm gains, 0
    for everything else (init_ draws N(0, std^2) around 0)."""
    out: dict[str, list[tuple[str, float]]] = {}
    owners = _owners(model)
    for p in model.parameters():
        name, owner = owners[id(p)]
        gain = _is_bias_or_gain(name, owner) and not name.endswith("bias")
        centre = 1.0 if gain else 0.0
        rms = float((p.detach().double() - centre).pow(2).mean().sqrt())
        out.setdefault(cfg.classify(name, p, adapter=adapter), []).append((name, rms))
    return out


@pytest.mark.parametrize("model_name", ["mlp", "gpt"])
@pytest.mark.parametrize("family", FAMILIES)
def test_init_std_measured_equals_printed_for_every_role(cfgs, family, model_name, capsys):
    cfg = cfgs[family]
    torch.manual_seed(0)
    if model_name == "mlp":  # dense input: d_in = 32 gives the input layer's std
        model = ResidualMLP(32, 64, MEASURE_W, MEASURE_D, multipliers=cfg)
        d_in, adapter = 32, "residual-mlp"
    else:  # embeddings: no d_in
        model = GPT(MEASURE_W, MEASURE_D, vocab_size=256, block_size=64, multipliers=cfg)
        d_in, adapter = None, "gpt2"
    cfg.init_(model, MEASURE_W, MEASURE_D, init_std=0.02)
    printed = _printed(cfg, family, d_in, capsys)
    measured = measured_stds(cfg, model, adapter)
    # every role of both models (neither has a router, which the config also covers)
    assert set(measured) == set(printed) - {"router_weight"}
    for role, params in measured.items():
        want = printed[role]["init_std"]
        for name, got in params:
            if role.endswith("_bias"):
                assert want == 0.0 and got == 0.0, name
            else:
                assert got == pytest.approx(want, rel=0.05), name
    if model_name == "mlp":  # the dense input layer really is sigma / sqrt(32)
        embedding_like = cfg.hparams(MEASURE_W, MEASURE_D, lr=0.01)["input_weight"]["init_std"]
        assert printed["input_weight"]["init_std"] == pytest.approx(
            embedding_like / math.sqrt(32), rel=1e-12
        )


# ------------------------------------------------------------------------------------
# eps inside a tuple: torch.optim.Adafactor from a spec file
# ------------------------------------------------------------------------------------

ADAFACTOR_TOML = """\
# torch.optim.Adafactor: U = G / sqrt(V), V a factored second moment, entrywise O(1) like
# Adam's sign step, so ||U||_R = n_in. eps1 clamps V at eps1^2, the squared size of a
# gradient entry: the same scale as Adam's eps. torch keeps (eps1, eps2) in one tuple;
# eps2 bounds the parameter RMS by which torch also scales the step (a relative step
# size this declaration does not model).
name = "adafactor"
update_norm = "n_in"
eps = "G / sqrt(n_in * n_out)"
eps_key = "eps"
eps_index = 0
summary = "factored second moment (torch.optim.Adafactor)"
"""


def test_adafactor_eps_goes_into_its_tuple(tmp_path):
    if not hasattr(torch.optim, "Adafactor"):
        pytest.skip("torch.optim.Adafactor needs torch >= 2.5")
    path = tmp_path / "adafactor.toml"
    path.write_text(ADAFACTOR_TOML)
    spec = load_spec(path)
    source = render(spec, base_width=BW, base_depth=BD)
    target = write(tmp_path / "cfg_adafactor.py", source)
    module_spec = importlib.util.spec_from_file_location("cfg_adafactor", target)
    cfg = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(cfg)
    assert cfg.EPS_PLACES == {"adafactor": ("eps", 0)}

    model = _gpt(cfg)
    base = {"lr": 0.01, "weight_decay": 0.1, "eps": 1e-10}
    opt = cfg.build_optimizers(
        model,
        64,
        2,
        factories={"adafactor": lambda g, **kw: torch.optim.Adafactor(g, **kw)},
        **base,
    )
    assert isinstance(opt.parts["adafactor"], torch.optim.Adafactor)
    torch_default = torch.optim.Adafactor([nn.Parameter(torch.zeros(1))]).defaults["eps"][1]
    hp = cfg.hparams(W, D, **base)
    assert len({g["eps"][0] for g in opt.param_groups}) > 1  # the rule differs by role
    for group in opt.param_groups:
        assert isinstance(group["eps"], tuple) and len(group["eps"]) == 2
        assert group["eps"][0] == hp[group["role"]]["eps"]
        assert group["eps"][1] == torch_default
    assert cfg.check(model, W, D, opt) == []

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    losses = [_step(model, opt, sched, ids) for ids in _batches(5)]
    assert all(math.isfinite(x) for x in losses)
    assert [n for n, p in model.named_parameters() if torch.equal(p, before[n])] == []
    assert all(s["step"] == 5 for s in opt.state.values())
    for group in opt.param_groups:  # training left the placed eps alone
        assert group["eps"] == (hp[group["role"]]["eps"], torch_default)


# ------------------------------------------------------------------------------------
# the module's own example
# ------------------------------------------------------------------------------------


def test_module_docstring_example_runs(cfgs):
    """The usage block at the top of every generated module runs as written, with its
    `...` filled in by a forward pass (on HF Llama, a model whose source is unchanged)."""
    cfg = cfgs["muon-kimi+adamw"]
    doc = cfg.__doc__
    start = doc.index("    model = MyModel(width, depth)")
    end = doc.index("opt.zero_grad()", start) + len("opt.zero_grad()")
    example = textwrap.dedent(doc[start:end])
    assert "\n...\n" in example
    ids = _batches(1)[0]
    example = example.replace("\n...\n", "\nloss = model(input_ids=ids, labels=ids).loss\n")
    namespace = dict(vars(cfg))
    namespace.update(
        torch=torch,  # the user's own import
        MyModel=lambda width, depth: _llama(width, depth),
        width=W,
        depth=D,
        steps=10,
        ids=ids,
    )
    exec(compile(example, "docstring example", "exec"), namespace)
    opt, sched, model = namespace["opt"], namespace["sched"], namespace["model"]
    assert isinstance(opt, torch.optim.Optimizer) and sched.last_epoch == 1
    assert math.isfinite(float(namespace["loss"]))
    assert all(s for s in opt.state.values())  # every part stepped
    assert cfg.check(model, W, D, opt) == []
