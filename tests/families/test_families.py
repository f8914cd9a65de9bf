"""Family adapters that know the maths, measured on the real forward pass.

Names alone take Gemma and Gemma2 for Llama: Gemma multiplies the embedding output by
sqrt(hidden_size) and its norms compute x_hat * (1 + w); Gemma2 (and Gemma3, OLMo2) put a
norm after o_proj / down_proj, which normalises a multiplier placed there away. Each test
builds the real ``transformers`` class from a tiny config (nothing downloaded), applies
``apply_multipliers`` + ``init_`` and measures with forward hooks:

* h_0 (the first layer's input) has the same RMS at widths 64 and 256;
* with every other branch's last matrix zeroed, a branch's contribution to the residual
  stream (h_L - h_0) halves when the hidden multiplier does;
* every norm's effective gain (output / normalised input) is 1.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from torch import nn  # noqa: E402

from spectral.codegen import load_generated  # noqa: E402
from spectral.engine.ties import tie_differences  # noqa: E402

transformers.logging.set_verbosity_error()
pytestmark = [
    pytest.mark.generated,
    pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning"),
]

VOCAB = 128
HEAD_DIM = 16
BASE_WIDTH, BASE_DEPTH = 64, 2
INIT_STD = 0.02


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    folder = tmp_path_factory.mktemp("families")
    return load_generated("adamw", base_width=BASE_WIDTH, base_depth=BASE_DEPTH, folder=folder)


def _hf(config_cls: str, model_cls: str, **extra) -> Callable[[int, int], nn.Module]:
    def build(width: int, depth: int) -> nn.Module:
        config = getattr(transformers, config_cls)(
            vocab_size=VOCAB,
            hidden_size=width,
            intermediate_size=2 * width,
            num_hidden_layers=depth,
            num_attention_heads=width // HEAD_DIM,
            num_key_value_heads=width // HEAD_DIM,
            head_dim=HEAD_DIM,
            max_position_embeddings=32,
            tie_word_embeddings=False,
            use_cache=False,
            attn_implementation="eager",
            **extra,
        )
        return getattr(transformers, model_cls)(config).eval()

    return build


NO_SOFTCAP = {"final_logit_softcapping": None, "attn_logit_softcapping": None}
BUILD = {
    "llama": _hf("LlamaConfig", "LlamaForCausalLM"),
    "gemma": _hf("GemmaConfig", "GemmaForCausalLM"),
    "gemma2": _hf("Gemma2Config", "Gemma2ForCausalLM", **NO_SOFTCAP),
    "gemma3": _hf("Gemma3TextConfig", "Gemma3ForCausalLM"),
    "olmo2": _hf("Olmo2Config", "Olmo2ForCausalLM"),
}
DONE_WHEN = ("llama", "gemma", "gemma2")  # the issue's; Gemma3 and OLMo2 alongside


def tokens() -> torch.Tensor:
    return torch.randint(0, VOCAB, (2, 12), generator=torch.Generator().manual_seed(1))


def prepared(
    cfg, family: str, width: int, depth: int, adapter=None, hidden: float = 1.0
) -> nn.Module:
    torch.manual_seed(0)
    model = BUILD[family](width, depth)
    cfg.apply_multipliers(model, width, depth, adapter=adapter, multiplier={"hidden": hidden})
    cfg.init_(model, width, depth, INIT_STD, adapter=adapter)
    return model


def stream(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(h_0, h_L): the first layer's input and the final norm's input, on a real forward."""
    got: dict[str, torch.Tensor] = {}

    def catch(key: str):
        def hook(module, args, kwargs):
            got[key] = (args[0] if args else kwargs["hidden_states"]).detach().clone()

        return hook

    handles = [
        model.model.layers[0].register_forward_pre_hook(catch("h0"), with_kwargs=True),
        model.model.norm.register_forward_pre_hook(catch("hL"), with_kwargs=True),
    ]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for handle in handles:
            handle.remove()
    return got["h0"], got["hL"]


def rms(t: torch.Tensor) -> float:
    return t.float().pow(2).mean().sqrt().item()


def branch_ends(model: nn.Module) -> list[nn.Linear]:
    """The last matrix of every residual branch, in order (o_proj, down_proj per layer)."""
    return [m for layer in model.model.layers for m in (layer.self_attn.o_proj, layer.mlp.down_proj)]


