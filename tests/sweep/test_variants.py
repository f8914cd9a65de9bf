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
