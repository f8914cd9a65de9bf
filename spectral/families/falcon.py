"""The ``falcon`` family: Hugging Face Falcon (parallel attention/MLP, or sequential)."""

from __future__ import annotations

from spectral.families.adapter import make_adapter

__all__ = ["FALCON"]

FALCON = make_adapter(
    name="falcon",  # Hugging Face Falcon (parallel attention/MLP, or sequential)
    detect=r"h\.\d+\.self_attention\.dense$",
    roles=(
        (r"word_embeddings\.weight$", "input_weight"),
        # input_layernorm, post_attention_layernorm, ln_attn / ln_mlp (new architecture)
        (r"h\.\d+\.(\w*layernorm|ln_attn|ln_mlp)\.(weight|bias)$", "hidden_bias"),
        (r"h\.\d+\.(self_attention|mlp)\.\w+\.weight$", "hidden_weight"),
        (r"h\.\d+\.(self_attention|mlp)\.\w+\.bias$", "hidden_bias"),
        (r"ln_f\.(weight|bias)$", "input_bias"),
        (r"lm_head\.weight$", "output_weight"),
    ),
    input=(r"word_embeddings$",),
    # parallel_attn: h + attn(ln(h)) + mlp(ln(h)), two branches per layer as in GPT-NeoX
    branches=(
        r"h\.\d+\.self_attention\.dense$",
        r"h\.\d+\.mlp\.dense_4h_to_h$",
    ),
    output=(r"lm_head$",),
    final=r"ln_f$",
)
