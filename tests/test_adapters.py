"""Family adapters of the generated module, on the models they are written for.

Hugging Face GPT-2, Llama, Qwen2, Qwen3, Mistral, Phi-3, Cohere, StableLM, Gemma, Gemma2,
Gemma3, OLMo2, Falcon, GPT-NeoX and OPT are built from config objects (tiny, CPU, nothing downloaded). nanoGPT, torchtitan's Llama and timm's
VisionTransformer are stand-ins written here with those projects' module names and
forward passes (torchtitan and timm are not installed; nothing is copied from them).
"""

from __future__ import annotations

import copy
import io
import os
import re
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from spectral.codegen import load_generated  # noqa: E402
from spectral.models import GPT  # noqa: E402

transformers.logging.set_verbosity_error()
pytestmark = [
    pytest.mark.generated,
    pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning"),
]

HERE = Path(__file__).resolve().parent
VOCAB = 128
HEAD_DIM = 16  # fixed as the width grows: heads = width / HEAD_DIM
BASE_WIDTH, BASE_DEPTH = 64, 2


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("adapters")
    return {
        "muon-kimi+adamw": load_generated(
            "muon-kimi", "adamw", base_width=BASE_WIDTH, base_depth=BASE_DEPTH, folder=folder
        ),
        "adamw": load_generated(
            "adamw", base_width=BASE_WIDTH, base_depth=BASE_DEPTH, folder=folder
        ),
    }


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
    from transformers import FalconConfig, FalconForCausalLM

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


def recognising(cfg: Any, names: list[str], types: set[str]) -> list[str]:
    """Every family, in ADAPTERS' order, whose detect pattern matches one of the module
    names (and whose detect_type, if any, one of the class names)."""
    return [
        a.name
        for a in cfg.ADAPTERS
        if any(re.search(a.detect, n) for n in names)
        and (not a.detect_type or any(re.search(a.detect_type, t) for t in types))
    ]


def detected(cfg: Any, model: nn.Module) -> list[str]:
    """Every family that recognises the model; the first is the one the runtime takes."""
    names = [n for n, _ in model.named_modules()]
    return recognising(cfg, names, {type(m).__name__ for m in model.modules()})


# ------------------------------------------------------------------------------------
# every family: roles, detection, hooks, check, head dimension
# ------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", CASES)
def test_adapter_places_every_parameter_and_multiplier(key, configs):
    cfg, case = configs["muon-kimi+adamw"], CASES[key]
    width, depth = 128, 3  # not the base size, so every multiplier differs from 1
    torch.manual_seed(0)
    model = case.build(width, depth)
    # the right family comes first; the others that match share its names and come later
    assert detected(cfg, model)[0] == case.adapter
    roles = {n: cfg.classify(n, p, adapter=case.adapter) for n, p in model.named_parameters()}
    assert {n: roles[n] for n in case.roles} == case.roles
    # classify's fallback (every family's patterns) agrees with the family's own
    assert {n: cfg.classify(n, p) for n, p in model.named_parameters()} == roles
    assert cfg.final_module(model) is model.get_submodule(case.final)

    handle = cfg.apply_multipliers(model, width, depth)
    counts = {layer: len(names) for layer, names in handle.modules.items()}
    assert counts == {"input": case.inputs, "hidden": 2 * depth, "output": 1}
    want = cfg.multipliers(width, depth)
    assert want == pytest.approx({"input": 1.0, "hidden": 2 / 3, "output": 0.5})
    assert handle.multipliers == want
    cfg.init_(model, width, depth, 0.02)
    opt = cfg.build_optimizers(model, width, depth, lr=1e-3, weight_decay=0.1)
    assert cfg.check(model, width, depth, opt) == []
    assert cfg.check(model, width, depth, opt, head_dim=HEAD_DIM) == []
    assert cfg.check(model, width, depth, head_dim=32) == [
        f"head dimension {HEAD_DIM} differs from the base model's 32: the rules assume a "
        "fixed head dimension as the width grows (heads = width / head_dim) or 1/d "
        "attention scaling"
    ]
    # one step moves every trained parameter; the loss is a number
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    logits(model, sample(case)).float().pow(2).mean().backward()
    opt.step()
    unchanged = [n for n, p in model.named_parameters() if torch.equal(p, before[n])]
    assert unchanged == [], unchanged


