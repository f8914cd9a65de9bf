"""The generated PyTorch config module: standalone, deterministic, lint-clean, exact."""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

import spectral.codegen.context

from spectral import derive
from spectral.catalog import catalog
from spectral.codegen import render, write
from spectral.io import FileExistsRefusal
from spectral.transfer import hparams as transfer_hparams
from spectral.transfer import plan

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from spectral.models import GPT, ResidualMLP  # noqa: E402
from spectral.engine.ties import tie_differences  # noqa: E402

pytestmark = pytest.mark.generated  # also run on the --vendor form

ROOT = Path(__file__).resolve().parents[2]
RUFF = Path(sys.executable).parent / "ruff"
COMBOS = [(name, None) for name in catalog()] + [
    ("muon-kimi", "adamw"),
    ("muon", "adamw"),
    ("shampoo", "adamw"),
]
PAIRS = [(256, 4), (512, 8), (2048, 32), (128, 2), (1000, 7)]
BASE = {"lr": 0.01, "init_std": 0.02, "weight_decay": 0.1, "eps": 1e-7, "multiplier": 1.5}


def label(hidden: str, others: str | None) -> str:
    return hidden if others is None else f"{hidden}+{others}"


def module_name(lab: str) -> str:
    return "cfg_" + lab.replace("-", "_").replace("+", "__")


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("generated")
    paths = {}
    for hidden, others in COMBOS:
        lab = label(hidden, others)
        path = out / f"{module_name(lab)}.py"
        write(path, render(hidden, others, base_width=256, base_depth=4))
        paths[lab] = path
    return paths


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # as an import does (dataclasses look it up)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def configs(generated):
    return {lab: load(p) for lab, p in generated.items()}


# ------------------------------------------------------------------------------------
# the file itself
# ------------------------------------------------------------------------------------


@pytest.mark.parametrize("hidden,others", COMBOS, ids=[label(*c) for c in COMBOS])
def test_byte_identical_and_compiles(hidden, others, generated):
    again = render(hidden, others, base_width=256, base_depth=4)
    text = generated[label(hidden, others)].read_text(encoding="utf-8")
    assert again == text
    compile(text, "cfg.py", "exec")
    assert text.isascii()
    imports = {
        line.split()[1]
        for line in text.splitlines()
        if line.startswith(("import ", "from ")) and not line.startswith("from __future__")
    }
    if spectral.codegen.context.VENDOR_DEFAULT:  # standalone: the standard library and torch only
        outside = {
            m for m in imports if m.split(".")[0] not in {*sys.stdlib_module_names, "torch"}
        }
        assert not outside, outside
    else:  # the numbers, bound to the runtime
        assert imports == {"spectral.torch"}, imports


