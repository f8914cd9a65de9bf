"""The ``gpt2`` family: nanoGPT's model.py, Hugging Face GPT-2, spectral.models.GPT."""

from __future__ import annotations

from spectral.families.adapter import make_adapter

__all__ = ["GPT2"]

GPT2 = make_adapter(
    name="gpt2",  # nanoGPT's model.py, Hugging Face GPT-2, spectral.models.GPT
    detect=r"h\.\d+\.attn\.c_proj$",
    roles=(
        (r"wte\.weight$", "input_weight"),
        (r"wpe\.weight$", "input_weight"),
        (r"h\.\d+\.ln_[12]\.(weight|bias)$", "hidden_bias"),
        # spectral.models.GPT(experts=E): the router (E x n, docs/router.md) and the experts
        (r"h\.\d+\.mlp\.gate\.weight$", "router_weight"),
        (r"h\.\d+\.mlp\.experts\.\d+\.\w+\.weight$", "hidden_weight"),
        (r"h\.\d+\.mlp\.experts\.\d+\.\w+\.bias$", "hidden_bias"),
        (r"h\.\d+\.(attn|mlp)\.\w+\.weight$", "hidden_weight"),
        (r"h\.\d+\.(attn|mlp)\.\w+\.bias$", "hidden_bias"),
        (r"ln_f\.(weight|bias)$", "input_bias"),
        (r"lm_head\.weight$", "output_weight"),
    ),
    input=(r"wte$", r"wpe$"),
    branches=(r"h\.\d+\.attn\.c_proj$", r"h\.\d+\.mlp\.c_proj$"),
    output=(r"lm_head$",),
    final=r"ln_f$",
)
