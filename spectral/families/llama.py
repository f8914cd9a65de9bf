"""The ``llama`` family: the llama family."""

from __future__ import annotations

from spectral.families.adapter import make_adapter

__all__ = ["LLAMA"]

# Hugging Face Llama, Qwen2, Qwen3, Mistral, Phi-3 (fused qkv_proj and gate_up_proj are
# hidden matrices like the others), Cohere / Command-R (attention and MLP in parallel on
# one norm: still two branch ends per layer; its logit_scale is a fixed factor on the
# logits, the same at every width), StableLM, and others with these names.
LLAMA = make_adapter(
    name="llama",
    detect=r"layers\.\d+\.self_attn\.o_proj$",
    roles=(
        (r"embed_tokens\.weight$", "input_weight"),
        # norms first: Qwen3's self_attn.q_norm / k_norm would otherwise be matrices
        (r"layers\.\d+\.\w*norm\.(weight|bias)$", "hidden_bias"),
        (r"layers\.\d+\.self_attn\.[qk]_norm\.(weight|bias)$", "hidden_bias"),
        # StableLM's qk_layernorm: one LayerNorm per head
        (
            r"layers\.\d+\.self_attn\.[qk]_layernorm\.norms\.\d+\.(weight|bias)$",
            "hidden_bias",
        ),
        (r"layers\.\d+\.(self_attn|mlp)\.\w+\.weight$", "hidden_weight"),
        (r"layers\.\d+\.(self_attn|mlp)\.\w+\.bias$", "hidden_bias"),
        (r"norm\.(weight|bias)$", "input_bias"),
        (r"lm_head\.weight$", "output_weight"),
    ),
    input=(r"embed_tokens$",),
    branches=(r"layers\.\d+\.self_attn\.o_proj$", r"layers\.\d+\.mlp\.down_proj$"),
    output=(r"lm_head$",),
    final=r"norm$",
)
