"""The config inside training stacks: framework wrappers (accelerate, Lightning automatic
and manual optimization, Fabric), named param groups in Lightning's LearningRateMonitor,
schedulers with an absolute floor, a torch.compile'd model older than its hooks, a tensor
lr, and litgpt's GPT (on a stand-in with its names: tests/litgpt_standin.py)."""

from __future__ import annotations

import math
import pickle
import warnings

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
L = pytest.importorskip("lightning")
accelerate = pytest.importorskip("accelerate")

import litgpt_standin  # noqa: E402
from test_runtime_guards import _hf  # noqa: E402
from lightning.pytorch.callbacks import LearningRateMonitor  # noqa: E402
from lightning.pytorch.loggers.logger import Logger  # noqa: E402

from spectral.codegen import load_generated  # noqa: E402
from spectral.torch import ADAPTERS, CompositeOptimizer, unwrap_optimizer  # noqa: E402

transformers.logging.set_verbosity_error()
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")

WIDTH, DEPTH, VOCAB = 128, 2, 128  # base 64 x 2: alpha_out = 1/2 here


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    folder = tmp_path_factory.mktemp("stacks")
    return load_generated("muon-kimi", "adamw", base_width=64, base_depth=2, folder=folder)


@pytest.fixture(scope="module")
def adamw(tmp_path_factory):
    folder = tmp_path_factory.mktemp("stacks_adamw")
    return load_generated("adamw", base_width=64, base_depth=2, folder=folder)


def _llama():
    torch.manual_seed(0)
    return _hf("llama", WIDTH, DEPTH)


def _ready(cfg, model=None, **base):
    model = _llama() if model is None else model
    cfg.apply_multipliers(model, WIDTH, DEPTH)
    cfg.init_(model, WIDTH, DEPTH, init_std=0.02)
    return model, cfg.build_optimizers(model, WIDTH, DEPTH, **{"lr": 1e-2, **base})


def _ids(batch=4, length=16, seed=1):
    return torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


def _flatten(opt, lr=6e-4):
    for group in opt.param_groups:  # nanoGPT's train.py: one lr into every group
        group["lr"] = lr


def _flattened_step_raises(wrapped, model, backward):
    """One lr written into every group through the wrapper, then a step: lr_guard="raise"."""
    _flatten(wrapped)
    ids = _ids()
    backward(model(ids, labels=ids).loss)
    with pytest.raises(ValueError, match="rule's ratios"):
        wrapped.step()


def _factors(opt):
    return [group["lr"] / group["rule_lr"] for group in opt.param_groups]


# ---------------------------------------------------------------------------------------
# wrappers
# ---------------------------------------------------------------------------------------


def test_accelerate_prepare(cfg):
    model, opt = _ready(cfg)
    accelerator = accelerate.Accelerator(cpu=True)
    model, wrapped = accelerator.prepare(model, opt)
    assert type(wrapped).__name__ == "AcceleratedOptimizer"
    assert unwrap_optimizer(wrapped) is opt
    assert cfg.check(model, WIDTH, DEPTH, wrapped) == []
    unwrap_optimizer(wrapped).set_lr_factor(0.5)
    assert _factors(wrapped) == pytest.approx([0.5] * len(opt.param_groups))
    wrapped.load_state_dict(wrapped.state_dict())  # the composite's own state, both ways
    assert cfg.check(model, WIDTH, DEPTH, wrapped) == []

    wrapped.lr_guard = "raise"  # stored on accelerate's wrapper, honoured by the step
    assert opt.lr_guard == "warn"
    _flattened_step_raises(wrapped, model, accelerator.backward)


def test_fabric_setup(cfg):
    fabric = L.Fabric(accelerator="cpu", devices=1)
    model = fabric.setup_module(_llama())
    # every parameter twice (_forward_module., _original_module.): one model, not a tie
    assert len(list(model.named_parameters(remove_duplicate=False))) == 2 * len(
        list(model.parameters())
    )
    model, opt = _ready(cfg, model)
    wrapped = fabric.setup_optimizers(opt)
    assert unwrap_optimizer(wrapped) is opt
    assert cfg.check(model, WIDTH, DEPTH, wrapped) == []
    assert sorted(wrapped.parts) == ["adamw", "muon-kimi"]
    wrapped.set_lr_factor(0.25)
    assert _factors(opt) == pytest.approx([0.25] * len(opt.param_groups))

    wrapped.lr_guard = "raise"  # Fabric's wrapper subclasses the composite: reaches it
    assert opt.lr_guard == "raise"
    _flattened_step_raises(wrapped, model, fabric.backward)


class _Keys(Logger):
    """A logger that keeps the names of what was logged."""

    def __init__(self):
        super().__init__()
        self.keys: set[str] = set()

    @property
    def name(self):
        return "keys"

    @property
    def version(self):
        return 0

    def log_metrics(self, metrics, step=None):
        self.keys |= set(metrics)

    def log_hyperparams(self, params, *args, **kwargs):
        pass