@pytest.mark.parametrize("key", CASES)
def test_unplaced_parameter_is_named(key, configs):
    cfg, case = configs["adamw"], CASES[key]
    model = case.build(64, 2)
    block = model.get_submodule(case.final)
    block.register_parameter("mystery_scale", nn.Parameter(torch.ones(3)))
    name = f"{case.final}.mystery_scale"
    with pytest.raises(ValueError, match=rf"1 parameter\(s\) match no role pattern: {name} \(3,\)"):
        cfg.apply_multipliers(model, 64, 2)
    [problem] = cfg.check(model, 64, 2)
    assert f"{name} (3,)" in problem


def test_vit_init_dense_patch_embedding_and_tables(configs):
    """patch_embed.proj is a dense input layer: init_std / sqrt(C p p); cls_token and
    pos_embed are tables: init_std itself."""
    cfg = configs["adamw"]
    torch.manual_seed(0)
    model = VisionTransformer(256, 1, img_size=32, patch=4, head_bias=False)
    cfg.init_(model, 256, 1, 0.02)
    assert model.patch_embed.proj.weight.std().item() == pytest.approx(
        0.02 / (3 * 4 * 4) ** 0.5, rel=0.05
    )
    assert model.pos_embed.std().item() == pytest.approx(0.02, rel=0.05)
    assert model.cls_token.std().item() == pytest.approx(0.02, rel=0.25)  # 256 draws
    assert torch.equal(model.patch_embed.proj.bias, torch.zeros(256))
    assert torch.equal(model.norm.weight, torch.ones(256))


def test_vit_head_bias_needs_a_role(configs):
    """timm's default head has a bias, which no role fits (see the adapter): it is named,
    and patterns= places it."""
    cfg = configs["adamw"]
    model = VisionTransformer(64, 2)
    with pytest.raises(ValueError, match=r"head\.bias \(10,\)"):
        cfg.apply_multipliers(model, 64, 2)
    patterns = {r"(^|\.)head\.bias$": "input_bias"}
    cfg.apply_multipliers(model, 64, 2, patterns=patterns)
    opt = cfg.build_optimizers(model, 64, 2, lr=1e-3, patterns=patterns)
    assert cfg.check(model, 64, 2, opt, patterns=patterns) == []
    [role] = [g["role"] for g in opt.param_groups if any(p is model.head.bias for p in g["params"])]
    assert role == "input_bias"


def test_hf_gpt2_conv1d_fans(tmp_path):
    """HF GPT-2's Conv1D stores its weight (in, out): SSO's compensation reads the fans
    from the module, so c_fc (64 -> 256) gets lr * sqrt(256 / 64) and c_proj the inverse."""
    cfg = load_generated("sso", "adamw", base_width=BASE_WIDTH, base_depth=1, folder=tmp_path)
    model = hf_gpt2(64, 1)
    assert tuple(model.transformer.h[0].mlp.c_fc.weight.shape) == (64, 256)  # (in, out)
    base = cfg.hparams(64, 1, lr=1.0)["hidden_weight"]["lr"]
    lr_of = {id(p): g["lr"] for g in cfg.param_groups(model, 64, 1, lr=1.0) for p in g["params"]}
    mlp = model.transformer.h[0].mlp
    assert lr_of[id(mlp.c_fc.weight)] == pytest.approx(base * 2)
    assert lr_of[id(mlp.c_proj.weight)] == pytest.approx(base / 2)
    assert lr_of[id(model.transformer.h[0].attn.c_proj.weight)] == pytest.approx(base)


