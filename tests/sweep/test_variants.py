"""Issue 46, item 5 (iii): Megatron-LM's Muon scale switch, declared by its update size and
derived by the engine (docs/sweep/variants/muon-scale/).

``shape_scaling`` steps by ``sqrt(max(1, n_out/n_in)) U V^T``, ``unit_rms_norm`` by
``sqrt(n_out/n_in) U V^T``. Each declaration derives (and is verified) on its own; the learning
rates differ role by role exactly by the width exponent of the scale factor at that role's shape,
so the step itself, ``lr x factor x U V^T``, has the same width exponent under both and under the
catalog's plain Muon (``U V^T``, no factor). The switch is therefore no width rule: it changes
the per-shape constants only."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from spectral import derive
from spectral.engine.spec_file import load_spec

FOLDER = Path(__file__).resolve().parents[2] / "docs" / "sweep" / "variants" / "muon-scale"
ROLES = ("input_weight", "hidden_weight", "output_weight", "router_weight")

# The width exponent of each declaration's scale factor at each role's shape, in the engine's limit
# (n grows past every fixed dimension): input d0 -> n, hidden n -> n, output n -> d_out, router n -> E.
FACTOR = {
    "muon-shape-scaling": {"input_weight": Fraction(1, 2), "hidden_weight": 0, "output_weight": 0,
                           "router_weight": 0},  # sqrt(max(1, n_out/n_in))
    "muon-unit-rms": {"input_weight": Fraction(1, 2), "hidden_weight": 0, "output_weight": Fraction(-1, 2),
                      "router_weight": Fraction(-1, 2)},  # sqrt(n_out/n_in)
}
LR = {
    "muon-shape-scaling": {"input_weight": 0, "hidden_weight": 0, "output_weight": Fraction(1, 2),
                           "router_weight": Fraction(-1, 2)},
    "muon-unit-rms": {"input_weight": 0, "hidden_weight": 0, "output_weight": 1, "router_weight": 0},
}


def _lr_exponents(d) -> dict[str, Fraction]:
    return {role: Fraction(str(d.rule(role, "lr").r_n)) for role in ROLES}


@pytest.mark.parametrize("name", sorted(FACTOR))
def test_each_scale_mode_derives_and_its_step_is_plain_muons(name: str):
    d = derive(load_spec(FOLDER / f"{name}.toml"), k=2)
    assert d.verified and all(c.holds for c in d.checks)
    lr = _lr_exponents(d)
    assert lr == LR[name]
    plain = _lr_exponents(derive("muon", k=2))  # U V^T with no factor: the step's own exponent
    assert plain == {"input_weight": Fraction(1, 2), "hidden_weight": 0, "output_weight": Fraction(1, 2),
                     "router_weight": Fraction(-1, 2)}
    assert {role: lr[role] + FACTOR[name][role] for role in ROLES} == plain


@pytest.mark.parametrize("name", sorted(FACTOR))
def test_committed_rules_are_the_derivation(tmp_path: Path, name: str, capsys):
    """The committed markdown is `spectral derive --spec FILE --format markdown --explain`, byte for byte."""
    from spectral.cli import main

    out = tmp_path / f"{name}.md"
    assert main(["derive", "--spec", str(FOLDER / f"{name}.toml"), "--format", "markdown", "--explain",
                 "-o", str(out)]) == 0
    capsys.readouterr()
    assert out.read_text(encoding="utf-8") == (FOLDER / f"{name}.md").read_text(encoding="utf-8")


def _step_constants(update_norm, shapes: dict[str, tuple[int, int]]) -> dict[str, float]:
    """Each matrix's step size ||A||_R (RMS -> RMS) per unit learning rate, over the n -> n attention
    projection's: the per-shape constant a single hidden-role learning rate cannot change."""
    from spectral.symbols import n_in, n_out

    size = {name: float(update_norm.subs({n_out: o, n_in: i})) for name, (o, i) in shapes.items()}
    return {name: round(v / size["attn.c_proj"], 12) for name, v in size.items()}


