"""Test models: tiny Hugging Face models from config objects, and stand-ins for others.

Hugging Face GPT-2, Llama, Qwen2, Qwen3, Mistral, Phi-3, Cohere, StableLM, Gemma, Gemma2,
Gemma3, OLMo2, Falcon, GPT-NeoX and OPT are built from config objects (tiny, CPU, nothing
downloaded). nanoGPT, torchtitan's Llama and timm's VisionTransformer are stand-ins written
here with those projects' module names and forward passes (torchtitan and timm are not
installed; nothing is copied from them). :data:`CASES` says, per model, which family
adapter takes it and where its roles and multipliers must land (tests/families/test_adapters.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

VOCAB = 128
HEAD_DIM = 16  # fixed as the width grows: heads = width / HEAD_DIM

# ------------------------------------------------------------------------------------
# Hugging Face models, from config objects
# ------------------------------------------------------------------------------------


def _heads(width: int) -> int:
    return width // HEAD_DIM


def hf_gpt2(width: int, depth: int) -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=VOCAB,
        n_positions=32,
        n_embd=width,
        n_layer=depth,
        n_head=_heads(width),
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=0,
        tie_word_embeddings=False,
        attn_implementation="eager",
    )
    return GPT2LMHeadModel(config)


def _llama_like(config_cls: str, model_cls: str, width: int, depth: int, **extra) -> nn.Module:
    extra.setdefault("num_key_value_heads", _heads(width))  # some families default to 16
    config = getattr(transformers, config_cls)(
        vocab_size=VOCAB,
        hidden_size=width,
        intermediate_size=2 * width,
        num_hidden_layers=depth,
        num_attention_heads=_heads(width),
        max_position_embeddings=32,
        tie_word_embeddings=False,
        use_cache=False,
        attn_implementation="eager",
        **extra,
    )
    return getattr(transformers, model_cls)(config)


def hf_llama(width: int, depth: int) -> nn.Module:
    return _llama_like("LlamaConfig", "LlamaForCausalLM", width, depth)


def hf_qwen2(width: int, depth: int) -> nn.Module:  # q/k/v biases, grouped-query attention
    return _llama_like(
        "Qwen2Config", "Qwen2ForCausalLM", width, depth, num_key_value_heads=_heads(width) // 2
    )


def hf_qwen3(width: int, depth: int) -> nn.Module:  # q_norm / k_norm inside attention
    return _llama_like(
        "Qwen3Config",
        "Qwen3ForCausalLM",
        width,
        depth,
        head_dim=HEAD_DIM,
        num_key_value_heads=_heads(width),
    )


def hf_mistral(width: int, depth: int) -> nn.Module:
    return _llama_like(
        "MistralConfig", "MistralForCausalLM", width, depth, num_key_value_heads=_heads(width) // 2
    )


def hf_gemma(width: int, depth: int) -> nn.Module:  # sqrt(n) embedding scale, 1 + w norms
    return _llama_like("GemmaConfig", "GemmaForCausalLM", width, depth, head_dim=HEAD_DIM)


def hf_gemma2(width: int, depth: int) -> nn.Module:  # norms after the sublayers too
    return _llama_like(
        "Gemma2Config",
        "Gemma2ForCausalLM",
        width,
        depth,
        head_dim=HEAD_DIM,
        final_logit_softcapping=None,  # on by default; the rules do not cover it
        attn_logit_softcapping=None,
    )


def hf_gemma3(width: int, depth: int) -> nn.Module:  # Gemma2's layout, q_norm / k_norm
    return _llama_like("Gemma3TextConfig", "Gemma3ForCausalLM", width, depth, head_dim=HEAD_DIM)


def hf_olmo2(width: int, depth: int) -> nn.Module:  # norms after the sublayers only
    return _llama_like("Olmo2Config", "Olmo2ForCausalLM", width, depth)


def hf_phi3(width: int, depth: int) -> nn.Module:  # fused qkv_proj and gate_up_proj
    return _llama_like("Phi3Config", "Phi3ForCausalLM", width, depth, pad_token_id=0)


def hf_cohere(width: int, depth: int) -> nn.Module:  # parallel attention and MLP, qk norms
    return _llama_like("CohereConfig", "CohereForCausalLM", width, depth, use_qk_norm=True)


def hf_stablelm(width: int, depth: int) -> nn.Module:  # LayerNorms with biases, per-head qk norms
    return _llama_like(
        "StableLmConfig",
        "StableLmForCausalLM",
        width,
        depth,
        qk_layernorm=True,
    )


def hf_falcon(width: int, depth: int, **extra) -> nn.Module:
    """Falcon with one key/value head per query head: its default, multi_query=True, fuses
    the queries with one key and one value head that do not grow with the width, which the
    rules cannot scale as one matrix (tests/torch/test_read_once.py names it)."""
    from transformers import FalconConfig, FalconForCausalLM

    extra.setdefault("multi_query", False)
    config = FalconConfig(
        vocab_size=VOCAB,
        hidden_size=width,
        num_hidden_layers=depth,
        num_attention_heads=_heads(width),
        hidden_dropout=0.0,
        attention_dropout=0.0,
        tie_word_embeddings=False,
        use_cache=False,
        attn_implementation="eager",
        **extra,
    )
    return FalconForCausalLM(config)


def hf_falcon_new(width: int, depth: int) -> nn.Module:
    """Falcon's new decoder architecture (ln_attn / ln_mlp, grouped key/value heads, bias)."""
    return hf_falcon(
        width, depth, new_decoder_architecture=True, num_kv_heads=_heads(width) // 2, bias=True
    )


