"""The check across widths (spectral.torch.check.widths, ``spectral check``) names the wrong module.

Hugging Face models are built from config objects (tiny, CPU, nothing downloaded); twins at
widths 64, 128, 256 with 2 layers, one step on 2 x 8 tokens. Each wrong setup below is one
the name-based check() passes: a fixed-rank projection treated as width by width
(DeepSeek-V3's latent ranks), a built-in divisor growing with the width (Granite's
logits_scaling), mixers init_ zeroed (Mamba), an output bias trained as input_bias, and
alpha_hidden hooked on the wrong modules (BERT). A correctly set-up Llama is the control.
"""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from torch import nn  # noqa: E402

from spectral.codegen import load_generated  # noqa: E402
from spectral.errors import ConfigError  # noqa: E402
from spectral.measure.fit import log_slope  # noqa: E402
from spectral.torch.check.twins import twin_config  # noqa: E402
from spectral.torch import check_widths  # noqa: E402
from spectral.torch.check.widths import (  # noqa: E402
    FAN_IN_GROWS,
    FAN_OUT_GROWS,
    STEP_EXPONENT,
)

WIDTHS = [64, 128, 256]
BASE = {"lr": 3e-3, "weight_decay": 0.1}
VOCAB = 256


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    folder = tmp_path_factory.mktemp("width_check")
    return load_generated("muon-kimi", "adamw", base_width=64, base_depth=2, folder=folder)


def llama(width: int) -> nn.Module:
    return transformers.LlamaForCausalLM(
        transformers.LlamaConfig(
            vocab_size=VOCAB,
            hidden_size=width,
            intermediate_size=2 * width,
            num_hidden_layers=2,
            num_attention_heads=width // 16,
            num_key_value_heads=width // 16,
            head_dim=16,
            tie_word_embeddings=False,
        )
    )


def rows_by_name(report):
    return {row.name: row for row in report.rows}


# --------------------------------------------------------------------------------------
# the pieces
# --------------------------------------------------------------------------------------


def test_slope_is_the_log_log_least_squares_fit():
    assert log_slope([64, 128, 256], [1.0, 0.5, 0.25]) == pytest.approx(-1.0)
    assert log_slope([64, 128, 256], [2.0, 2.0, 2.0]) == pytest.approx(0.0)
    assert log_slope([64, 128, 256], [0.0, 1.0, 1.0]) is None


def test_report_slopes_are_the_quantities_mup_keeps_flat():
    """h0 from the first input module at init, logits at init and their one-step change,
    each branch end's whole one-step change (its input's change included)."""
    from spectral.torch.check.widths import WidthReport, WidthRow

    def row(name, kind, init=(), step=(), total=()):
        return WidthRow(name, kind, "", init=list(init), step=list(step), total=list(total))

    report = WidthReport(
        [64, 128, 256],
        [
            row("embed", "input", init=[1.0, 1.0, 1.0]),
            row("pos", "input", init=[1.0, 2.0, 4.0]),
            row("layers.0.o", "branch", step=[9.0, 9.0, 9.0], total=[1.0, 0.5, 0.25]),
            row("layers.0.q", "linear", init=[1.0, 2.0, 4.0]),
            row("logits", "logits", init=[4.0, 2.0, 1.0], step=[1.0, 2.0, 4.0]),
        ],
        [],
    )
    assert report.slopes() == pytest.approx(
        {"h0": 0.0, "logits": -1.0, "dlogits": 1.0, "branch:layers.0.o": -1.0}
    )
    assert WidthReport([64, 128, 256], [], ["not measured"]).slopes() == {}


def test_role_dimensions_and_step_exponent_are_the_engines():
    """The runtime's copy of each weight role's dimensions is the engine's, and every
    condition term's target has width exponent STEP_EXPONENT."""
    from spectral.engine.conditions import generate
    from spectral.engine.roles import ALL_ROLES

    for role in ALL_ROLES:
        if role.name in FAN_IN_GROWS:
            assert FAN_IN_GROWS[role.name] == (role.n_in.exponents[0] > 0), role.name
            assert FAN_OUT_GROWS[role.name] == (role.n_out.exponents[0] > 0), role.name
    # hidden_vector is a vector (a bias's rules): no fan-in to check
    weights = {r.name for r in ALL_ROLES if not r.is_bias and r.name != "hidden_vector"}
    assert set(FAN_IN_GROWS) == weights
    for k in (1, 2, 3):
        targets = {Fraction(term.target.exponents[0]) for term in generate(k)}
        assert targets == {Fraction(STEP_EXPONENT)}