@pytest.mark.parametrize("width", [64, 256])
def test_scale_modes_differ_per_shape_on_the_sweeps_gpt(width: int):
    """(iii) against the sweep's Muon-Kimi: the three modes put different constants on the reference
    GPT's hidden matrices of different fan ratio (the MLP's 4n -> n down-projection against the n -> n,
    n -> 3n and n -> 4n ones), the same at every width. The derived hidden learning rate is one number
    per role, so it cannot absorb them: the modes are different base optimizers, which can give
    different losses at every width (the base included), not identical numbers under another
    exponent. The shapes are read from the model the sweep trains."""
    pytest.importorskip("torch")
    from spectral.catalog import catalog
    from spectral.models.torch import GPT

    model = GPT(width, 1, head_dim=16)
    shapes = {name.removeprefix("transformer.h.0.").removesuffix(".weight"): tuple(p.shape)
              for name, p in model.named_parameters() if p.ndim == 2 and ".h.0." in name}
    assert shapes == {"attn.c_attn": (3 * width, width), "attn.c_proj": (width, width),
                      "mlp.c_fc": (4 * width, width), "mlp.c_proj": (width, 4 * width)}
    kimi = _step_constants(catalog()["muon-kimi"].update_norm, shapes)
    shape_scaling = _step_constants(load_spec(FOLDER / "muon-shape-scaling.toml").update_norm, shapes)
    unit_rms = _step_constants(load_spec(FOLDER / "muon-unit-rms.toml").update_norm, shapes)
    assert kimi == {"attn.c_attn": 1.0, "attn.c_proj": 1.0, "mlp.c_fc": 1.0, "mlp.c_proj": 4.0}
    assert shape_scaling == {"attn.c_attn": 1.0, "attn.c_proj": 1.0, "mlp.c_fc": 1.0, "mlp.c_proj": 2.0}
    assert unit_rms == {"attn.c_attn": 1.0, "attn.c_proj": 1.0, "mlp.c_fc": 1.0, "mlp.c_proj": 1.0}


# --- the modes as sweep optimizers (-O muon-shape+adamw, -O muon-unit-rms+adamw) -----------------------

def _expected_factor(optimizer: str, n_out: int, n_in: int) -> float | None:
    """The factor on U V^T each sweep optimizer's Muon steps an n_out x n_in matrix by, per unit of the
    hidden role's derived learning rate (None: AdamW trains every matrix)."""
    import math

    return {"adamw": None,
            "muon-kimi+adamw": 0.2 * math.sqrt(max(n_out, n_in)),
            "muon-shape+adamw": math.sqrt(max(1, n_out / n_in)),
            "muon-unit-rms+adamw": math.sqrt(n_out / n_in)}[optimizer]


def _sweep_run(optimizer: str, width: int, folder: Path, weight_decay: float = 0.1):
    from spectral.sweep.options import Job, SweepConfig
    from spectral.sweep.recipe import recipe
    from spectral.sweep.train import build_run

    cfg = SweepConfig(optimizer=optimizer, base_width=16, base_depth=2, head_dim=16,
                      widths=(16, width), width=16, weight_decay=weight_decay)
    rec = recipe(optimizer, "mup", cfg, folder)
    built, opts = build_run(Job("mup", width, 2, -5), cfg, rec, 256, "cpu")
    hidden_lr = rec.hparams(width, 2, lr=2.0**-5, weight_decay=weight_decay)["hidden_weight"]["lr"]
    return built, opts, hidden_lr


