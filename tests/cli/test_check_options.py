"""``spectral check --seeds N --patterns REGEX=ROLE`` (issue 36): passed on as check()'s seeds=
and patterns=, bad values refused in one line; the twins' note on stderr; advice naming the
option. And patterns= given once to a model is remembered by check() (spectral.torch.model
.placement)."""

from __future__ import annotations

import json
import warnings

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from spectral.cli import main  # noqa: E402
from spectral.torch.check.verdict import WidthReport  # noqa: E402


@pytest.fixture
def config_file(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(
        json.dumps(
            {
                "model_type": "llama",
                "architectures": ["LlamaForCausalLM"],
                "vocab_size": 64,
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_key_value_heads": 4,
            }
        )
    )
    return str(path)


@pytest.fixture
def seen(monkeypatch):
    """check_widths replaced: what the command passed, a note warned, one line found."""
    import spectral.torch.config as widths

    calls: dict = {}

    def fake(rules, model, sizes, **kw):
        calls.update(kw)
        warnings.warn("the twins have a head per 8 of the width", UserWarning, stacklevel=2)
        line = (
            "model.layers.N.mlp.up_proj (hidden_weight): ...; give it another role (patterns={...})"
        )
        return WidthReport(sizes, [], [line])

    monkeypatch.setattr(widths, "check_widths", fake)
    return calls


@pytest.mark.slow  # the generated config and the meta model built: ~10 s under load
def test_seeds_and_patterns_reach_the_check(config_file, seen, capsys):
    code = main(
        [
            "check",
            "adamw",
            "--hf-config",
            config_file,
            "--seeds",
            "3",
            "--patterns",
            r"mlp\.up_proj\.weight$=hidden_weight",
            "--patterns",
            "lm_head=output_weight",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 1
    assert seen["seeds"] == 3
    assert seen["patterns"] == [
        (r"mlp\.up_proj\.weight$", "hidden_weight"),
        ("lm_head", "output_weight"),
    ]
    assert "note: the twins have a head per 8 of the width\n" in err
    assert "give it another role (--patterns REGEX=ROLE)" in out and "patterns={" not in out


@pytest.mark.parametrize(
    "option,message",
    [
        (["--patterns", "up_proj"], "argument --patterns: expected REGEX=ROLE, got 'up_proj'"),
        (["--patterns", "(=hidden_weight"], "argument --patterns: '(' does not compile: "),
        (["--patterns", "x=hidden_wieght"], "pattern 'x' maps to unknown role 'hidden_wieght'"),
        (["--seeds", "0"], "argument --seeds: expected an integer from 1 to 1000, got 0"),
    ],
)
def test_bad_values_are_one_line(config_file, option, message, capsys):
    code = main(["check", "adamw", "--hf-config", config_file, *option])
    _, err = capsys.readouterr()
    assert code == 2 and "Traceback" not in err
    [line] = [ln for ln in err.splitlines() if "error:" in ln]
    assert message in line


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_patterns_given_once_are_remembered(tmp_path):
    """patterns= to apply_multipliers (the first call) places GPT-OSS's sinks and expert
    biases; check() without patterns= reads the model the same way: nothing unplaced."""
    from spectral.codegen import load_generated

    cfg = load_generated("adamw", None, 2, base_width=64, base_depth=2, folder=tmp_path)
    with torch.device("meta"):
        model = transformers.GptOssForCausalLM(
            transformers.GptOssConfig(
                vocab_size=64,
                hidden_size=64,
                intermediate_size=64,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=4,
                head_dim=16,
                num_local_experts=4,
                num_experts_per_tok=2,
                tie_word_embeddings=False,
            )
        )
    unplaced = cfg.check(model, 64, 2, measure=False)
    assert unplaced and "match no role pattern" in unplaced[0]
    patterns = {r"self_attn\.sinks$": "hidden_bias", r"experts\.\w+_bias$": "hidden_bias"}
    cfg.apply_multipliers(model, 64, 2, patterns=patterns)
    assert cfg.check(model, 64, 2, measure=False) == []
