"""The ``moe`` family: the moe family."""

from __future__ import annotations

from spectral.families.adapter import make_adapter

__all__ = ["MOE"]

MOE = make_adapter(
    # Hugging Face mixtures of experts with Llama's names (transformers 5): Mixtral, Qwen2-MoE,
    # Qwen3-MoE, OLMoE, DeepSeek-V3; before "llama", whose detect matches them too.
    name="moe",
    detect=r"layers\.\d+\.(mlp|block_sparse_moe)\.experts$",
    roles=(
        # the router (E x n, inside the block) and Qwen2-MoE's shared-expert gate (1 x n):
        # maps from the width to a fixed size, docs/router.md
        (r"layers\.\d+\.(mlp|block_sparse_moe)\.gate\.weight$", "router_weight"),
        (r"layers\.\d+\.mlp\.shared_expert_gate\.weight$", "router_weight"),
        # fused experts (E, 2I, n) / (E, n, I), or transformers 4's lists of Linear: hidden
        # matrices, stepped one expert matrix at a time (spectral.torch.optim.experts)
        (
            (
                r"layers\.\d+\.(mlp|block_sparse_moe)\.experts\."
                r"(gate_up_proj|gate_proj|up_proj|down_proj)$"
            ),
            "hidden_weight",
        ),
        (
            r"layers\.\d+\.(mlp|block_sparse_moe)\.experts\.\d+\.\w+\.weight$",
            "hidden_weight",
        ),
        (r"layers\.\d+\.\w*norm\.(weight|bias)$", "hidden_bias"),
        (r"layers\.\d+\.self_attn\.\w*norm\.(weight|bias)$", "hidden_bias"),
        (r"layers\.\d+\.(self_attn|mlp)\.(\w+\.)?\w+\.weight$", "hidden_weight"),
        (r"layers\.\d+\.(self_attn|mlp)\.(\w+\.)?\w+\.bias$", "hidden_bias"),
        (r"norm\.(weight|bias)$", "input_bias"),
        (r"lm_head\.weight$", "output_weight"),
    ),
    input=(r"embed_tokens$",),
    # the MoE block's output: the gated sum of the experts (and the shared expert), where
    # alpha_hidden goes; a dense layer's mlp (Qwen2-MoE's mlp_only_layers) is hooked whole
    branches=(
        r"layers\.\d+\.self_attn\.o_proj$",
        r"layers\.\d+\.(mlp|block_sparse_moe)$",
    ),
    output=(r"lm_head$",),
    final=r"norm$",
    # DeepSeek-V3's latent maps (width -> a fixed rank) are read by an RMSNorm: the normed
    # rank-down role (docs/roles.md), the norm's output Theta(1) and its step too
    normed=(
        (
            r"layers\.\d+\.self_attn\.q_a_layernorm$",
            r"layers\.\d+\.self_attn\.q_a_proj$",
        ),
        (
            r"layers\.\d+\.self_attn\.kv_a_layernorm$",
            r"layers\.\d+\.self_attn\.kv_a_proj_with_mqa$",
        ),
    ),
)