def test_twin_config_grows_width_intermediate_and_heads_only():
    config = transformers.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=128,
        intermediate_size=344,
        num_hidden_layers=32,
        num_attention_heads=8,
        num_key_value_heads=2,
        head_dim=16,
    )
    twin = twin_config(config, 256)
    assert (twin.hidden_size, twin.intermediate_size, twin.num_hidden_layers) == (256, 688, 2)
    assert (twin.num_attention_heads, twin.num_key_value_heads, twin.head_dim) == (16, 4, 16)
    assert twin.vocab_size == VOCAB and config.hidden_size == 128  # the original is kept
    with pytest.raises(ValueError, match="width 100 is not a whole number of heads"):
        twin_config(config, 100)


def test_says_what_it_did_not_measure(cfg):
    model = llama(64)
    cfg.apply_multipliers(model, 64, 2)

    def broken(width):
        raise RuntimeError(f"no model at {width}")

    [line] = check_widths(cfg.CONFIG, model, WIDTHS, factory=broken, base=BASE).problems
    assert line == (
        "check across widths did not measure the model at width 64 (RuntimeError: no model "
        "at 64)"
    )


def test_bad_arguments_raise_as_in_check(cfg):
    """A bad argument raises ConfigError from check() and check_widths() alike; only what
    is found on the model is a problem line."""
    model = llama(64)
    cfg.apply_multipliers(model, 64, 2)
    with pytest.raises(ConfigError, match=r"^check across widths did not measure: no base lr"):
        cfg.check(model, 64, 2, widths=WIDTHS, measure=False)
    with pytest.raises(
        ConfigError, match=r"^check across widths needs 3 or more widths, got \[64, 128\]$"
    ):
        check_widths(cfg.CONFIG, model, [64, 128], base=BASE)
    with pytest.raises(ConfigError, match=r"^widths must be whole numbers, got \['a'\]$"):
        check_widths(cfg.CONFIG, model, ["a"], base=BASE)
    calls = (
        lambda adapter: cfg.check(model, 64, 2, adapter=adapter, widths=WIDTHS, **BASE),
        lambda adapter: check_widths(cfg.CONFIG, model, WIDTHS, adapter=adapter, base=BASE),
    )
    for call in calls:
        with pytest.raises(ValueError, match="^no adapter 'nosuchfamily'; known: gpt2") as bad:
            call("nosuchfamily")
        assert isinstance(bad.value, ConfigError)
        with pytest.raises(TypeError, match="^adapter must be an Adapter") as bad:
            call(3)
        assert isinstance(bad.value, ConfigError)


@pytest.mark.slow  # trains twins over seeds: seconds on the 2-core CPU
def test_seeds_pool_the_draws_before_the_fit(cfg, monkeypatch):
    """seeds=2: every value is the mean of the twins drawn with init seeds 0 and 1, the
    same twins that seeds=1 draws with SEED 0 and with SEED 1."""
    import spectral.torch.check.widths as width_check

    widths = [32, 48, 64]

    def tiny(width):
        return transformers.LlamaForCausalLM(
            transformers.LlamaConfig(
                vocab_size=64, hidden_size=width, intermediate_size=width,
                num_hidden_layers=1, num_attention_heads=width // 16,
                num_key_value_heads=width // 16, head_dim=16, tie_word_embeddings=False,
            )
        )

    ids = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(5))
    batch = {"input_ids": ids, "labels": ids}  # not drawn from SEED, unlike the default batch

    def run(**kw):
        report = check_widths(
            cfg.CONFIG, tiny(32), widths, factory=tiny, base=BASE, example_input=batch, **kw
        )
        return rows_by_name(report)

    pooled = run(seeds=2)
    alone = [run()]
    monkeypatch.setattr(width_check, "SEED", 1)
    alone.append(run())
    for name, row in pooled.items():
        for field in ("init", "step"):
            first, second = getattr(alone[0][name], field), getattr(alone[1][name], field)
            want = [(a + b) / 2 for a, b in zip(first, second, strict=True)]
            assert getattr(row, field) == pytest.approx(want, rel=1e-9, abs=1e-12), (name, field)
    assert pooled["logits"].step != alone[0]["logits"].step  # two different draws
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ConfigError) as raised:
            check_widths(cfg.CONFIG, tiny(32), widths, factory=tiny, base=BASE, seeds=bad)
        assert str(raised.value) == f"seeds must be a whole number from 1 to 1000, got {bad!r}"
        wrong_type = isinstance(bad, bool) or not isinstance(bad, int)
        assert isinstance(raised.value, TypeError if wrong_type else ValueError)