def hf_neox(width: int, depth: int) -> nn.Module:
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    config = GPTNeoXConfig(
        vocab_size=VOCAB,
        hidden_size=width,
        intermediate_size=2 * width,
        num_hidden_layers=depth,
        num_attention_heads=_heads(width),
        max_position_embeddings=32,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        use_parallel_residual=True,
        tie_word_embeddings=False,
        use_cache=False,
        attn_implementation="eager",
    )
    return GPTNeoXForCausalLM(config)


def hf_opt(width: int, depth: int, proj_dim: int | None = None) -> nn.Module:
    from transformers import OPTConfig, OPTForCausalLM

    config = OPTConfig(
        vocab_size=VOCAB,
        hidden_size=width,
        ffn_dim=2 * width,
        num_hidden_layers=depth,
        num_attention_heads=_heads(width),
        max_position_embeddings=32,
        word_embed_proj_dim=proj_dim or width,
        dropout=0.0,
        attention_dropout=0.0,
        tie_word_embeddings=False,
        use_cache=False,
        attn_implementation="eager",
    )
    return OPTForCausalLM(config)


def hf_opt_projected(width: int, depth: int) -> nn.Module:
    """OPT with project_in / project_out (word_embed_proj_dim != hidden_size, as OPT-350m)."""
    return hf_opt(width, depth, proj_dim=width // 2)


# ------------------------------------------------------------------------------------
# stand-ins: nanoGPT, torchtitan's Llama, timm's VisionTransformer (their module names)
# ------------------------------------------------------------------------------------


class LayerNorm(nn.Module):
    """nanoGPT's LayerNorm (its own class, with an optional bias)."""

    def __init__(self, ndim: int, bias: bool = True):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    """nanoGPT's attention: one c_attn for q, k, v; n_head and n_embd, no head_dim."""

    def __init__(self, n_embd: int, n_head: int):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.attn_dropout = nn.Dropout(0.0)
        self.resid_dropout = nn.Dropout(0.0)
        self.n_head, self.n_embd = n_head, n_embd

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (
            t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            for t in self.c_attn(x).split(self.n_embd, dim=2)
        )
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).reshape(B, T, C)))