@pytest.mark.parametrize("width", [16, 64])
@pytest.mark.parametrize("optimizer", __import__("spectral.sweep.options", fromlist=["OPTIMIZERS"]).OPTIMIZERS)
def test_each_sweep_optimizer_steps_each_matrix_by_its_modes_factor(tmp_path: Path, optimizer: str, width: int):
    """Every sweep optimizer (the registry), on the reference GPT at the base and at 4x: each hidden
    matrix's effective step factor, its group's lr times what the real torch.optim.Muon multiplies it
    by (torch's own _adjust_lr at the parameter's shape), over the hidden role's derived lr, is its
    mode's factor at the shape read from the model; lr x weight decay is the derived one."""
    torch = pytest.importorskip("torch")
    from torch.optim._muon import _adjust_lr

    model, opts, hidden_lr = _sweep_run(optimizer, width, tmp_path)
    names = {id(p): n for n, p in model.named_parameters()}
    seen = {}
    for opt in opts:
        for g in opt.param_groups:
            if "adjust_lr_fn" not in g:
                continue
            for p in g["params"]:
                effective = _adjust_lr(g["lr"], g["adjust_lr_fn"], p.shape) / hidden_lr
                seen[names[id(p)]] = (tuple(p.shape), effective, g["lr"] * g["weight_decay"])
    if _expected_factor(optimizer, 1, 1) is None:
        assert seen == {}
        return
    assert {type(part) for part in opts[0].parts.values()} == {torch.optim.Muon, torch.optim.AdamW}
    assert sorted(n.removeprefix("transformer.h.") for n in seen) == sorted(
        f"{i}.{m}.weight" for i in range(2) for m in ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"))
    decays = {round(wd, 15) for *_, wd in seen.values()}
    assert len(decays) == 1  # one derived lr x λ for the role, whatever the shape factor
    for name, ((n_out, n_in), effective, _) in seen.items():
        assert effective == pytest.approx(_expected_factor(optimizer, n_out, n_in), rel=1e-12), name
    down = next(v for n, v in seen.items() if n.endswith("0.mlp.c_proj.weight"))
    assert down[0] == (width, 4 * width)
    assert down[1] == pytest.approx({"muon-kimi+adamw": 0.4 * width**0.5, "muon-shape+adamw": 1.0,
                                     "muon-unit-rms+adamw": 0.5}[optimizer])


def test_unit_rms_steps_the_down_projection_half_as_far_as_shape_scaling(tmp_path: Path):
    """One real step of each mode's torch.optim.Muon from the same weights and gradients: every hidden
    matrix moves by the same amount except the MLP's 4n -> n down-projection, which unit_rms_norm moves
    by exactly half (sqrt(1/4) against shape_scaling's 1). λ = 0: the decay term, lr x λ x W, is the
    same in both (the first test) and would blur the ratio."""
    torch = pytest.importorskip("torch")

    steps = {}
    for optimizer in ("muon-shape+adamw", "muon-unit-rms+adamw"):
        model, opts, _ = _sweep_run(optimizer, 32, tmp_path, weight_decay=0.0)
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        gen = torch.Generator().manual_seed(0)
        for p in model.parameters():
            p.grad = torch.randn(p.shape, generator=gen)
        opts[0].step()
        steps[optimizer] = {n: p.detach() - before[n] for n, p in model.named_parameters() if ".h.1." in n
                            and p.ndim == 2}
    for name, shape_step in steps["muon-shape+adamw"].items():
        ratio = float(steps["muon-unit-rms+adamw"][name].norm() / shape_step.norm())
        assert ratio == pytest.approx(0.5 if name.endswith("mlp.c_proj.weight") else 1.0, rel=1e-6), name


@pytest.mark.parametrize("name", sorted(FACTOR))
def test_the_sweeps_declarations_are_the_committed_ones(name: str):
    """spectral.sweep.muon_scale derives from the same declarations as docs/sweep/variants/muon-scale/*.toml,
    and the hidden role (the one role its Muon trains) gets the same lr exponents as plain Muon's."""
    from spectral.sweep.muon_scale import declaration

    mine, committed = declaration(name), load_spec(FOLDER / f"{name}.toml")
    assert (mine.name, mine.update_norm, mine.applies_to) == (committed.name, committed.update_norm,
                                                              committed.applies_to)
    d = derive(mine, k=2)
    assert d.verified
    assert d.rule("hidden_weight", "lr").r_n == derive("muon", k=2).rule("hidden_weight", "lr").r_n == 0


def test_an_unknown_mode_is_refused():
    from spectral.errors import SpecError
    from spectral.sweep.muon_scale import declaration, factory
    from spectral.sweep.options import split_optimizer

    for bad in (lambda: factory("muon-unit"), lambda: declaration("muon-unit"),
                lambda: split_optimizer("muon-unit+adamw")):
        with pytest.raises(SpecError):
            bad()