class _Lit(L.LightningModule):
    def __init__(self, cfg, *, manual=False, flatten=False):
        super().__init__()
        self.cfg, self.flatten = cfg, flatten
        self.automatic_optimization = not manual
        self.model = _llama()
        cfg.apply_multipliers(self.model, WIDTH, DEPTH)
        cfg.init_(self.model, WIDTH, DEPTH, init_std=0.02)
        self.problems: list[list[str]] = []
        self.factors: list[list[float]] = []

    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        self.problems.append(self.cfg.check(self.model, WIDTH, DEPTH, opt, measure=False))
        opt.lr_guard = "raise"
        if not self.automatic_optimization:
            opt.set_lr_factor(0.5)
        if self.flatten:
            _flatten(opt)
        loss = self.model(batch, labels=batch).loss
        if self.automatic_optimization:
            return loss
        opt.zero_grad()
        self.manual_backward(loss)
        opt.step()
        self.factors.append(_factors(opt))
        return None

    def configure_optimizers(self):
        opt = self.cfg.build_optimizers(self.model, WIDTH, DEPTH, lr=1e-2)
        if not self.automatic_optimization:
            return opt
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


def _fit(module, **kwargs):
    trainer = L.Trainer(
        max_steps=2,
        accelerator="cpu",
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        **{"logger": False, **kwargs},
    )
    trainer.fit(module, torch.utils.data.DataLoader(_ids(8), batch_size=4))
    return trainer


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_lightning_automatic_and_learning_rate_monitor(cfg):
    module, logger = _Lit(cfg), _Keys()
    trainer = _fit(module, logger=logger, callbacks=[LearningRateMonitor()], log_every_n_steps=1)
    assert module.problems == [[], []]  # check() on LightningOptimizer, before each step
    assert isinstance(trainer.optimizers[0], CompositeOptimizer)
    assert {k for k in logger.keys if k.startswith("lr-")} == {
        "lr-CompositeOptimizer/input_weight/adamw",
        "lr-CompositeOptimizer/hidden_bias/adamw",
        "lr-CompositeOptimizer/input_bias/adamw",
        "lr-CompositeOptimizer/output_weight/adamw",
        "lr-CompositeOptimizer/hidden_weight/muon-kimi",
    }


def test_lightning_automatic_lr_guard_raises(cfg):
    with pytest.raises(ValueError, match="rule's ratios"):
        _fit(_Lit(cfg, flatten=True))


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_lightning_manual(cfg):
    module = _Lit(cfg, manual=True)
    _fit(module)
    assert module.problems == [[], []]
    n = len(module.factors[0])
    assert module.factors == [pytest.approx([0.5] * n)] * 2  # set_lr_factor on the wrapper
    with pytest.raises(ValueError, match="rule's ratios"):
        _fit(_Lit(cfg, manual=True, flatten=True))


def test_lr_guard_pickled_before_it_was_a_property(cfg):
    _, opt = _ready(cfg)
    state = opt.__getstate__()
    state["lr_guard"] = state.pop("_lr_guard")  # what an older pickle holds
    state["lr_guard"] = "off"
    restored = CompositeOptimizer.__new__(CompositeOptimizer)
    restored.__setstate__(state)
    assert restored.lr_guard == "off"
    assert pickle.loads(pickle.dumps(opt)).lr_guard == "warn"


# ---------------------------------------------------------------------------------------
# named groups, schedulers
# ---------------------------------------------------------------------------------------


def test_every_group_is_named_role_slash_optimizer(cfg):
    _, opt = _ready(cfg)
    assert [(g["name"], g["role"], g["optimizer"]) for g in opt.param_groups] == [
        (f"{g['role']}/{g['optimizer']}", g["role"], g["optimizer"]) for g in opt.param_groups
    ]
    assert "hidden_weight/muon-kimi" in {g["name"] for g in opt.param_groups}


def test_a_role_with_several_groups_gets_distinct_names(tmp_path):
    # torch's Muon scales each matrix's lr by its shape: one group per aspect ratio
    cfg = load_generated("muon", "adamw", base_width=64, base_depth=2, folder=tmp_path)
    _, opt = _ready(cfg)
    names = [g["name"] for g in opt.param_groups]
    assert len(set(names)) == len(names)
    hidden = sorted(n for n in names if n.startswith("hidden_weight/"))
    assert hidden == ["hidden_weight/muon", "hidden_weight/muon/lr-x0.7071"]