def test_detection_takes_the_right_family_first(configs):
    """A model typical of each family is recognised first by that family: families that
    share another's names (Gemma, Gemma2 and OLMo2 have Llama's) come before it, and none
    recognises a model of a family listed before it."""
    cfg = configs["adamw"]
    llama = ["model.layers.0.self_attn.o_proj", "model.layers.0.mlp.down_proj"]
    post_norms = ["model.layers.0.post_attention_layernorm", "model.layers.0.post_feedforward_layernorm"]
    typical = {
        "gpt2": (["transformer.h.0.attn.c_proj"], {"GPT2Attention"}),
        "gemma2": (
            [*llama, *post_norms, "model.layers.0.pre_feedforward_layernorm"],
            {"Gemma2RMSNorm"},
        ),
        "olmo2": ([*llama, *post_norms], {"Olmo2RMSNorm"}),
        "gemma": (llama, {"GemmaRMSNorm"}),
        "moe": ([*llama, "model.layers.0.mlp.experts"], {"MixtralRMSNorm"}),
        "llama": (llama, {"LlamaRMSNorm"}),
        "falcon": (["transformer.h.0.self_attention.dense"], {"FalconLinear"}),
        "residual-mlp": (["blocks.0.layers.1"], {"Linear"}),
        "neox": (["gpt_neox.layers.0.attention.dense"], {"Linear"}),
        "opt": (["model.decoder.layers.0.self_attn.out_proj"], {"Linear"}),
        "torchtitan": (["layers.0.attention.wo"], {"Linear"}),
        "vit": (["blocks.0.attn.proj"], {"Linear"}),
        "granite": (llama, {"GraniteRMSNorm"}),
        "bloom": (
            ["transformer.word_embeddings_layernorm", "transformer.h.0.self_attention.dense"],
            {"LayerNorm"},
        ),
        "mamba": (["backbone.layers.0.mixer.out_proj"], {"MambaMixer"}),
        "bert": (["bert.encoder.layer.0.attention.output.dense"], {"Linear"}),
        "modernbert": (["model.layers.0.attn.Wo"], {"Linear"}),
        "hf-vit": (["vit.layers.0.layernorm_before"], {"LayerNorm"}),
        "phi": (["model.layers.0.self_attn.dense"], {"Linear"}),
        "gptj": (["transformer.h.0.attn.out_proj"], {"Linear"}),
    }
    order = [a.name for a in cfg.ADAPTERS]
    assert sorted(typical) == sorted(order)
    for family, (names, types) in typical.items():
        hits = recognising(cfg, names, types)
        assert hits[0] == family
        assert all(order.index(hit) >= order.index(family) for hit in hits)


# ------------------------------------------------------------------------------------
# the "done when": HF Llama and GPT-2 at widths 64 and 256 from base width 64
# ------------------------------------------------------------------------------------

BRANCH_ENDS = {
    "llama": ("model.layers.{}.self_attn.o_proj", "model.layers.{}.mlp.down_proj"),
    "gpt2": ("transformer.h.{}.attn.c_proj", "transformer.h.{}.mlp.c_proj"),
}
BUILD = {"llama": hf_llama, "gpt2": hf_gpt2}


@pytest.mark.parametrize("label", ["muon-kimi+adamw", "adamw"])
@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_multipliers_scale_logits_exactly(family, label, configs):
    cfg = configs[label]
    assert cfg.multipliers(256, 2) == {"input": 1.0, "hidden": 1.0, "output": 0.25}
    assert cfg.multipliers(64, 4) == {"input": 1.0, "hidden": 0.5, "output": 1.0}
    x = torch.randint(0, VOCAB, (2, 12), generator=torch.Generator().manual_seed(1))
    for width in (64, 256):
        for depth in (2, 4):
            torch.manual_seed(0)
            model = BUILD[family](width, depth).eval()
            a = cfg.multipliers(width, depth)
            ends = [p.format(i) for i in range(depth) for p in BRANCH_ENDS[family]]
            # reference: the same weights with every branch end (weight and bias) times
            # alpha_hidden, and the logits times alpha_out
            reference = copy.deepcopy(model)
            with torch.no_grad():
                plain = logits(model, x)
                for name in ends:
                    for p in reference.get_submodule(name).parameters():
                        p.mul_(a["hidden"])
                expected = a["output"] * logits(reference, x)

            [missing] = cfg.check(model, width, depth)
            assert missing.startswith("block multipliers are not applied")
            assert f"alpha in/hidden/out = 1/{a['hidden']:.6g}/{a['output']:.6g}" in missing
            with pytest.raises(ValueError, match="does not apply the block multipliers"):
                cfg.build_optimizers(model, width, depth, lr=1e-3)

            handle = cfg.apply_multipliers(model, width, depth)
            assert sorted(handle.modules["hidden"]) == sorted(ends)
            with torch.no_grad():
                got = logits(model, x)
            if depth == BASE_DEPTH:  # alpha_hidden = 1: the logits are scaled, exactly
                assert a["output"] == BASE_WIDTH / width
                assert torch.equal(got, plain * a["output"])
            else:
                assert not torch.allclose(got, plain * a["output"])
            torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-7)
            opt = cfg.build_optimizers(model, width, depth, lr=1e-3, weight_decay=0.1)
            assert cfg.check(model, width, depth, opt) == []


