"""The ``phi`` family: the phi family."""

from __future__ import annotations

from spectral.families.adapter import make_adapter

__all__ = ["PHI"]

# Phi-2 (Hugging Face Phi): attention and MLP in parallel on one norm (two branch ends per
# layer), biases everywhere, and a bias on the readout: output_bias.
PHI = make_adapter(
    name="phi",
    detect=r"layers\.\d+\.self_attn\.dense$",
    roles=(
        (r"embed_tokens\.weight$", "input_weight"),
        (
            r"layers\.\d+\.(\w*layernorm|self_attn\.[qk]_layernorm)\.(weight|bias)$",
            "hidden_bias",
        ),
        (r"layers\.\d+\.(self_attn|mlp)\.\w+\.weight$", "hidden_weight"),
        (r"layers\.\d+\.(self_attn|mlp)\.\w+\.bias$", "hidden_bias"),
        (r"final_layernorm\.(weight|bias)$", "input_bias"),
        (r"lm_head\.weight$", "output_weight"),
        (r"lm_head\.bias$", "output_bias"),
    ),
    input=(r"embed_tokens$",),
    branches=(r"layers\.\d+\.self_attn\.dense$", r"layers\.\d+\.mlp\.fc2$"),
    output=(r"lm_head$",),
    final=r"final_layernorm$",
)