@pytest.mark.parametrize(
    "floored",
    [
        lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=4, eta_min=1e-4),
        lambda o: torch.optim.lr_scheduler.ReduceLROnPlateau(o, factor=0.01, patience=0, min_lr=1e-4),
    ],
    ids=["cosine-eta-min", "plateau-min-lr"],
)
def test_check_reports_an_absolute_floor(cfg, floored):
    model, opt = _ready(cfg)
    sched = floored(opt)
    assert cfg.check(model, WIDTH, DEPTH, opt, measure=False) == []
    for _ in range(4):
        opt.step()
        sched.step(*([1.0] if isinstance(sched, torch.optim.lr_scheduler.ReduceLROnPlateau) else []))
    assert {g["lr"] for g in opt.param_groups} == {1e-4}  # every group at the floor
    problems = cfg.check(model, WIDTH, DEPTH, opt, measure=False)
    assert len(problems) == 1
    # the first group at 1e-4 / 1e-2 of its rule, the hidden matrices at sqrt(2) x that
    assert "input_weight/adamw is at 0.01 x" in problems[0]
    assert "hidden_weight/muon-kimi at 0.0141421 x" in problems[0]
    assert "LambdaLR" in problems[0] and "per group" not in problems[0]


def test_a_floor_as_a_fraction_keeps_the_ratios(cfg):
    model, opt = _ready(cfg)
    floor, steps = 0.1, 4
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps))
    )
    for _ in range(steps):
        opt.step()
        sched.step()
    assert _factors(opt) == pytest.approx([floor] * len(opt.param_groups))
    assert cfg.check(model, WIDTH, DEPTH, opt, measure=False) == []


# ---------------------------------------------------------------------------------------
# torch.compile, tensor lr
# ---------------------------------------------------------------------------------------


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_stale_compiled_model_is_caught_and_reset_fixes_it(cfg):
    model = _litgpt()
    compiled = torch.compile(model, backend="eager")  # dynamo's cache, whatever the backend
    ids = _ids(4, 32)  # another shape than check's probe (2 x 8), which compiles afresh

    def loss(m):
        return torch.nn.functional.cross_entropy(m(ids).flatten(0, 1), ids.flatten())

    loss(compiled).backward()  # a warm-up step, compiled without the hooks
    with pytest.warns(RuntimeWarning, match=r"torch\.compiler\.reset\(\)"):
        cfg.apply_multipliers(model, WIDTH, DEPTH)
    cfg.init_(model, WIDTH, DEPTH, init_std=0.02)
    alpha_out = cfg.multipliers(WIDTH, DEPTH)["output"]
    assert alpha_out == 0.5
    # the compiled model runs without the multipliers: its logits are 1/alpha_out x eager's
    torch.testing.assert_close(compiled(ids) * alpha_out, model(ids), rtol=1e-4, atol=1e-6)
    problems = cfg.check(compiled, WIDTH, DEPTH)
    assert len(problems) == 1 and "torch.compiler.reset()" in problems[0]

    torch.compiler.reset()  # the fix the message names
    assert cfg.check(compiled, WIDTH, DEPTH) == []
    torch.testing.assert_close(loss(compiled), loss(model))


@pytest.mark.slow  # torch.compile: seconds on the 2-core CPU
def test_hooks_before_compile_give_no_warning(cfg):
    model = _litgpt()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        cfg.apply_multipliers(model, WIDTH, DEPTH)
    cfg.init_(model, WIDTH, DEPTH)
    compiled = torch.compile(model, backend="eager")
    ids = _ids(2, 8)
    torch.testing.assert_close(compiled(ids), model(ids))
    assert cfg.check(compiled, WIDTH, DEPTH) == []


def test_tensor_lr(adamw):
    model, opt = _ready(adamw, lr=torch.tensor(1e-2))
    want = adamw.param_groups(model, WIDTH, DEPTH, lr=1e-2)
    assert all(isinstance(g["lr"], torch.Tensor) for g in opt.param_groups)
    assert [float(g["lr"]) for g in opt.param_groups] == pytest.approx([g["lr"] for g in want])
    assert adamw.check(model, WIDTH, DEPTH, opt) == []
    held = [g["lr"] for g in opt.param_groups]
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
    ids = _ids()
    model(ids, labels=ids).loss.backward()
    opt.step()
    sched.step()
    opt.set_lr_factor(0.5)
    assert all(g["lr"] is t for g, t in zip(opt.param_groups, held, strict=True))  # in place
    assert _factors(opt) == pytest.approx([0.5] * len(held))
    with pytest.raises(TypeError, match="one floating-point number"):
        adamw.build_optimizers(model, WIDTH, DEPTH, lr=torch.tensor([1e-2, 1e-3]))


# ---------------------------------------------------------------------------------------
# litgpt (stand-in with its names)
# ---------------------------------------------------------------------------------------

LITGPT = next(a for a in ADAPTERS if a.name == "litgpt")