def test_missing_hook_is_named(configs):
    cfg = configs["muon-kimi+adamw"]
    model = hf_llama(128, 4)
    cfg.apply_multipliers(model, 128, 4)
    hooks = model.get_submodule("model.layers.3.mlp.down_proj")._forward_hooks
    hooks.clear()
    assert cfg.check(model, 128, 4) == ["alpha_hidden missing on model.layers.3.mlp.down_proj"]


# ------------------------------------------------------------------------------------
# hooks: idempotent, removable, invisible to checkpoints; applied twice is caught
# ------------------------------------------------------------------------------------


def test_hooks_apply_once_remove_and_checkpoint(configs):
    cfg = configs["muon-kimi+adamw"]
    width, depth = 128, 4
    x = torch.randint(0, VOCAB, (2, 12), generator=torch.Generator().manual_seed(1))
    torch.manual_seed(0)
    model = hf_llama(width, depth).eval()
    keys = list(model.state_dict())
    with torch.no_grad():
        plain = logits(model, x)
        first = cfg.apply_multipliers(model, width, depth)
        once = logits(model, x)
        second = cfg.apply_multipliers(model, width, depth)
        twice = logits(model, x)
    assert not torch.allclose(once, plain)
    assert torch.equal(twice, once)  # replaced, not applied on top
    first.remove()  # its hooks were replaced already: removing them changes nothing
    with torch.no_grad():
        assert torch.equal(logits(model, x), once)

    # the hooks hold no state: the checkpoint has the same keys, and loading it into a
    # fresh model with hooks gives the same logits
    assert list(model.state_dict()) == keys
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    torch.manual_seed(1)
    fresh = hf_llama(width, depth).eval()
    cfg.apply_multipliers(fresh, width, depth)
    buffer.seek(0)
    fresh.load_state_dict(torch.load(buffer))
    with torch.no_grad():
        assert torch.equal(logits(fresh, x), once)

    second.remove()
    with torch.no_grad():
        assert torch.equal(logits(model, x), plain)
    [problem] = cfg.check(model, width, depth)
    assert problem.startswith("block multipliers are not applied")


def test_doubled_hook_and_reference_model_are_refused(configs):
    cfg = configs["muon-kimi+adamw"]
    model = hf_llama(128, 4)
    cfg.apply_multipliers(model, 128, 4)
    attn = model.get_submodule("model.layers.0.self_attn.o_proj")
    [hook] = attn._forward_hooks.values()
    attn.register_forward_hook(hook)  # the same partial, registered by hand a second time
    assert cfg.check(model, 128, 4) == [
        "block multiplier applied twice on model.layers.0.self_attn.o_proj"
    ]

    reference = GPT(128, 2, head_dim=32, vocab_size=VOCAB, block_size=16, multipliers=cfg)
    with pytest.raises(ValueError, match="applies the block multipliers in its forward pass"):
        cfg.apply_multipliers(reference, 128, 2)


# ------------------------------------------------------------------------------------
# torch.compile and DDP: the hooked HF model trains the same
# ------------------------------------------------------------------------------------

# Two layers compile in half the time of four; a config with base depth 1 keeps every
# multiplier active at width 128, depth 2: alpha_hidden = alpha_out = 1/2.
WIDTH, DEPTH = 128, 2


@pytest.fixture(scope="module")
def shallow(tmp_path_factory):
    """Configs with base width 64 and base depth 1 (the DDP worker loads them by path)."""
    folder = tmp_path_factory.mktemp("shallow")
    return {
        "muon-kimi+adamw": load_generated(
            "muon-kimi", "adamw", base_width=BASE_WIDTH, base_depth=1, folder=folder
        ),
        "adamw": load_generated("adamw", base_width=BASE_WIDTH, base_depth=1, folder=folder),
    }