class NanoMLP(nn.Module):
    def __init__(self, n_embd: int):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * n_embd, n_embd)
        self.dropout = nn.Dropout(0.0)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class NanoBlock(nn.Module):
    def __init__(self, n_embd: int, n_head: int):
        super().__init__()
        self.ln_1 = LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln_2 = LayerNorm(n_embd)
        self.mlp = NanoMLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class NanoGPT(nn.Module):
    """nanoGPT's GPT with its weight-tying line dropped (muP needs them apart)."""

    def __init__(self, width: int, depth: int, block_size: int = 32):
        super().__init__()
        self.transformer = nn.ModuleDict(
            {
                "wte": nn.Embedding(VOCAB, width),
                "wpe": nn.Embedding(block_size, width),
                "drop": nn.Dropout(0.0),
                "h": nn.ModuleList(NanoBlock(width, _heads(width)) for _ in range(depth)),
                "ln_f": LayerNorm(width),
            }
        )
        self.lm_head = nn.Linear(width, VOCAB, bias=False)

    def forward(self, idx):
        t = self.transformer
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = t.drop(t.wte(idx) + t.wpe(pos))
        for block in t.h:
            x = block(x)
        return self.lm_head(t.ln_f(x))


class TitanAttention(nn.Module):
    """torchtitan's Attention names (wq, wk, wv, wo; n_heads, head_dim); no RoPE here."""

    def __init__(self, dim: int, n_heads: int):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, dim // n_heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (
            w(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
            for w in (self.wq, self.wk, self.wv)
        )
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(y.transpose(1, 2).reshape(B, T, C))


class TitanFeedForward(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TitanBlock(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.attention = TitanAttention(dim, _heads(dim))
        self.feed_forward = TitanFeedForward(dim, 2 * dim)
        self.attention_norm = nn.RMSNorm(dim)
        self.ffn_norm = nn.RMSNorm(dim)

    def forward(self, x):
        h = x + self.attention(self.attention_norm(x))
        return h + self.feed_forward(self.ffn_norm(h))


class TitanTransformer(nn.Module):
    """torchtitan's Llama: layers is a ModuleDict keyed "0", "1", ... (layers.N.*)."""

    def __init__(self, width: int, depth: int):
        super().__init__()
        self.tok_embeddings = nn.Embedding(VOCAB, width)
        self.layers = nn.ModuleDict({str(i): TitanBlock(width) for i in range(depth)})
        self.norm = nn.RMSNorm(width)
        self.output = nn.Linear(width, VOCAB, bias=False)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        for layer in self.layers.values():
            h = layer(h)
        return self.output(self.norm(h))


class PatchEmbed(nn.Module):
    def __init__(self, patch: int, in_chans: int, dim: int):
        super().__init__()
        self.proj = nn.Conv2d(in_chans, dim, kernel_size=patch, stride=patch)
        self.norm = nn.Identity()

    def forward(self, x):
        return self.norm(self.proj(x).flatten(2).transpose(1, 2))


class Attention(nn.Module):
    """timm's Attention names: qkv, proj; num_heads, head_dim."""

    def __init__(self, dim: int, num_heads: int):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, dim // num_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.q_norm = nn.Identity()
        self.k_norm = nn.Identity()
        self.attn_drop = nn.Dropout(0.0)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(0.0)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        y = F.scaled_dot_product_attention(self.q_norm(q), self.k_norm(k), v)
        return self.proj_drop(self.proj(y.transpose(1, 2).reshape(B, N, C)))


class Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.drop1 = nn.Dropout(0.0)
        self.norm = nn.Identity()
        self.fc2 = nn.Linear(hidden, dim)
        self.drop2 = nn.Dropout(0.0)

    def forward(self, x):
        return self.drop2(self.fc2(self.norm(self.drop1(self.act(self.fc1(x))))))


class Block(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, _heads(dim))
        self.ls1 = nn.Identity()
        self.drop_path1 = nn.Identity()
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, 4 * dim)
        self.ls2 = nn.Identity()
        self.drop_path2 = nn.Identity()

    def forward(self, x):
        x = x + self.drop_path1(self.ls1(self.attn(self.norm1(x))))
        return x + self.drop_path2(self.ls2(self.mlp(self.norm2(x))))


class VisionTransformer(nn.Module):
    """timm's VisionTransformer (class token, learned position embedding, class-token or
    average pooling): h_0 = pos_drop(cat(cls_token, patch_embed(x)) + pos_embed)."""

    def __init__(
        self,
        width: int,
        depth: int,
        *,
        img_size: int = 16,
        patch: int = 4,
        in_chans: int = 3,
        num_classes: int = 10,
        head_bias: bool = True,
        global_pool: str = "token",
    ):
        super().__init__()
        num_patches = (img_size // patch) ** 2
        self.patch_embed = PatchEmbed(patch, in_chans, width)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, width))
        self.pos_embed = nn.Parameter(torch.randn(1, num_patches + 1, width) * 0.02)
        self.pos_drop = nn.Dropout(0.0)
        self.patch_drop = nn.Identity()
        self.norm_pre = nn.Identity()
        self.blocks = nn.Sequential(*(Block(width) for _ in range(depth)))
        # timm: the final norm on every token, or (average pooling) fc_norm after the pool
        self.global_pool = global_pool
        avg = global_pool == "avg"
        self.norm = nn.Identity() if avg else nn.LayerNorm(width, eps=1e-6)
        self.fc_norm = nn.LayerNorm(width, eps=1e-6) if avg else nn.Identity()
        self.head_drop = nn.Dropout(0.0)
        self.head = nn.Linear(width, num_classes, bias=head_bias)

    def _pos_embed(self, x):
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1)
        return self.pos_drop(x + self.pos_embed)

    def forward(self, x):
        x = self.norm_pre(self.patch_drop(self._pos_embed(self.patch_embed(x))))
        x = self.norm(self.blocks(x))
        x = x[:, 1:].mean(dim=1) if self.global_pool == "avg" else x[:, 0]
        return self.head(self.head_drop(self.fc_norm(x)))