def _litgpt(width=WIDTH, **kw):
    torch.manual_seed(0)
    config = litgpt_standin.Config(
        n_embd=width, n_layer=DEPTH, n_head=width // 16, vocab_size=VOCAB, **kw
    )
    return litgpt_standin.GPT(config)


@pytest.mark.parametrize("parallel", [False, True])
def test_litgpt_scale_embeddings_is_divided_out(cfg, parallel):
    h0 = {}
    for scale in (False, True):
        model = _litgpt(scale_embeddings=scale, parallel_residual=parallel)
        handle = cfg.apply_multipliers(model, WIDTH, DEPTH)
        assert handle.modules["hidden"][:2] == [
            "transformer.h.0.post_attention_norm",
            "transformer.h.0.post_mlp_norm",
        ]
        cfg.init_(model, WIDTH, DEPTH, init_std=0.02)
        opt = cfg.build_optimizers(model, WIDTH, DEPTH, lr=1e-2)
        assert cfg.check(model, WIDTH, DEPTH, opt) == []
        seen: list = []
        model.transformer.h[0].register_forward_pre_hook(lambda m, a, seen=seen: seen.append(a[0]))
        model(_ids(2, 8))
        h0[scale] = seen[0]
    torch.testing.assert_close(h0[True], h0[False])  # h_0 = alpha_in x the row, no sqrt(n)


def test_litgpt_without_the_division_is_caught(cfg):
    model = _litgpt(scale_embeddings=True)
    plain = LITGPT._replace(input_scale_sqrt=())
    cfg.apply_multipliers(model, WIDTH, DEPTH, adapter=plain)
    cfg.init_(model, WIDTH, DEPTH, adapter=plain)
    problems = cfg.check(model, WIDTH, DEPTH, adapter=plain)
    assert len(problems) == 1 and f"{math.sqrt(WIDTH):.4g} x" in problems[0]


# litgpt's Gemma-2 configs: tanh(x / c) * c on the logits (c = 30) and the scores (c = 50)
CAPS = {"final_logit_softcapping": 30.0, "attention_logit_softcapping": 50.0}


def test_litgpt_stand_in_caps_as_litgpt_does():
    ids = _ids(2, 8)
    plain = _litgpt()(ids)
    capped = _litgpt(final_logit_softcapping=0.1)(ids)  # same seed, same weights
    torch.testing.assert_close(capped, torch.tanh(plain / 0.1) * 0.1)
    assert capped.abs().max() <= 0.1 < plain.abs().max()  # tanh saturates at 1 in float32
    loose = _litgpt(attention_logit_softcapping=1e6)(ids)  # the eager scores path
    torch.testing.assert_close(loose, plain, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(_litgpt(attention_logit_softcapping=0.01)(ids), plain)


def test_litgpt_soft_capping_is_accepted(cfg):
    """As Hugging Face Gemma2's: alpha_out on lm_head, before the cap; every parameter has
    its role, and check() finds nothing (its forward checks run on the capped model)."""
    model = _litgpt(**CAPS)
    handle = cfg.apply_multipliers(model, WIDTH, DEPTH)
    assert handle.modules["output"] == ["lm_head"]
    cfg.init_(model, WIDTH, DEPTH, init_std=0.02)
    names = {id(p): n for n, p in model.named_parameters()}
    roles = {
        names[id(p)]: g["role"]
        for g in cfg.param_groups(model, WIDTH, DEPTH, lr=1e-2)
        for p in g["params"]
    }
    assert set(roles) == set(names.values())
    assert roles["lm_head.weight"] == "output_weight"
    assert roles["transformer.wte.weight"] == "input_weight"
    assert roles["transformer.h.0.attn.qkv.weight"] == "hidden_weight"
    opt = cfg.build_optimizers(model, WIDTH, DEPTH, lr=1e-2)
    assert cfg.check(model, WIDTH, DEPTH, opt) == []


@pytest.mark.slow
def test_litgpt_capped_logits_slopes_match_uncapped(cfg):
    """The check across widths (64/128/256, one step) passes the capped model, and the
    capped logits' width slopes, at init and after the step, are within 0.15 of the
    uncapped model's."""
    from spectral.torch import check_widths

    slopes = {}
    for name, caps in (("plain", {}), ("capped", CAPS)):
        def build(width, caps=caps):
            return _litgpt(width, **caps)

        report = check_widths(
            cfg.CONFIG, build(64), [64, 128, 256], factory=build, base={"lr": 1e-2}
        )
        assert report.problems == [], name
        [logits] = [row for row in report.rows if row.kind == "logits"]
        slopes[name] = (logits.init_slope, logits.step_slope)
    assert slopes["plain"][0] == pytest.approx(-0.5, abs=0.15)  # a random readout at init
    for plain, capped in zip(slopes["plain"], slopes["capped"], strict=True):
        assert capped == pytest.approx(plain, abs=0.15)