# --------------------------------------------------------------------------------------
# the control: a Llama set up the documented way
# --------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.generated
def test_llama_control_passes_with_flat_slopes(cfg):
    model = llama(128)
    cfg.apply_multipliers(model, 128, 2)
    cfg.init_(model, 128, 2)
    opt = cfg.build_optimizers(model, 128, 2, **BASE)
    assert cfg.check(model, 128, 2, opt, widths=WIDTHS) == []
    report = check_widths(cfg.CONFIG, model, WIDTHS, base=BASE)
    assert report.problems == []
    rows = rows_by_name(report)
    assert {"model.embed_tokens", "lm_head", "logits", "model.layers.1.mlp.down_proj"} <= set(
        rows
    )
    for row in report.rows:
        assert abs(row.init_slope - row.init_predicted) <= 0.15, row
        assert abs(row.step_slope - row.step_predicted) <= 0.15, row
        if row.kind != "logits":
            assert row.step_predicted == 0.0
    assert rows["lm_head"].init_predicted == -0.5  # a random readout: not aligned with h_L
    assert rows["model.embed_tokens"].init_predicted == 0.0


# --------------------------------------------------------------------------------------
# five wrong setups, each named
# --------------------------------------------------------------------------------------


def deepseek_v3(width: int) -> nn.Module:
    """Real, fixed latent ranks (kv_lora_rank, q_lora_rank do not grow with the width)."""
    return transformers.DeepseekV3ForCausalLM(
        transformers.DeepseekV3Config(
            vocab_size=VOCAB,
            hidden_size=width,
            intermediate_size=2 * width,
            moe_intermediate_size=width // 2,
            num_hidden_layers=2,
            num_attention_heads=width // 16,
            num_key_value_heads=width // 16,
            kv_lora_rank=32,
            q_lora_rank=48,
            qk_rope_head_dim=8,
            qk_nope_head_dim=16,
            v_head_dim=16,
            n_routed_experts=4,
            num_experts_per_tok=2,
            n_group=1,
            topk_group=1,
            first_k_dense_replace=1,
            tie_word_embeddings=False,
            max_position_embeddings=64,
        )
    )


@pytest.mark.slow
def test_deepseek_v3_fixed_ranks_under_name_only_roles(cfg):
    """The name-only roles (q_a_proj, kv_b_proj, ... as width x width hidden matrices) are
    no longer reachable: the shapes read from the twins place the fixed-rank factors, even
    against patterns=, and a config without those roles is named, with the fix, before
    anything is measured (before issue 26 the slopes showed it: kv_b_proj's one-step change
    fell as n^-0.5)."""
    forced = {r"self_attn\.(q_a_proj|q_b_proj|kv_a_proj_with_mqa|kv_b_proj)\.weight$": "hidden_weight"}
    report = check_widths(cfg.CONFIG, deepseek_v3(128), WIDTHS, base=BASE, patterns=forced)
    [line] = report.problems
    assert line.startswith("check across widths did not measure the model at width 64")
    # read by q_a_layernorm: the normed rank-down role (issue 47 item 6)
    assert "'model.layers.0.self_attn.q_a_proj.weight' has role normed_rank_down_weight" in line
    assert "regenerate it with --all-roles" in line


def granite(width: int, logits_scaling: float) -> nn.Module:
    return transformers.GraniteForCausalLM(
        transformers.GraniteConfig(
            vocab_size=VOCAB,
            hidden_size=width,
            intermediate_size=2 * width,
            num_hidden_layers=2,
            num_attention_heads=width // 16,
            num_key_value_heads=width // 16,
            tie_word_embeddings=False,
            logits_scaling=logits_scaling,
        )
    )


