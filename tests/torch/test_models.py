"""Reference models: shapes, multipliers, hidden output, parameter names."""

import math

import pytest

torch = pytest.importorskip("torch")

from spectral.models import GPT, ResidualMLP, resolve_multipliers  # noqa: E402


def test_mlp_forward_and_hidden():
    m = ResidualMLP(8, 3, 32, 4, k=3, multipliers={"input": 1.0, "hidden": 0.25, "output": 0.5})
    x = torch.randn(5, 8)
    out, h = m(x, return_hidden=True)
    assert out.shape == (5, 3) and h.shape == (5, 32)
    assert torch.allclose(out, m(x))
    names = {n for n, _ in m.named_parameters()}
    assert {"input.weight", "input.bias", "blocks.0.layers.2.weight", "output.weight"} <= names
    assert "output.bias" not in names


def test_mlp_multipliers_applied_in_forward():
    torch.manual_seed(0)
    m = ResidualMLP(4, 2, 16, 2, k=2, relu=False, bias=False)
    x = torch.randn(3, 4)
    ref = m(x)
    m.set_multipliers({"input": 1.0, "hidden": 1.0, "output": 2.0})
    assert torch.allclose(m(x), 2 * ref)
    m.set_multipliers({"input": 1.0, "hidden": 0.0, "output": 1.0})
    h0 = m.input(x)
    assert torch.allclose(m(x, return_hidden=True)[1], h0)


def test_gpt_forward_names_untied():
    g = GPT(128, 2, block_size=32)
    idx = torch.randint(0, 256, (2, 16))
    logits, h = g(idx, return_hidden=True)
    assert logits.shape == (2, 16, 256) and h.shape == (2, 16, 128)
    names = {n for n, _ in g.named_parameters()}
    for n in [
        "transformer.wte.weight",
        "transformer.wpe.weight",
        "transformer.h.1.ln_1.weight",
        "transformer.h.1.attn.c_attn.weight",
        "transformer.h.1.attn.c_proj.bias",
        "transformer.h.0.mlp.c_fc.weight",
        "transformer.ln_f.bias",
        "lm_head.weight",
    ]:
        assert n in names
    assert g.lm_head.weight.data_ptr() != g.transformer.wte.weight.data_ptr()
    assert g.transformer.h[0].attn.n_head == 2


def test_gpt_rejects_bad_width():
    with pytest.raises(ValueError, match="head_dim"):
        GPT(100, 2)


def test_resolve_multipliers_forms():
    assert resolve_multipliers(None, 512, 8) == {"input": 1.0, "hidden": 1.0, "output": 1.0}
    hp = {
        "input_weight": {"multiplier": 1.0},
        "hidden_weight": {"multiplier": 0.5},
        "output_weight": {"multiplier": 0.25},
    }
    assert resolve_multipliers(hp, 512, 8) == {"input": 1.0, "hidden": 0.5, "output": 0.25}

    class Cfg:
        BASE_WIDTH = 256
        BASE_DEPTH = 4
        RULES = {  # noqa: RUF012
            "input_weight": {"multiplier": (0.0, 0.0)},
            "hidden_weight": {"multiplier": (0.0, -1.0)},
            "output_weight": {"multiplier": (-1.0, 0.0)},
        }

    m = resolve_multipliers(Cfg, 1024, 16)
    assert m["input"] == 1.0 and math.isclose(m["hidden"], 0.25) and math.isclose(m["output"], 0.25)
    with pytest.raises(TypeError):
        resolve_multipliers(3.0, 1, 1)