def vit(width: int, depth: int) -> nn.Module:
    return VisionTransformer(width, depth, head_bias=False)


def vit_avg(width: int, depth: int) -> nn.Module:
    return VisionTransformer(width, depth, head_bias=False, global_pool="avg")


# ------------------------------------------------------------------------------------
# the cases
# ------------------------------------------------------------------------------------


class Case(NamedTuple):
    build: Callable[[int, int], nn.Module]
    adapter: str
    inputs: int
    """How many modules alpha_in scales."""
    final: str
    """The module whose input is h_L."""
    roles: dict[str, str]
    """A few parameter names -> the role they must get."""
    images: bool = False


GPT2_ROLES = {
    "transformer.wte.weight": "input_weight",
    "transformer.wpe.weight": "input_weight",
    "transformer.h.0.ln_1.weight": "hidden_bias",
    "transformer.h.0.ln_2.bias": "hidden_bias",
    "transformer.h.1.attn.c_attn.weight": "hidden_weight",
    "transformer.h.1.mlp.c_proj.weight": "hidden_weight",
    "transformer.h.1.mlp.c_proj.bias": "hidden_bias",
    "transformer.ln_f.weight": "input_bias",
    "transformer.ln_f.bias": "input_bias",
    "lm_head.weight": "output_weight",
}
LLAMA_ROLES = {
    "model.embed_tokens.weight": "input_weight",
    "model.layers.0.self_attn.q_proj.weight": "hidden_weight",
    "model.layers.0.self_attn.o_proj.weight": "hidden_weight",
    "model.layers.1.mlp.down_proj.weight": "hidden_weight",
    "model.layers.1.mlp.gate_proj.weight": "hidden_weight",
    "model.layers.0.input_layernorm.weight": "hidden_bias",
    "model.layers.1.post_attention_layernorm.weight": "hidden_bias",
    "model.norm.weight": "input_bias",
    "lm_head.weight": "output_weight",
}
OPT_ROLES = {
    "model.decoder.embed_tokens.weight": "input_weight",
    "model.decoder.embed_positions.weight": "input_weight",
    "model.decoder.layers.0.self_attn.k_proj.weight": "hidden_weight",
    "model.decoder.layers.0.self_attn.out_proj.bias": "hidden_bias",
    "model.decoder.layers.1.fc1.weight": "hidden_weight",
    "model.decoder.layers.1.fc2.bias": "hidden_bias",
    "model.decoder.layers.0.self_attn_layer_norm.weight": "hidden_bias",
    "model.decoder.layers.0.final_layer_norm.bias": "hidden_bias",
    "model.decoder.final_layer_norm.weight": "input_bias",
    "lm_head.weight": "output_weight",
}