def contributions(model: nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    """Each branch's contribution h_L - h_0, alone: every other branch's last matrix zeroed
    (so each branch reads h_0, whatever the multipliers), on the real forward pass."""
    ends = branch_ends(model)
    saved = [end.weight.detach().clone() for end in ends]
    out = []
    try:
        for keep in range(len(ends)):
            with torch.no_grad():
                for i, end in enumerate(ends):
                    end.weight.copy_(saved[i] if i == keep else torch.zeros_like(saved[i]))
            h0, hL = stream(model, x)
            out.append(hL - h0)
    finally:
        with torch.no_grad():
            for end, weight in zip(ends, saved, strict=True):
                end.weight.copy_(weight)
    return out


def norm_gains(model: nn.Module, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every RMS norm's effective gain: its output over its RMS-normalised input (with the
    module's own eps), per feature, measured on the real forward pass."""
    gains: dict[str, torch.Tensor] = {}

    def catch(name: str):
        def hook(module, args, output):
            h = args[0].float()
            eps = getattr(module, "variance_epsilon", getattr(module, "eps", 0.0))
            normalised = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
            ratio = (output.float() / normalised).reshape(-1, h.shape[-1])
            gains[name] = ratio.median(dim=0).values

        return hook

    handles = [  # prepend: the norm's own output, before a multiplier hook scales it
        module.register_forward_hook(catch(name), prepend=True)
        for name, module in model.named_modules()
        if type(module).__name__.endswith("RMSNorm")
    ]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for handle in handles:
            handle.remove()
    return gains


# ------------------------------------------------------------------------------------
# the "done when": Gemma, Gemma2 and Llama at widths 64 and 256, depths 2 and 4
# ------------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [2, 4])
@pytest.mark.parametrize("family", [*DONE_WHEN, "gemma3", "olmo2"])
def test_h0_rms_is_the_same_at_every_width(cfg, family, depth):
    x = tokens()
    got = {w: rms(stream(prepared(cfg, family, w, depth), x)[0]) for w in (64, 256)}
    assert got[256] == pytest.approx(got[64], rel=0.05)
    assert got[64] == pytest.approx(INIT_STD * cfg.multipliers(64, depth)["input"], rel=0.05)


@pytest.mark.parametrize("size", [(64, 2), (256, 4)])
@pytest.mark.parametrize("family", [*DONE_WHEN, "gemma3", "olmo2"])
def test_halving_the_hidden_multiplier_halves_every_branch(cfg, family, size):
    width, depth = size
    x = tokens()
    full = contributions(prepared(cfg, family, width, depth), x)
    half = contributions(prepared(cfg, family, width, depth, hidden=0.5), x)
    assert len(full) == 2 * depth
    for i, (a, b) in enumerate(zip(full, half, strict=True)):
        assert rms(a) > 0, i
        # exact but for rounding: h_L - h_0 cancels most of h_0's digits
        torch.testing.assert_close(b, 0.5 * a, rtol=1e-4, atol=1e-3 * rms(a), msg=f"branch {i}")


@pytest.mark.parametrize("size", [(64, 2), (256, 4)])
@pytest.mark.parametrize("family", [*DONE_WHEN, "gemma3", "olmo2"])
def test_effective_norm_gains_are_one(cfg, family, size):
    width, depth = size
    gains = norm_gains(prepared(cfg, family, width, depth), tokens())
    per_layer = 4 if family in ("gemma2", "gemma3") else 2
    assert len(gains) >= per_layer * depth + 1  # every layer's norms and the final one
    for name, gain in gains.items():
        torch.testing.assert_close(gain, torch.ones_like(gain), rtol=0, atol=1e-3, msg=name)


# ------------------------------------------------------------------------------------
# what the measurements catch: the Llama adapter on Gemma models
# ------------------------------------------------------------------------------------


def test_llama_adapter_on_gemma_grows_h0_and_doubles_the_gains(cfg):
    """The issue's numbers: with Llama's adapter, Gemma's h_0 grows as sqrt(n) (0.160 at
    width 64, 0.320 at 256) and every norm's effective gain is 2."""
    x = tokens()
    h0 = {w: rms(stream(prepared(cfg, "gemma", w, 2, adapter="llama"), x)[0]) for w in (64, 256)}
    assert h0[64] == pytest.approx(INIT_STD * 64**0.5, rel=0.05)
    assert h0[256] == pytest.approx(INIT_STD * 256**0.5, rel=0.05)
    gains = norm_gains(prepared(cfg, "gemma", 64, 2, adapter="llama"), x)
    for name, gain in gains.items():
        torch.testing.assert_close(gain, torch.full_like(gain, 2.0), rtol=0, atol=2e-3, msg=name)


def test_llama_adapter_on_gemma2_loses_the_hidden_multiplier(cfg):
    """With alpha_hidden on o_proj / down_proj, Gemma2's post-norms normalise it away: the
    branch contributions do not move when the hidden multiplier is halved."""
    x = tokens()
    full = contributions(prepared(cfg, "gemma2", 64, 2, adapter="llama"), x)
    half = contributions(prepared(cfg, "gemma2", 64, 2, adapter="llama", hidden=0.5), x)
    for a, b in zip(full, half, strict=True):
        assert rms(b) / rms(a) == pytest.approx(1.0, abs=0.05)  # 0.5 where it is placed right


# ------------------------------------------------------------------------------------
# what the adapters read from the model, and what they refuse
# ------------------------------------------------------------------------------------


def test_gemma_scale_is_read_from_the_model(cfg):
    """The alpha_in hook divides out the embedding module's own factor: sqrt(hidden_size)."""
    model = prepared(cfg, "gemma", 256, 2)
    [hook] = model.model.embed_tokens._forward_hooks.values()
    assert hook.built_in == pytest.approx(16.0)
    assert hook.factor == cfg.multipliers(256, 2)["input"]  # alpha_in itself
    assert torch.equal(model.model.layers[0].input_layernorm.weight, torch.zeros(256))
    opt = cfg.build_optimizers(model, 256, 2, lr=1e-3)
    assert cfg.check(model, 256, 2, opt) == []


def test_gemma_scale_missing_is_named(cfg):
    model = BUILD["gemma"](64, 2)
    del model.model.embed_tokens.scalar_embed_scale
    del model.model.embed_tokens.embed_scale
    with pytest.raises(ValueError, match=r"gemma adapter expects the input module model\.embed_tokens"):
        cfg.apply_multipliers(model, 64, 2)


def test_an_adapters_refused_flag_is_named(cfg):
    """Adapter.refuse: a config flag the rules do not cover is refused in one line, by
    every call (no built-in family needs it since Gemma2's soft-capping and Falcon's
    ALiBi were measured flat: tests/families/test_model_classes.py)."""
    ADAPTERS = cfg.ADAPTERS  # the config's own (the --vendor form holds its own Adapter class)

    [gemma2] = [a for a in ADAPTERS if a.name == "gemma2"]
    strict = gemma2._replace(refuse=(("final_logit_softcapping", "caps the logits"),))
    model = _hf("Gemma2Config", "Gemma2ForCausalLM")(64, 2)
    message = r"gemma2: final_logit_softcapping=30.0 caps the logits; set .*=None in the model"
    with pytest.raises(ValueError, match=message):
        cfg.apply_multipliers(model, 64, 2, adapter=strict)
    with pytest.raises(ValueError, match=message):
        cfg.init_(model, 64, 2, adapter=strict)
    [problem] = cfg.check(model, 64, 2, adapter=strict)
    assert problem.startswith("gemma2: final_logit_softcapping=30.0 caps")


def test_tied_gemma_is_accepted_where_the_rules_allow_ties(cfg):
    """Gemma ties its embeddings by default: the rules of this config allow the tie (its
    input and output weights differ in the multiplier only, applied on the logits), so the
    tied model is set up and checks clean (tests/torch/test_ties_runtime.py: where they do not)."""
    assert tie_differences(cfg.CONFIG) == []
    model = BUILD["gemma"](128, 2)
    model.config.tie_word_embeddings = True
    model.tie_weights()
    cfg.apply_multipliers(model, 128, 2)
    cfg.init_(model, 128, 2)
    opt = cfg.build_optimizers(model, 128, 2, lr=1e-3)
    assert cfg.check(model, 128, 2, opt) == []
