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
