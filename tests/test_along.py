"""Numbers along the horizon and the batch: spectral.scaling, spectral.transfer, the CLI.

The rules are ``HP × r_D^d × r_B^b`` (spectral.engine.axes); here the arithmetic that turns
them into numbers: the timescale identity ``lr·wd·D/B`` held per role between the base run
and any other (hypothesis over sizes, horizons and batches), the base run unchanged to the
bit, steps counted as steps × batch tokens, and every bad run value refused in one line.
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spectral.errors import ConfigError, ConfigTypeError
from spectral.scaling import BaseValues, run_ratios, scale_rules
from spectral.transfer import hparams, momentum_factors, plan

BASE = {"lr": 3e-3, "weight_decay": 0.1, "init_std": 0.02}
PLANS = {"adamw": plan("adamw"), "muon-kimi+adamw": plan("muon-kimi", "adamw"), "sgd": plan("sgd")}


def test_run_ratios_table():
    assert run_ratios({}) == (1.0, 1.0)
    assert run_ratios({"steps": 3000, "base_steps": 1000}) == (3.0, 1.0)
    assert run_ratios({"tokens": 4e9, "base_tokens": 1e9}) == (4.0, 1.0)
    # steps count as steps × batch tokens: the same steps at 4x the batch is 4x the tokens
    assert run_ratios({"steps": 1000, "batch": 256, "base_steps": 1000, "base_batch": 64}) == (
        4.0,
        4.0,
    )
    # a batch alone keeps the token horizon (fewer steps)
    assert run_ratios({"batch": 256, "base_batch": 64}) == (1.0, 4.0)
    # the base horizon in the other unit: tokens = steps × batch
    assert run_ratios({"tokens": 2048e3, "base_steps": 1000, "base_batch": 512}) == (4.0, 1.0)
    assert run_ratios({"steps": 500}, {"base_tokens": 1e6, "base_batch": 1000}) == (0.5, 1.0)
    # given base values win over a config's recorded ones
    assert run_ratios({"steps": 500, "base_steps": 250}, {"base_steps": 1000}) == (2.0, 1.0)


@pytest.mark.parametrize(
    ("run", "error", "words"),
    [
        ({"steps": 10}, ConfigError, "steps: no base_steps"),
        ({"tokens": 10}, ConfigError, "tokens: no base_tokens"),
        ({"batch": 10}, ConfigError, "batch: no base_batch"),
        ({"steps": 10, "tokens": 10, "base_steps": 1}, ConfigError, "not both"),
        ({"steps": 0, "base_steps": 1}, ConfigError, "steps must be a number from 1 to"),
        ({"base_steps": 0.5, "steps": 1}, ConfigError, "base_steps must be a number from 1"),
        ({"steps": math.nan, "base_steps": 1}, ConfigError, "from 1 to 2"),
        ({"batch": math.inf, "base_batch": 1}, ConfigError, "from 1 to 2"),
        ({"steps": True, "base_steps": 1}, ConfigTypeError, "steps must be a number, got True"),
        ({"steps": "100", "base_steps": 1}, ConfigTypeError, "got '100'"),
        ({"steps": 10**100, "base_steps": 1}, ConfigError, "at most 2\\*\\*80"),
        ({"step": 10}, ConfigTypeError, "unknown run value"),
    ],
)
def test_bad_runs(run, error, words):
    with pytest.raises(error, match=words):
        run_ratios(run)


def test_base_run_is_bit_identical():
    for p in PLANS.values():
        plain = scale_rules(
            p.optimizers, p.exponents(), 64, 2, 256, 8, BaseValues(**BASE), {"adamw": 1e-8}
        )
        for run in ({}, {"steps": 1000, "base_steps": 1000, "batch": 32, "base_batch": 32}):
            assert hparams(p, 64, 2, 256, 8, **BASE, **run) == plain


def test_known_numbers():
    # AdamW at 16x the tokens (4x the steps, 4x the batch): lr × 16^-0.32 × 4^0.5,
    # wd × 16^-0.68 × 4^0.5, eps / 2; width and depth rules unchanged
    p = PLANS["adamw"]
    run = {"steps": 4000, "base_steps": 1000, "batch": 256, "base_batch": 64}
    base = hparams(p, 64, 2, 64, 2, **BASE)
    hp = hparams(p, 64, 2, 64, 2, **BASE, **run)
    h = hp["hidden_weight"]
    assert h["lr"] == pytest.approx(3e-3 * 16**-0.32 * 2, rel=1e-14)
    assert h["lr"] == pytest.approx(0.0024707730518027196, rel=1e-14)
    assert h["weight_decay"] == pytest.approx(0.1 * 16**-0.68 * 2, rel=1e-14)
    assert h["eps"] == pytest.approx(0.5e-8, rel=1e-14)
    assert hp["hidden_bias"]["weight_decay"] == 0.0  # a zero base stays zero
    for role in hp:
        assert hp[role]["init_std"] == base[role]["init_std"]
        assert hp[role]["multiplier"] == base[role]["multiplier"]
    assert set(momentum_factors(p, **run).values()) == {4.0}  # 1 - beta times r_B
    # SGD: lr linear in B, so wd moves with the horizon only
    s = hparams(PLANS["sgd"], 64, 2, 64, 2, **BASE, **run)["hidden_weight"]
    assert s["lr"] == pytest.approx(3e-3 * 16**-0.32 * 4, rel=1e-14)
    assert s["weight_decay"] == pytest.approx(0.1 * 16**-0.68, rel=1e-14)
    assert set(momentum_factors(PLANS["sgd"], **run).values()) == {1.0}


sizes = st.sampled_from([32, 64, 128, 256, 1024])
depths = st.sampled_from([1, 2, 4, 12])
amounts = st.integers(min_value=1, max_value=10**7)


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(sorted(PLANS)),
    width=sizes,
    depth=depths,
    steps=amounts,
    base_steps=amounts,
    batch=st.integers(1, 4096),
    base_batch=st.integers(1, 4096),
)
def test_timescale_identity_per_role(name, width, depth, steps, base_steps, batch, base_batch):
    # lr·wd·D/B (lr·wd × the number of steps) is the base's at every horizon and batch, per
    # role, at the same width and depth: the decay's timescale is the same fraction of the run
    p = PLANS[name]
    run = {"steps": steps, "base_steps": base_steps, "batch": batch, "base_batch": base_batch}
    at_base = hparams(p, 64, 2, width, depth, **BASE)
    moved = hparams(p, 64, 2, width, depth, **BASE, **run)
    tokens, base_tokens = steps * batch, base_steps * base_batch
    for role, h in moved.items():
        b = at_base[role]
        if b["weight_decay"] == 0.0:
            assert h["weight_decay"] == 0.0
            continue
        kept = h["lr"] * h["weight_decay"] * tokens / batch
        assert kept == pytest.approx(b["lr"] * b["weight_decay"] * base_tokens / base_batch, rel=1e-9)


def test_transfer_cli_numbers(capsys):
    from spectral.cli import main

    args = [
        "transfer", "adamw", "--base-width", "64", "--base-depth", "2", "--width", "64",
        "--depth", "2", "--lr", "3e-3", "--init-std", "0.02", "--weight-decay", "0.1",
        "--format", "json",
    ]  # fmt: skip
    assert main(args) == 0
    plain = json.loads(capsys.readouterr().out)
    run = ["--steps", "4000", "--base-steps", "1000", "--batch", "256", "--base-batch", "64"]
    assert main(args + run) == 0
    moved = json.loads(capsys.readouterr().out)
    assert set(plain) == set(moved) and set(plain["input_weight"]) == set(moved["input_weight"])
    assert moved["hidden_weight"]["lr"] == pytest.approx(3e-3 * 16**-0.32 * 2, rel=1e-14)
    assert main(args[:-2] + run) == 0
    text = capsys.readouterr().out
    assert "r_D = 16 (tokens), r_B = 4 (batch)" in text
    assert "adamw: 1 - β of every momentum × 4" in text
    assert main(args + ["--steps", "4000"]) == 2
    assert "steps: no base_steps" in capsys.readouterr().err


def test_readme_example_prints_what_the_readme_shows(capsys):
    import shlex
    from pathlib import Path

    from spectral.cli import main

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    start = readme.index("$ spectral transfer muon-kimi --others adamw --base-width 256 --base-depth 4 --width 2048 --depth 32 --lr 3e-3 --init-std 0.02 --weight-decay 0.1 --steps")  # noqa: E501
    block = readme[start : readme.index("```", start)]
    command, shown = block.split("\n", 1)
    assert main(shlex.split(command)[2:]) == 0
    assert capsys.readouterr().out == shown
