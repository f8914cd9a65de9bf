"""A stand-in for litgpt's GPT (litgpt/model.py, 0.5.x): the same module and config names,
written here because litgpt 0.5.13 pins huggingface-hub<1.4 while transformers 5 needs
>=1.31, so the two do not install together. Causal attention without RoPE or a KV cache
(what spectral reads is the names and where the residual additions are); soft-capping of
the logits and the attention scores as litgpt computes it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass
class Config:
    name: str = "stand-in"
    block_size: int = 64
    vocab_size: int = 128
    padded_vocab_size: int | None = None
    n_layer: int = 2
    n_embd: int = 64
    n_head: int = 4
    head_size: int | None = None
    intermediate_size: int | None = None
    bias: bool = False
    lm_head_bias: bool = False
    scale_embeddings: bool = False
    post_attention_norm: bool = False
    post_mlp_norm: bool = False
    parallel_residual: bool = False
    final_logit_softcapping: float | None = None
    attention_logit_softcapping: float | None = None
    norm_eps: float = 1e-5
    mlp_class_name: str = "LLaMAMLP"  # the two litgpt names this stand-in builds
    norm_class_name: str = "RMSNorm"

    def __post_init__(self) -> None:
        self.padded_vocab_size = self.padded_vocab_size or self.vocab_size
        self.head_size = self.head_size or self.n_embd // self.n_head
        self.intermediate_size = self.intermediate_size or 4 * self.n_embd


def do_softcapping(x: torch.Tensor, thresh: float) -> torch.Tensor:
    """litgpt's soft-capping (model.py): a tanh of fixed height thresh."""
    return torch.tanh(x / thresh) * thresh


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class CausalSelfAttention(nn.Module):
    def __init__(self, config: Config) -> None:
        super().__init__()
        assert config.head_size is not None
        self.qkv = nn.Linear(config.n_embd, 3 * config.n_head * config.head_size, bias=config.bias)
        self.proj = nn.Linear(config.n_head * config.head_size, config.n_embd, bias=config.bias)
        self.config = config

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        h, d = self.config.n_head, self.config.head_size
        q, k, v = self.qkv(x).view(B, T, 3, h, d).permute(2, 0, 3, 1, 4)
        cap = self.config.attention_logit_softcapping
        if cap is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # litgpt's CausalSelfAttention.scaled_dot_product_attention: SDPA has no cap
            scores = do_softcapping(q @ k.mT / math.sqrt(d), cap)
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(diagonal=1)
            scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
            y = F.softmax(scores, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(B, T, h * d))


class LLaMAMLP(nn.Module):
    def __init__(self, config: Config) -> None:
        super().__init__()
        assert config.intermediate_size is not None
        self.fc_1 = nn.Linear(config.n_embd, config.intermediate_size, bias=config.bias)
        self.fc_2 = nn.Linear(config.n_embd, config.intermediate_size, bias=config.bias)
        self.proj = nn.Linear(config.intermediate_size, config.n_embd, bias=config.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.silu(self.fc_1(x)) * self.fc_2(x))


class Block(nn.Module):
    def __init__(self, config: Config) -> None:
        super().__init__()
        norm = lambda: RMSNorm(config.n_embd, eps=config.norm_eps)  # noqa: E731
        self.norm_1 = norm()
        self.attn = CausalSelfAttention(config)
        self.post_attention_norm = norm() if config.post_attention_norm else nn.Identity()
        self.norm_2 = norm()
        self.mlp = LLaMAMLP(config)
        self.post_mlp_norm = norm() if config.post_mlp_norm else nn.Identity()
        self.config = config

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x_normed = self.norm_1(x)
        attention_output = self.post_attention_norm(self.attn(x_normed))
        if self.config.parallel_residual:
            x_normed = self.norm_2(x)
            x = attention_output + x
        else:
            x = attention_output + x
            x_normed = self.norm_2(x)
        return self.post_mlp_norm(self.mlp(x_normed)) + x


class GPT(nn.Module):
    def __init__(self, config: Config) -> None:
        super().__init__()
        assert config.padded_vocab_size is not None
        self.config = config
        self.lm_head = nn.Linear(config.n_embd, config.padded_vocab_size, bias=config.lm_head_bias)
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(config.padded_vocab_size, config.n_embd),
                h=nn.ModuleList(Block(config) for _ in range(config.n_layer)),
                ln_f=RMSNorm(config.n_embd, eps=config.norm_eps),
            )
        )

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.transformer.wte(idx)
        if self.config.scale_embeddings:
            x = x * torch.tensor(math.sqrt(self.config.n_embd), dtype=x.dtype)
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        cap = self.config.final_logit_softcapping
        return logits if cap is None else do_softcapping(logits, cap)  # after lm_head, as litgpt