def test_ruff_clean(generated):
    files = [str(p) for p in generated.values()]
    # the project's rule set, and ruff's own (broader) defaults outside any project
    for extra in (["--config", str(ROOT / "pyproject.toml")], ["--isolated"]):
        r = subprocess.run(
            [str(RUFF), "check", "--no-cache", *extra, *files], capture_output=True, text=True
        )
        assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run(
        [str(RUFF), "format", "--check", "--isolated", *files], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout + r.stderr


_BLOCKED = r"""
import importlib.util, json, os, sys
for blocked in ("sympy", "pydantic", "jinja2", "rich"):
    sys.modules[blocked] = None  # `import sympy` raises ImportError
if os.environ.get("SPECTRAL_TEST_VENDOR") == "1":
    sys.modules["spectral"] = None  # the standalone form needs not even spectral.torch
try:
    import sympy  # noqa: F401
except ImportError:
    pass
else:
    raise SystemExit("sympy still importable")
out = {}
for path in sys.argv[2:]:
    spec = importlib.util.spec_from_file_location("m", path)
    m = importlib.util.module_from_spec(spec)
    sys.modules["m"] = m  # as an import does (dataclasses look their module up)
    spec.loader.exec_module(m)
    base = json.loads(sys.argv[1])
    out[path] = {f"{w}x{d}": m.hparams(w, d, **base) for w, d in [(256, 4), (512, 8), (2048, 32), (128, 2), (1000, 7)]}
print(json.dumps(out))
"""


@functools.cache
def _derived(opt: str):
    """derive(opt, 2), once per optimizer: the test below asks for its rules thousands of
    times (24 modules x 5 sizes x every role and hyperparameter; ~10 ms a derivation)."""
    return derive(opt, 2)


def _engine_value(opt: str, role: str, hp: str, w: int, d: int) -> float:
    e = _derived(opt).rule(role, hp)

    def power(x: Fraction, ex: Fraction) -> float:
        return float(x**ex.numerator) ** (1 / ex.denominator)

    return power(Fraction(w, 256), e.r_n) * power(Fraction(d, 4), e.r_L)


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_imports_without_sympy_and_matches_engine(generated):
    """In a process where sympy (and spectral) cannot be imported, every module loads and
    its hparams equal the engine's rules times the base values."""
    files = [str(p) for p in generated.values()]
    r = subprocess.run(
        [sys.executable, "-c", _BLOCKED, json.dumps(BASE), *files],
        capture_output=True,
        text=True,
        cwd=generated[next(iter(generated))].parent,
    )
    assert r.returncode == 0, r.stderr
    results = json.loads(r.stdout)
    for lab, path in generated.items():
        p = plan(*lab.split("+")) if "+" in lab else plan(lab)
        for w, d in PAIRS:
            got = results[str(path)][f"{w}x{d}"]
            assert list(got) == list(p.optimizers)
            for role, opt in p.optimizers.items():
                g = got[role]
                f = lambda hp: _engine_value(opt, role, hp, w, d)  # noqa: E731, B023
                assert math.isclose(g["lr"], BASE["lr"] * f("lr"), rel_tol=1e-12)
                # biases and norm gains: no weight decay and zero init unless named
                bias = role.endswith("_bias")
                wd = 0.0 if bias else BASE["weight_decay"] * f("weight_decay")
                assert math.isclose(g["weight_decay"], wd, rel_tol=1e-12)
                assert math.isclose(
                    g["multiplier"], BASE["multiplier"] * f("multiplier"), rel_tol=1e-12
                )
                std = 0.0 if bias else BASE["init_std"] * math.sqrt(f("init_var"))
                assert math.isclose(g["init_std"], std, rel_tol=1e-12)
                if _derived(opt).spec.has_eps:
                    assert math.isclose(g["eps"], BASE["eps"] * f("eps"), rel_tol=1e-12)
                else:
                    assert "eps" not in g


@pytest.mark.parametrize("hidden,others", COMBOS, ids=[label(*c) for c in COMBOS])
def test_generated_hparams_equal_transfer(hidden, others, configs):
    cfg = configs[label(hidden, others)]
    p = plan(hidden, others)
    assert cfg.BASE_WIDTH == 256 and cfg.BASE_DEPTH == 4 and cfg.K == 2
    assert cfg.OPTIMIZERS == p.optimizers
    assert cfg.RULES == p.exponents()
    for w, d in PAIRS:
        for eps in (None, 1e-6):
            kw = dict(BASE, eps=eps)
            assert cfg.hparams(w, d, **kw) == transfer_hparams(p, 256, 4, w, d, **kw)
    m = cfg.multipliers(2048, 32)
    assert m == {
        "input": cfg.hparams(2048, 32, lr=1, init_std=1)["input_weight"]["multiplier"],
        "hidden": 1 / 8,
        "output": 1 / 8,
    }


def test_user_spec_in_either_slot():
    import sympy as sp

    from spectral.spec import OptimizerSpec
    from spectral.symbols import n_in

    mine = OptimizerSpec(name="mine", update_norm=n_in, eps=sp.Integer(1))
    src = render("muon", "mine", base_width=64, base_depth=2, catalog={"mine": mine})
    assert '"input_bias": "mine"' in src and "factories=" in src
    src2 = render("mine", "adamw", base_width=64, base_depth=2, catalog={"mine": mine})
    assert '"hidden_weight": "mine"' in src2


# ------------------------------------------------------------------------------------
# classify, init_, param_groups, build_optimizers
# ------------------------------------------------------------------------------------

GPT2_NAMES = {
    # Hugging Face GPT2LMHeadModel (untied), nanoGPT, and wrapped variants
    "transformer.wte.weight": "input_weight",
    "transformer.wpe.weight": "input_weight",
    "transformer.h.0.ln_1.weight": "hidden_bias",
    "transformer.h.0.ln_1.bias": "hidden_bias",
    "transformer.h.11.attn.c_attn.weight": "hidden_weight",
    "transformer.h.11.attn.c_attn.bias": "hidden_bias",
    "transformer.h.3.attn.c_proj.weight": "hidden_weight",
    "transformer.h.3.mlp.c_fc.weight": "hidden_weight",
    "transformer.h.3.mlp.c_proj.bias": "hidden_bias",
    "transformer.ln_f.weight": "input_bias",
    "transformer.ln_f.bias": "input_bias",
    "lm_head.weight": "output_weight",
    "module._orig_mod.transformer.h.2.mlp.c_fc.weight": "hidden_weight",
    "h.0.attn.c_attn.weight": "hidden_weight",
    "model.embed_tokens.weight": "input_weight",
    "model.layers.3.self_attn.q_proj.weight": "hidden_weight",
    "model.layers.3.post_attention_layernorm.weight": "hidden_bias",
    "model.norm.weight": "input_bias",
    "input.weight": "input_weight",
    "blocks.3.layers.1.bias": "hidden_bias",
    "output.weight": "output_weight",
}


def test_classify_default_names(configs):
    cfg = configs["muon-kimi+adamw"]
    for name, role in GPT2_NAMES.items():
        assert cfg.classify(name) == role, name
    for name, p in GPT(64, 2).named_parameters():
        cfg.classify(name, p)
    for name, p in ResidualMLP(3, 2, 16, 2, k=3).named_parameters():
        cfg.classify(name, p)


def test_classify_error_names_the_parameter(configs):
    cfg = configs["adamw"]
    with pytest.raises(ValueError, match=r"'encoder\.mystery\.weight' \(shape \(3, 4\)\)"):
        cfg.classify("encoder.mystery.weight", torch.zeros(3, 4))
    # a readout bias has its own role now (issue 26), placed by the default patterns
    assert cfg.classify("lm_head.bias") == "output_bias"
    assert cfg.classify("encoder.mystery.weight", patterns={r"mystery": "hidden_weight"}) == (
        "hidden_weight"
    )
    assert cfg.classify("x", patterns={"x": "output_weight"}) == "output_weight"
    with pytest.raises(ValueError, match="unknown role"):
        cfg.classify("x", patterns={"x": "nonsense"})

    class Odd(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(2, 2)

    with pytest.raises(ValueError, match=r"proj\.weight \(2, 2\); proj\.bias"):
        cfg.param_groups(Odd(), 64, 2, lr=1e-3)


def test_tied_embeddings_where_the_rules_allow_them(configs):
    """Allowed under AdamW's embedding rules (one input_weight group), refused under
    NorMuon's, naming what differs (tests/torch/test_ties_runtime.py: the whole story)."""
    g = GPT(64, 1, block_size=8)
    g.lm_head.weight = g.transformer.wte.weight
    cfg = configs["muon-kimi+adamw"]
    assert tie_differences(cfg.CONFIG) == []
    groups = cfg.param_groups(g, 64, 1, lr=1e-3)
    holding = [grp["role"] for grp in groups if any(p is g.lm_head.weight for p in grp["params"])]
    assert holding == ["input_weight"]
    cfg = configs["normuon"]
    assert tie_differences(cfg.CONFIG) != []
    with pytest.raises(ValueError, match=r"tied .* under normuon .*lr: r_n\^0 r_L\^0"):
        cfg.param_groups(g, 64, 1, lr=1e-3)
    with pytest.raises(ValueError, match="tied"):
        cfg.init_(g, 64, 1, 0.02)


def test_the_runtime_allows_ties_exactly_where_the_engine_does(configs):
    """The runtime decides a tie from the config's numbers (spectral.engine.ties); the engine
    from the derivation (Derivation.tie_allowed, of the optimizer training both embeddings).
    They agree for every generated config."""
    for lab, cfg in configs.items():
        embeddings = cfg.OPTIMIZERS.get("input_weight")
        engine = (
            embeddings is not None
            and embeddings == cfg.OPTIMIZERS.get("output_weight")
            and derive(embeddings, k=cfg.K).tie_allowed
        )
        assert (tie_differences(cfg.CONFIG) == []) == engine, lab


def test_matrix_only_without_others_needs_a_bias_free_model(configs):
    cfg = configs["muon"]
    with pytest.raises(ValueError, match=r"'input\.bias'.*--others adamw"):
        cfg.param_groups(ResidualMLP(4, 2, 16, 2), 16, 2, lr=0.02)
    groups = cfg.param_groups(ResidualMLP(4, 2, 16, 2, bias=False), 16, 2, lr=0.02)
    assert {g["role"] for g in groups} == {"input_weight", "hidden_weight", "output_weight"}


def test_init_follows_roles(configs):
    cfg = configs["muon-kimi+adamw"]
    torch.manual_seed(0)
    g = GPT(512, 2, block_size=8)
    cfg.init_(g, 512, 2, 0.02)
    hidden = g.transformer.h[0].mlp.c_fc.weight
    assert hidden.std().item() == pytest.approx(0.02 / math.sqrt(2), rel=0.02)
    assert g.transformer.wte.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert torch.all(g.transformer.h[1].ln_2.weight == 1)
    assert torch.all(g.transformer.ln_f.bias == 0)
    mlp = ResidualMLP(100, 2, 256, 2)
    cfg.init_(mlp, 256, 2, 1.0)
    # dense input: sigma^2 / d_0
    assert mlp.input.weight.std().item() == pytest.approx(0.1, rel=0.05)


def _tiny(cfg, has_bias: bool):
    if has_bias:
        return ResidualMLP(6, 3, 32, 2, multipliers=cfg)
    return ResidualMLP(6, 3, 32, 2, bias=False, multipliers=cfg)


IMPL = {
    "sgd": "SGD",
    "adamw": "AdamW",
    "muon-kimi": "Muon",
    "muon": "Muon",
    "lion": "Lion",
    "shampoo": "Shampoo",
    "soap": "SOAP",
    "sophia": "SophiaH",
    "sso": "SpectralSphere",
    "adam": "Adam",
    "nadam": "NAdam",
    "radam": "RAdam",
    "adafactor": "Adafactor",
    "adopt": "ADOPT",
    "adan": "Adan",
    "mars": "MARS",
    "schedulefree-adamw": "ScheduleFreeAdamW",
    "lamb": "Lamb",
    "signsgd": "SignSGD",
    "scion": "SCION",
    "normuon": "NorMuon",
}
"""The class each catalog optimizer is built as, written out (an optimizer added later is
checked against its own file's TORCH record)."""


def _class_name(name: str) -> str:
    from spectral.catalog import module_of

    return IMPL.get(name) or module_of(name).TORCH.cls.rpartition(".")[2]


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
@pytest.mark.parametrize("hidden,others", COMBOS, ids=[label(*c) for c in COMBOS])
def test_build_optimizers_and_step(hidden, others, configs):
    pytest.importorskip("pytorch_optimizer")
    cfg = configs[label(hidden, others)]
    has_bias = "hidden_bias" in cfg.OPTIMIZERS
    torch.manual_seed(0)
    model = _tiny(cfg, has_bias)
    # base width 256: sigma = 1/16 gives hidden weights 1/sqrt(n) at every width
    cfg.init_(model, 32, 2, 1 / 16)
    fast = {"sso": {"power_iteration_steps": 3, "solver_max_iterations": 5}}
    fast = {k: v for k, v in fast.items() if k in cfg.OPTIMIZERS.values()}  # a typo is refused
    opts = cfg.build_optimizers(model, 32, 2, lr=1e-3, weight_decay=0.01, optimizer_kwargs=fast)
    assert isinstance(opts, torch.optim.Optimizer)
    assert set(opts.parts) == set(cfg.OPTIMIZERS.values())
    for kind, opt in opts.parts.items():
        assert type(opt).__name__ == _class_name(kind)
    if "muon-kimi" in opts.parts:
        assert all(g["adjust_lr_fn"] == "match_rms_adamw" for g in opts.parts["muon-kimi"].param_groups)
    if "shampoo" in opts.parts:
        assert all(g["weight_decouple"] for g in opts.parts["shampoo"].param_groups)
    covered = sum(len(g["params"]) for g in opts.param_groups)
    assert covered == len(list(model.parameters()))
    before = [p.detach().clone() for p in model.parameters()]
    for _ in range(2):  # SOAP's first step only sets up its eigenbasis
        x = torch.randn(8, 6)
        loss = (model(x) - x[:, :3]).pow(2).mean()
        loss.backward(create_graph=hidden == "sophia")
        opts.step()
        opts.zero_grad()
    moved = [not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True)]
    assert all(moved)
    assert all(torch.isfinite(p).all() for p in model.parameters())


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_param_group_values_and_compensation(configs):
    w, d = 1024, 8
    cfg = configs["muon+adamw"]
    g = GPT(w, d, block_size=8)
    groups = cfg.param_groups(g, w, d, lr={"muon": 0.02, "adamw": 3e-4}, weight_decay=0.1)
    hp = cfg.hparams(w, d, lr={"muon": 0.02, "adamw": 3e-4}, init_std=1.0, weight_decay=0.1)
    by_shape = {}
    for grp in groups:
        if grp["role"] == "hidden_weight":
            for p in grp["params"]:
                by_shape[tuple(p.shape)] = grp
        else:
            assert grp["lr"] == hp[grp["role"]]["lr"]
            assert grp["eps"] == hp[grp["role"]]["eps"]
    # torch Muon "original" multiplies lr by sqrt(max(1, A/B)): c_fc (4n x n) gets 1/2
    assert by_shape[(4 * w, w)]["lr"] == pytest.approx(hp["hidden_weight"]["lr"] / 2)
    assert by_shape[(4 * w, w)]["weight_decay"] == pytest.approx(0.1 * 2)
    assert by_shape[(w, 4 * w)]["lr"] == hp["hidden_weight"]["lr"]
    # SSO: lr * sqrt(n_out / n_in), fans from the module (Linear: (out, in))
    sso = configs["sso"]
    mlp = ResidualMLP(4, 2, 64, 2, bias=False)
    lrs = {grp["role"]: grp["lr"] for grp in sso.param_groups(mlp, 64, 2, lr=1.0)}
    base = sso.hparams(64, 2, lr=1.0, init_std=1.0)
    assert lrs["input_weight"] == pytest.approx(base["input_weight"]["lr"] * math.sqrt(64 / 4))
    assert lrs["output_weight"] == pytest.approx(base["output_weight"]["lr"] * math.sqrt(2 / 64))
    assert lrs["hidden_weight"] == base["hidden_weight"]["lr"]


def test_muon_kimi_step_is_the_declared_update(configs):
    """One Muon-Kimi step with momentum 0 moves a hidden matrix by
    lr * 0.2 * sqrt(max(n_in, n_out)) * NS(G): RMS->RMS norm matching the declaration."""
    cfg = configs["muon-kimi+adamw"]
    torch.manual_seed(0)
    model = ResidualMLP(4, 2, 64, 1, k=1, bias=False)
    opts = cfg.build_optimizers(
        model, 64, 1, lr=0.01, optimizer_kwargs={"muon-kimi": {"momentum": 0.0, "nesterov": False}}
    )
    w = model.blocks[0].layers[0].weight
    before = w.detach().clone()
    model(torch.randn(16, 4)).pow(2).mean().backward()
    opts.step()
    delta = w.detach() - before
    lr = cfg.hparams(64, 1, lr=0.01, init_std=1.0)["hidden_weight"]["lr"]
    # singular values of NS(G) lie in about (0.5, 1.5); the step is lr * 0.2 * sqrt(64) * that
    top = torch.linalg.matrix_norm(delta, ord=2).item() / (lr * 0.2 * math.sqrt(64))
    assert 0.4 < top < 1.6


def test_write_refuses_existing_file(tmp_path):
    target = tmp_path / "cfg.py"
    target.write_text("keep me")
    with pytest.raises(FileExistsRefusal):
        write(target, "new", force=False)
    assert target.read_text() == "keep me"
    write(target, "new", force=True)
    assert target.read_text() == "new"


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_the_config_is_numbers_bound_to_the_runtime():
    """Issue 20: the importing form is short and imports spectral.torch; the runtime
    imports neither sympy nor pydantic, jinja2 or rich (nor torch for spectral.jax)."""
    source = render("muon-kimi", "adamw", base_width=256, base_depth=4, vendor=False)
    # issue 20 set 150; issues 26/27 bound set_base_shapes and re-exported unwrap_optimizer;
    # issue 36 bound clip_grad_norm_; issue 49 added the horizon/batch laws per optimizer
    # (ALONG, BASE_RUN: 21 lines of numbers for two optimizers)
    assert len(source.splitlines()) <= 175
    assert "from spectral.torch import" in source
    vendored = render("muon-kimi", "adamw", base_width=256, base_depth=4, vendor=True)
    imports = [
        line for line in vendored.splitlines() if line.startswith(("import ", "from "))
    ]
    assert not [line for line in imports if "spectral" in line or "sympy" in line]
    for module, also in (("spectral.torch", set()), ("spectral.jax", {"torch"})):
        code = (
            f"import {module}, sys; "
            f"bad = {{'sympy', 'pydantic', 'jinja2', 'rich', *{sorted(also)!r}}} & set(sys.modules); "
            "assert not bad, bad"
        )
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
