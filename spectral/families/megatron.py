"""The ``megatron`` family: Megatron-core's GPTModel (models/gpt/gpt_model.py names)."""

from __future__ import annotations

from spectral.families.adapter import make_adapter

__all__ = ["MEGATRON"]

# megatron-core 0.16.1's GPTModel: embedding.{word,position}_embeddings, decoder.layers.N
# with input_layernorm, self_attention.{linear_qkv,linear_proj}, pre_mlp_layernorm,
# mlp.{linear_fc1,linear_fc2} (the local spec; Transformer Engine's spec fuses the norms into
# linear_qkv / linear_fc1 as layer_norm_weight / layer_norm_bias), decoder.final_layernorm,
# output_layer. Its linears are ColumnParallelLinear / RowParallelLinear and its word
# embedding a VocabParallelEmbedding (a lookup table, though no nn.Embedding).
# Mixtures of experts (num_moe_experts): mlp.router (TopKRouter, E x n: router_weight,
# docs/router.md), the experts as SequentialMLP (mlp.experts.local_experts.E.linear_fc1/2),
# TEGroupedMLP (mlp.experts.linear_fc1/2 with weight0 .. weight{E-1}) or the legacy
# GroupedMLP (mlp.experts.weight1 / weight2, every expert in one tensor each), and
# shared experts (mlp.shared_experts.linear_fc1/2, their gate shared_experts.gate_weight,
# 1 x n: router_weight). alpha_hidden scales the MoE layer's output, the gated sum of the
# experts plus the shared expert, which is linear in every expert's linear_fc2: each one is
# a branch end (the legacy GroupedMLP's weight2 is not a module of its own; the codegen
# target places it by name).
MEGATRON = make_adapter(
    name="megatron",  # Megatron-core's GPTModel (models/gpt/gpt_model.py names)
    detect=r"decoder\.layers\.\d+\.self_attention\.linear_proj$",
    roles=(
        (r"decoder\.layers\.\d+\.mlp\.router\.weight$", "router_weight"),
        (r"decoder\.layers\.\d+\.mlp\.shared_experts\.gate_weight$", "router_weight"),
        (
            r"decoder\.layers\.\d+\.mlp\.experts\.(weight[12]|linear_fc[12]\.weight\d+)$",
            "hidden_weight",
        ),
        (r"decoder\.layers\.\d+\.mlp\.experts\.linear_fc[12]\.bias\d+$", "hidden_bias"),
        (r"embedding\.(word|position)_embeddings\.weight$", "input_weight"),
        (r"decoder\.layers\.\d+\.(\w+\.)*\w*norm\.(weight|bias)$", "hidden_bias"),
        (r"decoder\.layers\.\d+\.(\w+\.)*layer_norm_(weight|bias)$", "hidden_bias"),
        (
            r"decoder\.layers\.\d+\.(self_attention|mlp)\.(\w+\.)*weight$",
            "hidden_weight",
        ),
        (r"decoder\.layers\.\d+\.(self_attention|mlp)\.(\w+\.)*bias$", "hidden_bias"),
        (r"decoder\.final_layernorm\.(weight|bias)$", "input_bias"),
        (r"output_layer\.weight$", "output_weight"),
    ),
    input=(r"embedding\.word_embeddings$", r"embedding\.position_embeddings$"),
    branches=(
        r"decoder\.layers\.\d+\.self_attention\.linear_proj$",
        r"decoder\.layers\.\d+\.mlp\.linear_fc2$",
        r"decoder\.layers\.\d+\.mlp\.experts\.local_experts\.\d+\.linear_fc2$",
        r"decoder\.layers\.\d+\.mlp\.experts\.linear_fc2$",
        r"decoder\.layers\.\d+\.mlp\.shared_experts\.linear_fc2$",
    ),
    output=(r"output_layer$",),
    final=r"decoder\.final_layernorm$",
    embeddings=(r"embedding\.word_embeddings\.weight$",),
)
