"""The ``vit`` family: timm's VisionTransformer."""

from __future__ import annotations

from spectral.families.adapter import make_adapter

__all__ = ["VIT"]

VIT = make_adapter(
    name="vit",  # timm's VisionTransformer
    detect=r"blocks\.\d+\.attn\.proj$",
    roles=(
        # The patch embedding is a dense input layer (a Conv2d over pixels): its fan-in
        # C * p * p stays fixed as the width grows, so it is drawn init_std / sqrt(fan_in).
        (r"patch_embed\.proj\.weight$", "input_weight"),
        (r"patch_embed\.proj\.bias$", "input_bias"),
        # pos_embed is a learned vector per position added to h_0, as GPT-2's wpe is: a
        # table looked up by one-hot positions, so input_weight (not input_bias, which
        # adds the same vector at every position). cls_token (and reg_token) is a one-row
        # table looked up at its own position, where it is summed with that position's
        # pos_embed row; both rows must follow one rule. All three are in `embeddings`.
        (r"(cls_token|reg_token|pos_embed)$", "input_weight"),
        (r"blocks\.\d+\.(\w+\.)?\w*norm\d?\.(weight|bias)$", "hidden_bias"),
        (r"blocks\.\d+\.(attn|mlp)\.\w+\.weight$", "hidden_weight"),
        (r"blocks\.\d+\.(attn|mlp)\.\w+\.bias$", "hidden_bias"),
        # the final norm on h_L, or fc_norm on the pooled h_L (timm's global_pool="avg")
        (r"(fc_)?norm\.(weight|bias)$", "input_bias"),
        (r"head\.weight$", "output_weight"),
        # head.bias (timm's default head has one) gets no default, like lm_head.bias.
    ),
    # timm adds cls_token and pos_embed to the patch embeddings in _pos_embed, a method,
    # and passes the sum h_0 through pos_drop (an nn.Dropout, there even at p=0): the
    # one module whose output is the whole of h_0.
    input=(r"pos_drop$",),
    branches=(r"blocks\.\d+\.attn\.proj$", r"blocks\.\d+\.mlp\.fc2$"),
    output=(r"head$",),
    # the top-level norm: not patch_embed.norm nor blocks.N.mlp.norm (timm has both)
    final=r"^(?!.*\b(blocks|patch_embed)\.)(.*\.)?norm$",
    embeddings=(r"cls_token$", r"reg_token$", r"pos_embed$"),
)
