"""``spectral sweep --model llama``: torchtitan's Llama3 layout and init, kept as the base (issue 35)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from spectral.sweep import SweepConfig

torch = pytest.importorskip("torch")

from spectral.models.torch import Llama, ffn_hidden_dim  # noqa: E402
from spectral.sweep import Job, build_run, recipe  # noqa: E402

BASE = 32
CFG = SweepConfig(optimizer="adamw", model="llama", widths=(BASE, 8 * BASE), base_width=BASE, head_dim=16,
                  block_size=16, weight_decay=0.1)


def _fresh(width: int, seed: int = 0) -> Llama:
    torch.manual_seed(seed)
    return Llama(width, 2, vocab_size=256, block_size=16, head_dim=16)


def _built(cfg: SweepConfig, param: str, width: int, folder: Path):
    return build_run(Job(param, width, cfg.base_depth, -5), cfg, recipe(cfg.optimizer, param, cfg, folder), 256, "cpu")


def test_the_llama_has_torchtitans_names_and_init():
    model = _fresh(128)
    std = {n: float(p.detach().std()) for n, p in model.named_parameters()}
    assert std["tok_embeddings.weight"] == pytest.approx(1.0, rel=0.03)
    for name in ("attention.wq", "attention.wk", "attention.wv", "feed_forward.w1"):
        assert std[f"layers.1.{name}.weight"] == pytest.approx(0.02, rel=0.05)
    for layer in (0, 1):  # torchtitan's depth init: 0.02 / sqrt(2 (l + 1))
        for name in ("attention.wo", "feed_forward.w2", "feed_forward.w3"):
            assert std[f"layers.{layer}.{name}.weight"] == pytest.approx(0.02 / (2 * (layer + 1)) ** 0.5, rel=0.05)
    head = model.lm_head.weight
    assert float(head.abs().max()) <= 3 * 128**-0.5  # cut at 3 std
    assert std["lm_head.weight"] == pytest.approx(128**-0.5 * 0.986, rel=0.03)  # a ±3σ cut keeps 98.6 % of σ
    assert {float(p.detach().min()) for n, p in model.named_parameters() if "norm" in n} == {1.0}
    assert model.layers[0].feed_forward.w1.weight.shape == (ffn_hidden_dim(128, 16), 128) == (352, 128)
    from spectral.torch.model.placement import place

    assert place(model).family.name == "torchtitan"


def test_at_the_base_the_run_is_the_users_model(tmp_path: Path):
    for param in ("mup", "sp"):
        model, _ = _built(CFG, param, BASE, tmp_path / param)
        for (name, p), (_, q) in zip(model.named_parameters(), _fresh(BASE).named_parameters(), strict=True):
            assert torch.equal(p, q), (param, name)
        assert (model.alpha_input, model.alpha_hidden, model.alpha_output) == (1.0, 1.0, 1.0)


def test_at_8x_mup_scales_the_own_init_and_sp_keeps_it(tmp_path: Path):
    n = 8 * BASE
    fresh = dict(_fresh(n).named_parameters())
    sp, _ = _built(CFG, "sp", n, tmp_path / "sp")
    for name, p in sp.named_parameters():  # SP: torchtitan's own init at every width
        assert torch.equal(p, fresh[name]), name
    mup, _ = _built(CFG, "mup", n, tmp_path / "mup")
    got = dict(mup.named_parameters())
    # hidden matrices: std sigma^2 / r_n, so x 8^-1/2; the head: torchtitan's own n^-1/2 undone
    # (its std stays the base's, 32^-1/2), and the rule's 1/r_n is its multiplier
    assert torch.equal(got["layers.0.attention.wq.weight"], fresh["layers.0.attention.wq.weight"] * 8**-0.5)
    assert torch.equal(got["layers.1.feed_forward.w2.weight"], fresh["layers.1.feed_forward.w2.weight"] * 8**-0.5)
    assert torch.equal(got["lm_head.weight"], fresh["lm_head.weight"] * 8**0.5)
    assert torch.equal(got["tok_embeddings.weight"], fresh["tok_embeddings.weight"])
    assert mup.alpha_output == 1 / 8


def test_init_scale_multiplies_the_own_values_of_that_role(tmp_path: Path):
    plain, _ = _built(CFG, "mup", BASE, tmp_path / "a")
    scaled, _ = _built(replace(CFG, init_scale={"hidden_weight": 2.0}), "mup", BASE, tmp_path / "b")
    rec = recipe("adamw", "mup", CFG, tmp_path / "c")
    for (name, p), (_, q) in zip(plain.named_parameters(), scaled.named_parameters(), strict=True):
        factor = 2.0 if rec.module.classify(name, p) == "hidden_weight" else 1.0
        assert torch.equal(q, p * factor), name


def test_weight_decay_reaches_every_group_by_its_rule(tmp_path: Path):
    n = 8 * BASE
    model, opts = _built(CFG, "mup", n, tmp_path)
    rec = recipe("adamw", "mup", CFG, tmp_path)
    hp = rec.hparams(n, 2, lr=2.0**-5, weight_decay=0.1)
    names = {id(p): name for name, p in model.named_parameters()}
    seen = set()
    for g in opts[0].param_groups:
        for p in g["params"]:
            role = rec.module.classify(names[id(p)], p)
            assert g["weight_decay"] == pytest.approx(hp[role]["weight_decay"], rel=1e-12), role
            seen.add(role)
    assert hp["hidden_weight"]["weight_decay"] > 0 and "hidden_weight" in seen


def test_the_model_is_in_the_run_key_only_when_it_is_the_llama():
    assert "model" not in SweepConfig().settings()  # the GPT's committed keys stay
    assert CFG.settings()["model"] == "llama" and CFG.init_stds is None


def test_cli_refuses_the_gpts_experts_on_the_llama(tmp_path: Path, capsys):
    from spectral.cli import main

    rc = main(["sweep", "--out", str(tmp_path / "o"), "--model", "llama", "--experts", "4", "--estimate"])
    assert rc == 2 and "--experts is the GPT's mixture of experts: not with --model llama" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_init_scale_by_default_leaves_the_norm_gains(tmp_path: Path):
    """Keyed as the GPT's init stds are: ``default`` reaches every weight role, a norm gain
    (a bias role) only by its own name."""
    plain, _ = _built(CFG, "mup", BASE, tmp_path / "a")
    scaled, _ = _built(replace(CFG, init_scale={"default": 2.0}), "mup", BASE, tmp_path / "b")
    for (name, p), (_, q) in zip(plain.named_parameters(), scaled.named_parameters(), strict=True):
        assert torch.equal(q, p if "norm" in name else p * 2.0), name