@pytest.mark.slow
def test_granite_logits_scaling_growing_with_the_width(cfg):
    """logits_scaling = 8 r_n divides the logits after lm_head, stacked on alpha_out."""
    # hooked as a Llama: the granite adapter divides logits_scaling out (test_model_classes)
    report = check_widths(
        cfg.CONFIG,
        granite(64, 8.0),
        WIDTHS,
        factory=lambda width: granite(width, 8.0 * width / 64),
        adapter="llama",
        base=BASE,
    )
    rows = rows_by_name(report)
    assert rows["logits"].init_slope == pytest.approx(-1.5, abs=0.05)
    assert rows["lm_head"].init_slope == pytest.approx(-0.5, abs=0.05)
    [line] = [line for line in report.problems if line.startswith("logits")]
    assert line.startswith("logits (output_weight): output at init ~ n^-1.50 (rules: n^-0.5)")
    assert line.endswith(
        "the readout module itself is on its rules, so something after it scales the logits "
        "with the width (a built-in divisor such as Granite's logits_scaling); keep it "
        "constant across widths or divide it out"
    )
    assert report.problems == [line]  # lm_head and the rest are on their rules


MAMBA_ADAPTER = {
    # the adapter route: conv1d's depthwise kernel (3-D), A_log and D can only take a bias
    # role, which init_ starts at 0
    "input": r"(^|\.)embeddings$",
    "branches": r"(^|\.)layers\.\d+\.mixer$",
    "output": r"(^|\.)lm_head$",
    "final": r"(^|\.)norm_f$",
    "branches_per_layer": 1,
    "roles": {
        r"(^|\.)embeddings\.weight$": "input_weight",
        r"(^|\.)layers\.\d+\.norm\.weight$": "hidden_bias",
        r"(^|\.)mixer\.(in_proj|x_proj|dt_proj|out_proj)\.weight$": "hidden_weight",
        r"(^|\.)mixer\.(conv1d\.weight|conv1d\.bias|dt_proj\.bias|A_log|D)$": "hidden_bias",
        r"(^|\.)norm_f\.weight$": "input_bias",
        r"(^|\.)lm_head\.weight$": "output_weight",
    },
}


@pytest.mark.slow
def test_mamba_mixers_zeroed_by_init_are_dead(cfg, tmp_path_factory):
    model = transformers.MambaForCausalLM(
        transformers.MambaConfig(
            vocab_size=VOCAB,
            hidden_size=64,
            intermediate_size=128,
            state_size=8,
            num_hidden_layers=2,
            time_step_rank=8,
            tie_word_embeddings=False,
        )
    )
    # init_ no longer zeroes them (it keeps what it has no rule for): zeroed here, as the
    # name-only route did before issue 26; the fixed-rank x_proj needs the --all-roles config
    def zeroed(width: int) -> nn.Module:
        twin = type(model)(twin_config(model.config, width))
        with torch.no_grad():
            for name, p in twin.named_parameters():
                if name.endswith(("A_log", "mixer.D", "conv1d.weight")):
                    p.zero_()
        return twin

    every = load_generated(
        "muon-kimi", "adamw", base_width=64, base_depth=2, all_roles=True,
        folder=tmp_path_factory.mktemp("width_check_all"),
    )
    report = check_widths(
        every.CONFIG, model, WIDTHS, factory=zeroed, adapter=MAMBA_ADAPTER, base=BASE
    )
    assert report.problems[0].startswith(
        "backbone.layers.N.mixer (branch end, 2 modules): outputs exactly 0 at init and after "
        "one step at widths 64, 128, 256: dead; A_log, D, conv1d.weight are all 0"
    )
    assert rows_by_name(report)["backbone.layers.1.mixer"].dead


PHI_ADAPTER = {
    "input": r"(^|\.)embed_tokens$",
    "branches": [r"(^|\.)layers\.\d+\.self_attn\.dense$", r"(^|\.)layers\.\d+\.mlp\.fc2$"],
    "output": r"(^|\.)lm_head$",
    "roles": {
        r"(^|\.)embed_tokens\.weight$": "input_weight",
        r"(^|\.)layers\.\d+\.input_layernorm\.(weight|bias)$": "hidden_bias",
        r"(^|\.)layers\.\d+\.(self_attn|mlp)\.\w+\.weight$": "hidden_weight",
        r"(^|\.)layers\.\d+\.(self_attn|mlp)\.\w+\.bias$": "hidden_bias",
        r"(^|\.)final_layernorm\.(weight|bias)$": "input_bias",
        r"(^|\.)lm_head\.weight$": "output_weight",
        r"(^|\.)lm_head\.bias$": "input_bias",  # the mistake: an output bias has no such role
    },
}


