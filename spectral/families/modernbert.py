"""The ``modernbert`` family: the modernbert family."""

from __future__ import annotations

from spectral.families.adapter import make_adapter

__all__ = ["MODERNBERT"]

MODERNBERT = make_adapter(
    name="modernbert",
    detect=r"layers\.\d+\.attn\.Wo$",
    roles=(
        (r"embeddings\.tok_embeddings\.weight$", "input_weight"),
        (r"embeddings\.norm\.(weight|bias)$", "input_bias"),
        (r"layers\.\d+\.(attn|mlp)_norm\.(weight|bias)$", "hidden_bias"),
        (r"layers\.\d+\.(attn|mlp)\.\w+\.weight$", "hidden_weight"),
        (r"layers\.\d+\.(attn|mlp)\.\w+\.bias$", "hidden_bias"),
        (r"final_norm\.(weight|bias)$", "input_bias"),
        (r"head\.dense\.weight$", "outer_weight"),
        (r"head\.(dense|norm)\.(weight|bias)$", "outer_bias"),
        (r"decoder\.weight$", "output_weight"),
        (r"decoder\.bias$", "output_bias"),
    ),
    input=(r"embeddings$",),
    branches=(r"layers\.\d+\.attn\.Wo$", r"layers\.\d+\.mlp\.Wo$"),
    output=(r"decoder$",),
    final=r"final_norm$",
)
