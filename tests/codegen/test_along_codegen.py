"""Generated configs apply the rules along the horizon and the batch (issue 49).

Every target's module carries ``ALONG`` (role -> HP -> (d, b)) and ``BASE_RUN`` (the base
horizon and batch it was generated with); its functions take the run's ``steps=`` or
``tokens=`` and ``batch=``. At the base run every number is the one it was before these
rules (the training records of test_config_golden.py pin that to the bit); elsewhere each
role's lr, weight decay and eps are the transfer's. Importing and --vendor forms alike.
"""

from __future__ import annotations

import ast

import pytest

from spectral.codegen import render
from spectral.errors import SpecError
from spectral.transfer import hparams, plan

torch = pytest.importorskip("torch")
pytest.importorskip("pytorch_optimizer")

from spectral.codegen import load_generated  # noqa: E402
from spectral.models import GPT  # noqa: E402

pytestmark = pytest.mark.generated  # also run on the --vendor form

BASE = {"lr": 3e-3, "weight_decay": 0.1, "init_std": 0.02}
RUN = {"steps": 4000, "batch": 128}
BASE_RUN = {"base_steps": 1000, "base_batch": 32}


def _literal(source: str, name: str) -> object:
    """The value of a top-level ``NAME: ... = {...}`` of a generated module."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == name:
            return ast.literal_eval(node.value)
    raise AssertionError(f"no {name} in the module")


@pytest.mark.parametrize("framework", ["torch", "jax", "torchtitan", "megatron"])
def test_every_target_carries_the_rules_and_the_base_run(framework):
    # Megatron-core builds one Adam for every parameter (spectral/codegen/megatron.py)
    p = plan("adamw") if framework == "megatron" else plan("muon-kimi", "adamw")
    source = render(p, base_width=64, base_depth=2, framework=framework, base_run=BASE_RUN)
    assert _literal(source, "ALONG") == p.along()
    assert _literal(source, "BASE_RUN") == {"base_steps": 1000.0, "base_batch": 32.0}
    assert "--base-steps 1000 --base-batch 32" in source
    assert source.isascii()
    plain = render(p, base_width=64, base_depth=2, framework=framework)
    assert _literal(plain, "BASE_RUN") == {}


def test_base_run_refusals():
    with pytest.raises(SpecError, match="base_run: unknown key 'steps'"):
        render("adamw", base_width=64, base_depth=2, base_run={"steps": 10})
    with pytest.raises(SpecError, match="not both"):
        render("adamw", base_width=64, base_depth=2, base_run={"base_steps": 1, "base_tokens": 2})
    with pytest.raises(SpecError, match="base_batch must be a number from 1"):
        render("adamw", base_width=64, base_depth=2, base_run={"base_batch": -1})


@pytest.mark.parametrize(
    ("hidden", "others"),
    [pytest.param("muon-kimi", "adamw", marks=pytest.mark.slow), ("adamw", None)],
)
def test_torch_config_applies_the_run(hidden, others, tmp_path):
    cfg = load_generated(
        hidden, others, base_width=32, base_depth=1, folder=tmp_path, base_run=BASE_RUN
    )
    p = plan(hidden, others)
    width, depth = 64, 2
    at_base = cfg.hparams(width, depth, **BASE)
    # the base run, named or not, is the config's numbers without the rules along it
    assert cfg.hparams(width, depth, **BASE, steps=1000, batch=32) == at_base
    assert at_base == hparams(p, 32, 1, width, depth, **BASE)
    moved = cfg.hparams(width, depth, **BASE, **RUN)
    assert moved == hparams(p, 32, 1, width, depth, **BASE, **RUN, **BASE_RUN)
    assert moved != at_base
    # the optimizer the config builds holds those numbers, and check() agrees with them
    torch.manual_seed(0)
    model = GPT(width, depth, block_size=8, multipliers=cfg)
    cfg.init_(model, width, depth)
    opt = cfg.build_optimizers(model, width, depth, **BASE, **RUN)
    base_opt = cfg.build_optimizers(model, width, depth, **BASE)
    pairs = list(zip(base_opt.param_groups, opt.param_groups, strict=True))
    assert pairs
    for g0, g in pairs:  # same groups, each moved by its role's factor along the run
        role = g["role"]
        assert g0["role"] == role
        for key in ("lr", "weight_decay", "eps"):
            if key in moved[role] and g0[key]:
                ratio = moved[role][key] / at_base[role][key]
                assert g[key] == pytest.approx(g0[key] * ratio, rel=1e-12), (role, key)
    assert cfg.check(model, width, depth, opt, **BASE, **RUN) == []
    assert cfg.check(model, width, depth, opt, **BASE) != []  # built for another run


def test_torch_config_without_a_recorded_base(tmp_path):
    cfg = load_generated("adamw", base_width=64, base_depth=2, folder=tmp_path)
    with pytest.raises(ValueError, match="steps: no base_steps") as info:
        cfg.hparams(64, 2, **BASE, steps=10)
    assert type(info.value).__name__ == "ConfigError"  # the vendored form has its own class
    got = cfg.hparams(64, 2, **BASE, tokens=4e6, base_tokens=1e6)
    assert got["hidden_weight"]["lr"] == pytest.approx(3e-3 * 4**-0.32, rel=1e-14)


@pytest.mark.slow  # imports megatron-core and torchtitan: seconds on the shared CPU
@pytest.mark.parametrize("framework", ["torchtitan", "megatron"])
def test_titan_and_megatron_modules_take_the_run(framework, tmp_path):
    # their functions take the base values through spectral.scaling.BaseValues, so the run
    # (steps=, batch=) reaches every group; the base run changes nothing
    import importlib.util
    import sys

    source = render("adamw", base_width=64, base_depth=2, framework=framework, base_run=BASE_RUN)
    path = tmp_path / f"along_{framework}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    build = mod.param_groups if framework == "torchtitan" else mod.config_overrides
    at_base = build(128, 4, **BASE)
    assert build(128, 4, **BASE, steps=1000, batch=32) == at_base
    moved = build(128, 4, **BASE, **RUN)
    lr_factor, wd_factor = 16**-0.32 * 2, 16**-0.68 * 2  # 16x the tokens, 4x the batch
    if framework == "torchtitan":
        pairs = [(a.optimizer_kwargs, b.optimizer_kwargs) for a, b in zip(at_base, moved, strict=True)]
        keys = {"lr": lr_factor, "weight_decay": wd_factor, "eps": 0.5}
    else:
        pairs = [(at_base[k], moved[k]) for k in at_base]
        keys = {"max_lr": lr_factor, "wd_mult": wd_factor, "eps": 0.5}
    assert pairs
    for a, b in pairs:
        for key, factor in keys.items():
            if a.get(key):
                assert b[key] == pytest.approx(a[key] * factor, rel=1e-12), key
    # Adam's betas along the batch (r_B = 4): moved from the implementation's (torch.optim.AdamW's
    # (0.9, 0.999), Megatron's OptimizerConfig's) in every group; none written at the base run
    assert all("betas" not in a for a, _ in pairs)
    assert all(b["betas"] == (pytest.approx(0.6, rel=1e-12), pytest.approx(0.996, rel=1e-12)) for _, b in pairs)
    with pytest.raises(ValueError, match=r"betas: the batch rule moves 1 - beta = 0.1 by 16"):
        build(128, 4, **BASE, steps=1000, batch=512)


@pytest.mark.slow  # imports torchtitan
def test_torchtitan_moves_the_betas_it_is_given(tmp_path):
    # options' betas (torchtitan's --optimizer.betas through the container) are the base's:
    # unchanged at the base run, bit for bit, and 1 - beta times r_B away from it
    import importlib.util
    import sys

    path = tmp_path / "betas_titan.py"
    path.write_text(render("adamw", base_width=64, base_depth=2, framework="torchtitan", base_run=BASE_RUN))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    options = {"AdamW": {"betas": (0.8, 0.95)}}
    at_base = mod.param_groups(128, 4, **BASE, options=options, steps=1000, batch=32)
    assert [g.optimizer_kwargs["betas"] for g in at_base] == [(0.8, 0.95)] * len(at_base)
    moved = mod.param_groups(128, 4, **BASE, options=options, **RUN)
    assert [g.optimizer_kwargs["betas"] for g in moved] == [(pytest.approx(0.2), pytest.approx(0.8))] * len(moved)


def test_torch_config_writes_the_betas_the_batch_rule_moves(tmp_path):
    # Adam's square-root rule: 1 - beta1 and 1 - beta2 times r_B (4 here); at the base run the
    # implementation's betas, bit for bit; Muon-Kimi's momentum is held
    cfg = load_generated("muon-kimi", "adamw", base_width=32, base_depth=1, folder=tmp_path, base_run=BASE_RUN)
    torch.manual_seed(0)
    model = GPT(64, 2, block_size=8, multipliers=cfg)
    cfg.init_(model, 64, 2)
    at_base = cfg.build_optimizers(model, 64, 2, **BASE)
    named = cfg.build_optimizers(model, 64, 2, **BASE, steps=1000, batch=32)
    moved = cfg.build_optimizers(model, 64, 2, **BASE, **RUN)
    for g0, g1, g in zip(at_base.param_groups, named.param_groups, moved.param_groups, strict=True):
        if "betas" in g0:
            assert g0["betas"] == g1["betas"] == (0.9, 0.999)
            assert g["betas"] == (pytest.approx(0.6, rel=1e-12), pytest.approx(0.996, rel=1e-12)), g["role"]
        if "momentum" in g0:  # Muon-Kimi: no momentum law, held
            assert g["momentum"] == g0["momentum"]
    user = cfg.build_optimizers(model, 64, 2, **BASE, **RUN, optimizer_kwargs={"adamw": {"betas": (0.8, 0.95)}})
    betas = [g["betas"] for g in user.param_groups if "betas" in g]
    assert betas and all(b == (pytest.approx(0.2), pytest.approx(0.8)) for b in betas)
    with pytest.raises(ValueError, match=r"adamw .* betas: the batch rule moves 1 - beta = 0.1 by 16"):
        cfg.build_optimizers(model, 64, 2, **BASE, steps=1000, batch=512)