@pytest.mark.slow
def test_output_bias_trained_as_input_bias(cfg):
    """Phi-2's biased head: alpha_out scales lm_head.bias's effect on the logits, which
    input_bias's learning rate does not undo: it shrinks as 1/n."""
    model = transformers.PhiForCausalLM(
        transformers.PhiConfig(
            vocab_size=VOCAB,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=4,
            tie_word_embeddings=False,
        )
    )
    report = check_widths(cfg.CONFIG, model, WIDTHS, adapter=PHI_ADAPTER, base=BASE)
    bias = rows_by_name(report)["lm_head.bias"]
    assert bias.step_slope == pytest.approx(-1.0, abs=0.02)
    assert (
        "lm_head.bias (input_bias): its effect's one-step change ~ n^-1.00 (rules: n^0); its "
        "effect is scaled by its module's multiplier, which role input_bias's learning rate "
        "does not undo (an output bias after alpha_out): give it a role of its own"
    ) in report.problems


def bert(width: int) -> nn.Module:
    model = transformers.BertForMaskedLM(
        transformers.BertConfig(
            vocab_size=VOCAB,
            hidden_size=width,
            intermediate_size=2 * width,
            num_hidden_layers=2,
            num_attention_heads=width // 16,
            max_position_embeddings=64,
            tie_word_embeddings=False,
        )
    )
    for p in model.cls.predictions.parameters():  # no output-bias role here: frozen
        if p.ndim == 1 and p.shape[0] == VOCAB:
            p.requires_grad_(False)
    return model


def bert_adapter(branches: list[str]) -> dict:
    return {
        "input": r"(^|\.)bert\.embeddings$",
        "branches": branches,
        "output": r"(^|\.)predictions\.decoder$",
        "roles": {
            r"(^|\.)layer\.\d+\..*LayerNorm\.(weight|bias)$": "hidden_bias",
            r"(^|\.)embeddings\.\w+_embeddings\.weight$": "input_weight",
            r"(^|\.)embeddings\.LayerNorm\.(weight|bias)$": "input_bias",
            r"(^|\.)layer\.\d+\..*\.weight$": "hidden_weight",
            r"(^|\.)layer\.\d+\..*\.bias$": "hidden_bias",
            r"(^|\.)transform\.dense\.weight$": "hidden_weight",
            r"(^|\.)transform\..*(bias|LayerNorm\.weight)$": "input_bias",
            r"(^|\.)decoder\.weight$": "output_weight",
            r"(^|\.)predictions\.(decoder\.)?bias$": "input_bias",
        },
    }


@pytest.mark.slow
def test_bert_with_alpha_hidden_on_the_wrong_modules(cfg):
    wrong = bert_adapter(
        [r"(^|\.)layer\.\d+\.attention\.self\.query$", r"(^|\.)layer\.\d+\.intermediate\.dense$"]
    )
    model = bert(64)
    # the embeddings module is BERT's input: the name-only check runs no forward pass
    report = check_widths(cfg.CONFIG, model, WIDTHS, factory=bert, adapter=wrong, base=BASE)
    assert (
        "bert.encoder.layer.0.intermediate.dense: hooked as a branch end (alpha_hidden), but "
        "its output has 128 features at width 64, not the residual stream's 64: alpha_hidden "
        "belongs on the last module before the residual addition (the adapter's branches)"
    ) in report.problems
    assert any(
        line.startswith(
            "at width 128: bert.encoder.layer.0.attention.self.query: halving alpha_hidden "
            "moved bert.encoder.layer.0's output by"
        )
        for line in report.problems
    )
    right = bert_adapter(
        [r"(^|\.)layer\.\d+\.attention\.output\.dense$", r"(^|\.)layer\.\d+\.output\.dense$"]
    )
    report = check_widths(cfg.CONFIG, model, WIDTHS, factory=bert, adapter=right, base=BASE)
    assert not any("query" in line or "intermediate" in line for line in report.problems)