CASES = {
    "gpt2-hf": Case(hf_gpt2, "gpt2", 2, "transformer.ln_f", GPT2_ROLES),
    "gpt2-nanogpt": Case(NanoGPT, "gpt2", 2, "transformer.ln_f", GPT2_ROLES),
    "llama-hf": Case(hf_llama, "llama", 1, "model.norm", LLAMA_ROLES),
    "qwen2-hf": Case(
        hf_qwen2,
        "llama",
        1,
        "model.norm",
        {
            **LLAMA_ROLES,
            "model.layers.0.self_attn.q_proj.bias": "hidden_bias",
            "model.layers.1.self_attn.v_proj.bias": "hidden_bias",
        },
    ),
    "qwen3-hf": Case(
        hf_qwen3,
        "llama",
        1,
        "model.norm",
        {
            **LLAMA_ROLES,
            "model.layers.0.self_attn.q_norm.weight": "hidden_bias",
            "model.layers.1.self_attn.k_norm.weight": "hidden_bias",
        },
    ),
    "mistral-hf": Case(hf_mistral, "llama", 1, "model.norm", LLAMA_ROLES),
    "phi3-hf": Case(
        hf_phi3,
        "llama",
        1,
        "model.norm",
        {
            "model.layers.0.self_attn.qkv_proj.weight": "hidden_weight",
            "model.layers.1.mlp.gate_up_proj.weight": "hidden_weight",
            "model.layers.0.input_layernorm.weight": "hidden_bias",
            "model.norm.weight": "input_bias",
            "lm_head.weight": "output_weight",
        },
    ),
    "cohere-hf": Case(
        hf_cohere,
        "llama",
        1,
        "model.norm",
        {
            "model.embed_tokens.weight": "input_weight",
            "model.layers.0.self_attn.q_norm.weight": "hidden_bias",
            "model.layers.0.input_layernorm.weight": "hidden_bias",
            "model.layers.1.mlp.down_proj.weight": "hidden_weight",
            "model.norm.weight": "input_bias",
        },
    ),
    "stablelm-hf": Case(
        hf_stablelm,
        "llama",
        1,
        "model.norm",
        {
            "model.layers.0.self_attn.q_layernorm.norms.0.weight": "hidden_bias",
            "model.layers.0.self_attn.k_layernorm.norms.1.weight": "hidden_bias",
            "model.layers.0.post_attention_layernorm.bias": "hidden_bias",
            "model.norm.bias": "input_bias",
        },
    ),
    "gemma-hf": Case(hf_gemma, "gemma", 1, "model.norm", LLAMA_ROLES),
    "gemma2-hf": Case(
        hf_gemma2,
        "gemma2",
        1,
        "model.norm",
        {
            **LLAMA_ROLES,
            "model.layers.0.pre_feedforward_layernorm.weight": "hidden_bias",
            "model.layers.1.post_feedforward_layernorm.weight": "hidden_bias",
        },
    ),
    "gemma3-hf": Case(
        hf_gemma3,
        "gemma2",
        1,
        "model.norm",
        {**LLAMA_ROLES, "model.layers.0.self_attn.q_norm.weight": "hidden_bias"},
    ),
    "olmo2-hf": Case(
        hf_olmo2,
        "olmo2",
        1,
        "model.norm",
        {
            "model.embed_tokens.weight": "input_weight",
            "model.layers.0.self_attn.q_norm.weight": "hidden_bias",
            "model.layers.0.post_attention_layernorm.weight": "hidden_bias",
            "model.layers.1.post_feedforward_layernorm.weight": "hidden_bias",
            "model.layers.1.mlp.down_proj.weight": "hidden_weight",
            "model.norm.weight": "input_bias",
            "lm_head.weight": "output_weight",
        },
    ),
    "falcon-hf": Case(
        hf_falcon,
        "falcon",
        1,
        "transformer.ln_f",
        {
            "transformer.word_embeddings.weight": "input_weight",
            "transformer.h.0.self_attention.query_key_value.weight": "hidden_weight",
            "transformer.h.1.self_attention.dense.weight": "hidden_weight",
            "transformer.h.0.mlp.dense_4h_to_h.weight": "hidden_weight",
            "transformer.h.0.input_layernorm.weight": "hidden_bias",
            "transformer.h.1.input_layernorm.bias": "hidden_bias",
            "transformer.ln_f.weight": "input_bias",
            "lm_head.weight": "output_weight",
        },
    ),
    "falcon-hf-new": Case(
        hf_falcon_new,
        "falcon",
        1,
        "transformer.ln_f",
        {
            "transformer.h.0.ln_attn.weight": "hidden_bias",
            "transformer.h.0.ln_mlp.bias": "hidden_bias",
            "transformer.h.0.self_attention.query_key_value.bias": "hidden_bias",
            "transformer.h.1.mlp.dense_h_to_4h.weight": "hidden_weight",
        },
    ),
    "neox-hf": Case(
        hf_neox,
        "neox",
        1,
        "gpt_neox.final_layer_norm",
        {
            "gpt_neox.embed_in.weight": "input_weight",
            "gpt_neox.layers.0.attention.query_key_value.weight": "hidden_weight",
            "gpt_neox.layers.0.attention.query_key_value.bias": "hidden_bias",
            "gpt_neox.layers.1.attention.dense.weight": "hidden_weight",
            "gpt_neox.layers.0.mlp.dense_4h_to_h.weight": "hidden_weight",
            "gpt_neox.layers.0.mlp.dense_h_to_4h.bias": "hidden_bias",
            "gpt_neox.layers.0.input_layernorm.weight": "hidden_bias",
            "gpt_neox.layers.1.post_attention_layernorm.bias": "hidden_bias",
            "gpt_neox.final_layer_norm.weight": "input_bias",
            "gpt_neox.final_layer_norm.bias": "input_bias",
            "lm_head.weight": "output_weight",
        },
    ),
    "opt-hf": Case(hf_opt, "opt", 2, "model.decoder.final_layer_norm", OPT_ROLES),
    "opt-hf-projected": Case(
        hf_opt_projected,
        "opt",
        2,
        "model.decoder.final_layer_norm",
        {
            **OPT_ROLES,
            "model.decoder.project_in.weight": "hidden_weight",
            "model.decoder.project_out.weight": "hidden_weight",
        },
    ),
    "torchtitan": Case(
        TitanTransformer,
        "torchtitan",
        1,
        "norm",
        {
            "tok_embeddings.weight": "input_weight",
            "layers.0.attention.wq.weight": "hidden_weight",
            "layers.1.attention.wo.weight": "hidden_weight",
            "layers.0.feed_forward.w2.weight": "hidden_weight",
            "layers.1.feed_forward.w3.weight": "hidden_weight",
            "layers.0.attention_norm.weight": "hidden_bias",
            "layers.1.ffn_norm.weight": "hidden_bias",
            "norm.weight": "input_bias",
            "output.weight": "output_weight",
        },
    ),
    "vit": Case(
        vit,
        "vit",
        1,
        "norm",
        {
            "patch_embed.proj.weight": "input_weight",
            "patch_embed.proj.bias": "input_bias",
            "cls_token": "input_weight",
            "pos_embed": "input_weight",
            "blocks.0.norm1.weight": "hidden_bias",
            "blocks.1.norm2.bias": "hidden_bias",
            "blocks.0.attn.qkv.weight": "hidden_weight",
            "blocks.0.attn.qkv.bias": "hidden_bias",
            "blocks.1.attn.proj.weight": "hidden_weight",
            "blocks.1.mlp.fc2.bias": "hidden_bias",
            "norm.weight": "input_bias",
            "head.weight": "output_weight",
        },
        images=True,
    ),
    "vit-avgpool": Case(
        vit_avg,
        "vit",
        1,
        "norm",  # an Identity here, still the module whose input is h_L
        {
            "pos_embed": "input_weight",
            "blocks.0.attn.qkv.weight": "hidden_weight",
            "fc_norm.weight": "input_bias",
            "fc_norm.bias": "input_bias",
            "head.weight": "output_weight",
        },
        images=True,
    ),
}


def sample(case: Case, batch: int = 2, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    if case.images:
        return torch.randn(batch, 3, 16, 16, generator=gen)
    return torch.randint(0, VOCAB, (batch, 12), generator=gen)


def logits(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    out = model(x)
    return out if isinstance(out, torch.Tensor) else out.logits