def _loss(model: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    out = logits(model, tokens[:, :-1])
    return F.cross_entropy(out.flatten(0, 1), tokens[:, 1:].flatten())


def test_compiled_hf_llama_trains_as_eager(shallow, monkeypatch):
    """Inductor runs the hooks: the same logits and gradients as eager, and three AdamW
    steps end where eager's end. (Muon is left out: its Newton-Schulz runs in bfloat16,
    which turns the last-bit differences of inductor's kernels into visible ones.)"""
    cfg = shallow["adamw"]
    # dynamo imports the hook's module by name: register it as `import` would
    # (load_generated execs the file without adding it to sys.modules)
    monkeypatch.setitem(sys.modules, cfg.__name__, cfg)
    assert cfg.multipliers(WIDTH, DEPTH) == {"input": 1.0, "hidden": 0.5, "output": 0.5}
    gen = torch.Generator().manual_seed(2)
    batches = [torch.randint(0, VOCAB, (4, 17), generator=gen) for _ in range(3)]
    torch.manual_seed(0)
    eager = hf_llama(WIDTH, DEPTH)
    cfg.apply_multipliers(eager, WIDTH, DEPTH)
    cfg.init_(eager, WIDTH, DEPTH, 0.02)
    plain = hf_llama(WIDTH, DEPTH)  # the same weights, no hooks
    plain.load_state_dict(eager.state_dict())
    inner = copy.deepcopy(eager)  # deepcopy keeps the hooks
    compiled = torch.compile(inner)
    assert cfg.check(compiled, WIDTH, DEPTH) == []  # "_orig_mod." names, the same hooks

    _loss(eager, batches[0]).backward()
    _loss(compiled, batches[0]).backward()
    with torch.no_grad():
        got, want = logits(compiled, batches[0]), logits(eager, batches[0])
        hookless = logits(plain, batches[0])
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(got, hookless, rtol=0.1)
    for (name, p), q in zip(eager.named_parameters(), inner.parameters(), strict=True):
        assert ((q.grad - p.grad).norm() / p.grad.norm()).item() < 1e-5, name
    eager.zero_grad()
    inner.zero_grad()

    start = {n: p.detach().clone() for n, p in eager.named_parameters()}
    opts = {
        id(m): cfg.build_optimizers(m, WIDTH, DEPTH, lr=3e-3, weight_decay=0.1)
        for m in (eager, compiled)
    }
    losses: dict[int, list[float]] = {id(eager): [], id(compiled): []}
    for tokens in batches:
        for m in (eager, compiled):
            loss = _loss(m, tokens)
            loss.backward()
            opts[id(m)].step()
            opts[id(m)].zero_grad()
            losses[id(m)].append(loss.item())
    assert losses[id(compiled)] == pytest.approx(losses[id(eager)], rel=1e-5)
    # AdamW divides by |g|: inductor's last-bit differences move an entry whose gradient
    # is near zero by a fraction of its step, so compare against how far training moved
    for (name, p), q in zip(eager.named_parameters(), inner.parameters(), strict=True):
        moved = (p - start[name]).norm()
        assert moved > 0, name
        assert ((q - p).norm() / moved).item() < 1e-3, name


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("hf_worker", HERE / "hf_worker.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # as an import does (dataclasses look it up)
    spec.loader.exec_module(mod)
    return mod


def test_hf_llama_under_ddp_matches_one_process(tmp_path, shallow):
    """2 gloo ranks, each with half of every global batch, end where one process ends that
    takes the same global batch as its two halves, each backward on loss / 2 (DDP's average
    of the two half-batch gradients), with the hooked model and Muon + AdamW."""
    cfg = shallow["muon-kimi+adamw"]
    worker = _worker_module()
    out = tmp_path / "ddp.pt"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run(
        [sys.executable, str(HERE / "hf_worker.py"), cfg.__file__, str(_free_port()), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    result = torch.load(out)
    assert result["max_rank_diff"] == 0.0
    assert result["multipliers"] == {"input": 1.0, "hidden": 0.5, "output": 0.5}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the ranks' thread count, so the kernels sum alike
    try:
        single = worker.train(cfg, rank=None)
    finally:
        torch.set_num_threads(threads)
    # bit for bit: the same kernels on the same parts, and a sum of two gradients is
    # the same in either order
    assert result["losses"] == single["losses"]
    assert list(result["params"]) == list(single["params"])
    unequal = [n for n, p in single["params"].items() if not torch.equal(result["params"][n], p)]
    assert unequal == []