# --------------------------------------------------------------------------------------
# spectral check
# --------------------------------------------------------------------------------------


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_check_command_parses_without_torch():
    code = (
        "import sys\n"
        "from spectral.cli import build_parser\n"
        "args = build_parser().parse_args(['check', 'adamw', '--hf-config', 'x.json'])\n"
        "assert args.widths == (64, 128, 256)\n"
        "sys.stderr.write('TORCH=' + str('torch' in sys.modules))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stderr.endswith("TORCH=False"), p.stderr


@pytest.mark.slow
def test_check_command_on_a_config_file_and_a_factory(tmp_path, monkeypatch, capsys):
    """spectral check on a config.json and on a factory file, in this process (the command's
    main(); test_check_command_parses_without_torch starts a new one): a new process would
    import torch and transformers again, twice (most of this test's time)."""
    from spectral.cli import main

    config = llama(128).config.to_dict()
    config["architectures"] = ["LlamaForCausalLM"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "models.py").write_text(
        "from transformers import GraniteConfig, GraniteForCausalLM\n\n"
        "from spectral.families import ADAPTERS\n\n"
        "# hooked as a Llama: the granite adapter would divide logits_scaling out\n"
        "LLAMA = next(a for a in ADAPTERS if a.name == 'llama')\n\n\n"
        "def granite(width):\n"
        "    return GraniteForCausalLM(GraniteConfig(\n"
        "        vocab_size=256, hidden_size=width, intermediate_size=2 * width,\n"
        "        num_hidden_layers=2, num_attention_heads=width // 16,\n"
        "        num_key_value_heads=width // 16, tie_word_embeddings=False,\n"
        "        logits_scaling=8.0 * width / 64))\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    spectral = ["check", "muon-kimi", "--others", "adamw"]
    assert main([*spectral, "--hf-config", "config.json"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "every module within ±0.2 of its rules at widths 64,128,256" in out
    assert "model.layers.1.mlp.down_proj" in out
    code = main([*spectral, "--model-factory", "models.py:granite", "--adapter", "models.py:LLAMA"])
    out, err = capsys.readouterr()
    assert code == 1, err
    assert "\nlogits (output_weight): output at init ~ n^-1.50 (rules: n^-0.5)" in out


def test_twin_step_per_parameter_equals_one_step_and_drops_the_state(cfg, monkeypatch):
    """step_once (issue 36's memory: one parameter's state at a time) moves every parameter
    exactly as one opt.step() with Muon's Newton-Schulz in float32 does (what it runs on a
    CPU; torch's bfloat16 iteration moves the hidden matrices otherwise), and leaves no
    optimizer state or gradient behind."""
    import torch.optim._muon as muon
    from float32_muon import newton_schulz_float32

    from spectral.torch.check.twin_rows import step_once

    def float32_step(opt):
        with monkeypatch.context() as m:
            m.setattr(muon, "_zeropower_via_newtonschulz", newton_schulz_float32)
            opt.step()

    moved = []
    for step in (lambda opt: opt.step(), float32_step, step_once):
        torch.manual_seed(0)
        model = llama(64)
        cfg.CONFIG.apply_multipliers(model, 64, 2)
        opt = cfg.CONFIG.build_optimizers(model, 64, 2, lr=3e-2, weight_decay=0.1)
        ids = torch.randint(0, VOCAB, (2, 8))
        model(input_ids=ids, labels=ids).loss.backward()
        before = [p.detach().clone() for p in model.parameters()]
        step(opt)
        moved.append([p.detach() - b for p, b in zip(model.parameters(), before, strict=True)])
        states = sum(len(part.state) for part in opt.parts.values())
        grads = sum(p.grad is not None for p in model.parameters())
        assert (states, grads) == ((0, 0) if step is step_once else (21, 21))
    bfloat16, whole, each = moved
    assert len(whole) == 21 and all(bool(d.abs().sum() > 0) for d in whole)
    assert all(torch.equal(a, b) for a, b in zip(whole, each, strict=True))
    assert sum(not torch.equal(a, b) for a, b in zip(bfloat16, each, strict=True)) == 14
    assert muon._zeropower_via_newtonschulz is not newton_schulz_float32  # put back
