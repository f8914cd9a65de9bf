"""check() names a run whose optimizer is off the rules along the horizon and the batch
(issue 49): the pure function spectral.torch.check.run_rules, then through a config's check."""

from __future__ import annotations

import pytest

from spectral.torch.check.run_rules import RUN_RULE_TOL, run_rule_problems

ALONG = {"adamw": {"lr": (-0.32, 0.5), "weight_decay": (-0.68, 0.5), "eps": (0.0, -0.5)},
         "muon-kimi": {"lr": (-0.32, 0.5), "weight_decay": (-0.68, 0.5)}}
BASE_RUN = {"base_steps": 1000.0, "base_batch": 32.0}
RUN = {"steps": 4000, "batch": 128}  # r_D = 16, r_B = 4
AT_BASE = {"hidden_weight": {"lr": 1e-3, "weight_decay": 0.1},
           "output_weight": {"lr": 2e-3, "weight_decay": 0.1, "eps": 1e-8}}
LR = 16 ** -0.32 * 2
WD = 16 ** -0.68 * 2


def _groups(hidden_lr, out_lr, out_wd=0.1 * WD, out_eps=1e-8 * 0.5):
    return [("hidden_weight", "muon-kimi", {"lr": hidden_lr, "weight_decay": 0.1 * WD}),
            ("output_weight", "adamw", {"lr": out_lr, "weight_decay": out_wd, "eps": out_eps})]


def test_on_the_rule_nothing():
    assert run_rule_problems(ALONG, BASE_RUN, RUN, _groups(1e-3 * LR, 2e-3 * LR), AT_BASE) == []
    # within the tolerance
    assert run_rule_problems(ALONG, BASE_RUN, RUN, _groups(1e-3 * LR * (1 + RUN_RULE_TOL / 2), 2e-3 * LR), AT_BASE) == []


def test_the_base_runs_numbers_are_named_one_line_per_knob():
    lines = run_rule_problems(ALONG, BASE_RUN, RUN, _groups(1e-3, 2e-3, 0.1, 1e-8), AT_BASE)
    assert len(lines) == 4  # hidden lr, output lr, wd, eps (hidden wd is on its rule)
    assert lines[0] == (
        f"hidden_weight (muon-kimi): lr 0.001 is off the run (steps 4000, batch 128: r_D 16, r_B 4)'s rule "
        f"{1e-3 * LR:.4g} (base-run value x {LR:.4g}); it is the base run's value: pass the run's steps= "
        "(or tokens=) and batch= to build_optimizers")
    assert all(line.isascii() for line in lines)


def test_another_value_is_given_as_a_multiple_of_the_rule():
    lines = run_rule_problems(ALONG, BASE_RUN, RUN, _groups(1e-3 * LR, 2e-3 * LR * 3), AT_BASE)
    assert len(lines) == 1 and lines[0].startswith("output_weight (adamw): lr") and "3 x the rule's" in lines[0]


def test_nothing_to_judge_at_the_base_run_or_without_rules():
    off = _groups(1e-3, 2e-3, 0.1, 1e-8)
    assert run_rule_problems(ALONG, BASE_RUN, {"steps": 1000, "batch": 32}, off, AT_BASE) == []
    assert run_rule_problems(ALONG, BASE_RUN, {"steps": None, "batch": None}, off, AT_BASE) == []
    assert run_rule_problems(None, BASE_RUN, RUN, off, AT_BASE) == []


@pytest.mark.generated
def test_a_configs_check_names_an_optimizer_built_for_the_base_run(tmp_path):
    torch = pytest.importorskip("torch")
    from spectral.codegen import load_generated
    from spectral.models import GPT

    cfg = load_generated("adamw", base_width=32, base_depth=1, folder=tmp_path, base_run=BASE_RUN)
    torch.manual_seed(0)
    model = GPT(64, 2, block_size=8, multipliers=cfg)
    cfg.init_(model, 64, 2)
    base = {"lr": 3e-3, "weight_decay": 0.1}
    opt = cfg.build_optimizers(model, 64, 2, **base)  # the run forgotten
    found = cfg.check(model, 64, 2, opt, **base, **RUN)
    named = [line for line in found if "it is the base run's value" in line]
    assert named and all("is off the run (steps 4000, batch 128: r_D 16, r_B 4)" in line for line in named)
    assert {line.split(":")[0] for line in named} >= {"hidden_weight (adamw)", "output_weight (adamw)"}
    right = cfg.build_optimizers(model, 64, 2, **base, **RUN)
    assert cfg.check(model, 64, 2, right, **base, **RUN) == []
