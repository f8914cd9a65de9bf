"""Reference models for μP under joint width–depth scaling (needs the ``torch`` extra).

``pip install -e '.[torch]'``. Nothing in the derivation engine imports this module.

Two models, both with the block multipliers ``α`` applied in the forward pass:

:class:`ResidualMLP` — the paper's residual network with biases (App. B.3), for any block
depth ``k``::

    h_0     = α_0 (W_0 x + b_0)
    h_l     = h_{l-1} + α_l (W_l^(k) φ(… φ(W_l^(1) h_{l-1} + b_l^(1)) …) + b_l^(k)),  l = 1..L
    h_{L+1} = α_{L+1} W_{L+1} h_L

``φ`` is ReLU (``relu=True``) or the identity (the paper's linear analysis). Parameter names:
``input.weight``, ``input.bias``, ``blocks.{l}.layers.{i}.weight`` / ``.bias``,
``output.weight`` (no output bias, as in the paper).

:class:`GPT` — a GPT-2 style decoder in nanoGPT's layout and parameter names
(``transformer.wte``, ``transformer.wpe``, ``transformer.h.{l}.ln_1`` / ``attn.c_attn`` /
``attn.c_proj`` / ``ln_2`` / ``mlp.c_fc`` / ``mlp.c_proj``, ``transformer.ln_f``,
``lm_head``): pre-LayerNorm, head dimension fixed at 64 (``n_head = width // 64``), FFN
width ``4·width``, byte vocabulary (256) by default, untied embeddings. ``experts=E``
(``top_k=k``) makes every MLP a Mixtral-style mixture of ``E`` such MLPs
(``h.{l}.mlp.gate``, the router, ``E × n``; ``h.{l}.mlp.experts.{e}.c_fc`` / ``.c_proj``)::

    x   = α_0 (wte[idx] + wpe[pos])
    x   = x + α_hidden · attn(ln_1(x))          (per block)
    x   = x + α_hidden · mlp(ln_2(x))
    h_L = x
    logits = α_output · lm_head(ln_f(h_L))

Multipliers. Both models take ``multipliers=`` in any of these forms
(see :func:`resolve_multipliers`):

* ``None`` — standard parameterisation (SP): every multiplier is 1, the same model with every
  ratio ``r_n = r_L = 1``;
* a generated config module (``spectral codegen``): its ``multipliers(width, depth)`` or its
  ``RULES``/``BASE_WIDTH``/``BASE_DEPTH`` give ``α`` at this model's width and depth;
* an ``hparams(...)`` dict, role → ``{"multiplier": x, ...}`` (``input_weight``,
  ``hidden_weight``, ``output_weight`` are read);
* a plain dict ``{"input": a0, "hidden": a, "output": a_out}``.

Multipliers are stored as plain Python floats, so ``torch.compile`` bakes them in and DDP /
FSDP see no extra state. Weights are initialised as in SP (std 0.02 for the GPT, PyTorch's
default for the MLP); for μP call the generated config's ``init_(model, width, depth)``,
which keeps that init as the base and scales it by each role's rule away from the base
(``init_std=`` draws every parameter by its role instead).

``forward(x, return_hidden=True)`` returns ``(output, h_L)``, the last block's output
(before ``ln_f`` in the GPT), for coordinate checks.

Constructor signatures are stable:

* ``ResidualMLP(d_in, d_out, width, depth, *, k=2, relu=True, bias=True, multipliers=None)``
* ``GPT(width, depth, *, vocab_size=256, block_size=256, head_dim=64, bias=True,
  layernorm=True, multipliers=None)``
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["GPT", "LAYERS", "Llama", "ResidualMLP", "resolve_multipliers"]

LAYERS = ("input", "hidden", "output")
_ROLE_OF_LAYER = {"input": "input_weight", "hidden": "hidden_weight", "output": "output_weight"}


def resolve_multipliers(source: Any, width: int, depth: int) -> dict[str, float]:
    """``{"input": α_0, "hidden": α_l, "output": α_{L+1}}`` from any accepted form."""
    if source is None:
        return {layer: 1.0 for layer in LAYERS}
    fn = getattr(source, "multipliers", None)
    if callable(fn):
        return _check({k: float(v) for k, v in fn(width, depth).items()})
    rules = getattr(source, "RULES", None)
    if rules is not None:
        r_n = width / source.BASE_WIDTH
        r_L = depth / source.BASE_DEPTH
        out = {}
        for layer, role in _ROLE_OF_LAYER.items():
            a, b = rules[role]["multiplier"]
            out[layer] = float(r_n**a * r_L**b)
        return out
    if isinstance(source, Mapping):
        if all(layer in source for layer in LAYERS):
            return _check({layer: float(source[layer]) for layer in LAYERS})
        if all(role in source for role in _ROLE_OF_LAYER.values()):
            return {
                layer: float(source[role]["multiplier"]) for layer, role in _ROLE_OF_LAYER.items()
            }
    raise TypeError(
        "multipliers must be None (SP), a generated config module, an hparams(...) dict "
        "(role -> {'multiplier': x}) or {'input': a0, 'hidden': a, 'output': a_out}; "
        f"got {type(source).__name__}"
    )


def _check(m: dict[str, float]) -> dict[str, float]:
    missing = [layer for layer in LAYERS if layer not in m]
    if missing:
        raise ValueError(f"multipliers lack {', '.join(missing)}")
    return {layer: m[layer] for layer in LAYERS}


class _Multipliers:
    """Block multipliers α as plain floats (no tensors: safe under compile, DDP, FSDP)."""

    width: int
    depth: int
    applies_mup_multipliers = True
    """Read by the generated module: this forward pass applies α itself, so
    ``build_optimizers`` needs no ``apply_multipliers`` (which refuses such a model)."""

    def set_multipliers(self, multipliers: Any) -> None:
        """Set ``alpha_input``, ``alpha_hidden``, ``alpha_output`` from a config, an
        ``hparams`` dict or ``{"input", "hidden", "output"}`` (``None``: SP, all 1)."""
        m = resolve_multipliers(multipliers, self.width, self.depth)
        self.alpha_input, self.alpha_hidden, self.alpha_output = (
            m["input"],
            m["hidden"],
            m["output"],
        )


class _Block(nn.Module):
    """``k`` linear maps with optional ReLU between them (none after the last)."""

    def __init__(self, width: int, k: int, relu: bool, bias: bool):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width, bias=bias) for _ in range(k))
        self.relu = relu

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            if i > 0 and self.relu:
                h = F.relu(h)
            h = layer(h)
        return h


class ResidualMLP(_Multipliers, nn.Module):
    """The paper's residual MLP: ``L = depth`` blocks of ``k`` maps of width ``width``."""

    def __init__(
        self,
        d_in: int,
        d_out: int,
        width: int,
        depth: int,
        *,
        k: int = 2,
        relu: bool = True,
        bias: bool = True,
        multipliers: Any = None,
    ):
        super().__init__()
        if k < 1 or depth < 1 or width < 1:
            raise ValueError(f"need k, depth, width >= 1, got k={k}, depth={depth}, width={width}")
        self.d_in, self.d_out, self.width, self.depth, self.k = d_in, d_out, width, depth, k
        self.input = nn.Linear(d_in, width, bias=bias)
        self.blocks = nn.ModuleList(_Block(width, k, relu, bias) for _ in range(depth))
        self.output = nn.Linear(width, d_out, bias=False)
        self.set_multipliers(multipliers)

    def forward(self, x: torch.Tensor, return_hidden: bool = False):
        h = self.alpha_input * self.input(x)
        for block in self.blocks:
            h = h + self.alpha_hidden * block(h)
        out = self.alpha_output * self.output(h)
        return (out, h) if return_hidden else out


class _Attention(nn.Module):
    def __init__(self, width: int, head_dim: int, bias: bool):
        super().__init__()
        self.n_head = width // head_dim
        self.head_dim = head_dim
        self.c_attn = nn.Linear(width, 3 * width, bias=bias)
        self.c_proj = nn.Linear(width, width, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        k = k.view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        v = v.view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        # head_dim is fixed, so the usual 1/sqrt(head_dim) logit scale needs no μP change
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class _MLP(nn.Module):
    def __init__(self, width: int, bias: bool):
        super().__init__()
        self.c_fc = nn.Linear(width, 4 * width, bias=bias)
        self.c_proj = nn.Linear(4 * width, width, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x)))


class _MoE(nn.Module):
    """Mixtral-style mixture of experts in place of the MLP: a router ``gate`` (``E × n``, no
    bias) scores ``E`` experts (each a GPT MLP), the top ``k`` scores are softmaxed into gates,
    and the block adds the gated sum. Every expert is evaluated (dense: these models are
    small); an expert outside a token's top ``k`` has gate 0."""

    def __init__(self, width: int, bias: bool, experts: int, top_k: int):
        super().__init__()
        if not 1 <= top_k <= experts:
            raise ValueError(f"need 1 <= top_k <= experts, got top_k={top_k}, experts={experts}")
        self.top_k = top_k
        self.gate = nn.Linear(width, experts, bias=False)
        self.experts = nn.ModuleList(_MLP(width, bias) for _ in range(experts))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.gate(x)
        top, index = logits.topk(self.top_k, dim=-1)
        gates = torch.zeros_like(logits).scatter(-1, index, F.softmax(top, dim=-1))
        out = gates[..., :1] * self.experts[0](x)
        for e in range(1, len(self.experts)):
            out = out + gates[..., e:e + 1] * self.experts[e](x)
        return out


class _GPTBlock(nn.Module):
    def __init__(self, width: int, head_dim: int, bias: bool, layernorm: bool, experts: int = 0, top_k: int = 2):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width, bias=bias) if layernorm else nn.Identity()
        self.attn = _Attention(width, head_dim, bias)
        self.ln_2 = nn.LayerNorm(width, bias=bias) if layernorm else nn.Identity()
        self.mlp = _MoE(width, bias, experts, top_k) if experts else _MLP(width, bias)

    def forward(self, x: torch.Tensor, alpha: float) -> torch.Tensor:
        x = x + alpha * self.attn(self.ln_1(x))
        return x + alpha * self.mlp(self.ln_2(x))


def _check_size(width: int, depth: int, head_dim: int) -> None:
    """The decoders' shared refusals: heads of ``head_dim`` must tile the width."""
    if width % head_dim:
        raise ValueError(f"width {width} is not a multiple of head_dim {head_dim}")
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")


class GPT(_Multipliers, nn.Module):
    """GPT-2 style decoder (nanoGPT layout): ``depth`` blocks of width ``width``."""

    def __init__(
        self,
        width: int,
        depth: int,
        *,
        vocab_size: int = 256,
        block_size: int = 256,
        head_dim: int = 64,
        bias: bool = True,
        layernorm: bool = True,
        multipliers: Any = None,
        experts: int = 0,
        top_k: int = 2,
    ):
        super().__init__()
        _check_size(width, depth, head_dim)
        self.width, self.depth = width, depth
        self.vocab_size, self.block_size, self.head_dim = vocab_size, block_size, head_dim
        self.transformer = nn.ModuleDict(
            {
                "wte": nn.Embedding(vocab_size, width),
                "wpe": nn.Embedding(block_size, width),
                "h": nn.ModuleList(
                    _GPTBlock(width, head_dim, bias, layernorm, experts, top_k) for _ in range(depth)
                ),
                "ln_f": nn.LayerNorm(width, bias=bias) if layernorm else nn.Identity(),
            }
        )
        # untied: input and output embeddings follow different rules
        self.lm_head = nn.Linear(width, vocab_size, bias=False)
        self.set_multipliers(multipliers)
        self._sp_init()

    def _sp_init(self, std: float = 0.02) -> None:
        if self.lm_head.weight.is_meta:  # no values to draw (a sweep plans its runs on meta)
            return
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=std)
                if getattr(module, "bias", None) is not None:
                    nn.init.zeros_(module.bias)

    def forward(self, idx: torch.Tensor, return_hidden: bool = False):
        T = idx.shape[1]
        if T > self.block_size:
            raise ValueError(f"sequence length {T} exceeds block_size {self.block_size}")
        pos = torch.arange(T, device=idx.device)
        x = self.alpha_input * (self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x, self.alpha_hidden)
        logits = self.alpha_output * self.lm_head(self.transformer.ln_f(x))
        return (logits, x) if return_hidden else logits

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


def _rope(x: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotary position embedding on ``(B, heads, T, head_dim)``, pairs ``(2i, 2i + 1)``
    rotated by ``t / theta^(2i / head_dim)`` (Llama's interleaved form)."""
    T, d = x.shape[-2], x.shape[-1]
    freqs = theta ** (-torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d)
    angles = torch.outer(torch.arange(T, device=x.device, dtype=torch.float32), freqs)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


class _LlamaAttention(nn.Module):
    def __init__(self, width: int, head_dim: int, theta: float):
        super().__init__()
        self.n_head, self.head_dim, self.theta = width // head_dim, head_dim, theta
        self.wq = nn.Linear(width, width, bias=False)
        self.wk = nn.Linear(width, width, bias=False)
        self.wv = nn.Linear(width, width, bias=False)
        self.wo = nn.Linear(width, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = (
            w(x).view(B, T, self.n_head, self.head_dim).transpose(1, 2)
            for w in (self.wq, self.wk, self.wv)
        )
        q, k = _rope(q, self.theta), _rope(k, self.theta)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(y.transpose(1, 2).contiguous().view(B, T, C))


class _SwiGLU(nn.Module):
    def __init__(self, width: int, hidden: int):
        super().__init__()
        self.w1 = nn.Linear(width, hidden, bias=False)
        self.w2 = nn.Linear(hidden, width, bias=False)
        self.w3 = nn.Linear(width, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class _LlamaBlock(nn.Module):
    def __init__(self, width: int, head_dim: int, hidden: int, theta: float):
        super().__init__()
        self.attention_norm = nn.RMSNorm(width, eps=1e-5)
        self.attention = _LlamaAttention(width, head_dim, theta)
        self.ffn_norm = nn.RMSNorm(width, eps=1e-5)
        self.feed_forward = _SwiGLU(width, hidden)

    def forward(self, x: torch.Tensor, alpha: float) -> torch.Tensor:
        x = x + alpha * self.attention(self.attention_norm(x))
        return x + alpha * self.feed_forward(self.ffn_norm(x))


def ffn_hidden_dim(width: int, multiple_of: int) -> int:
    """torchtitan's SwiGLU width: ``8 / 3 · width`` rounded up to a multiple of
    ``multiple_of`` (its ``compute_ffn_hidden_dim`` with no ``ffn_dim_multiplier``)."""
    hidden = int(2 * 4 * width / 3)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


class Llama(_Multipliers, nn.Module):
    """torchtitan's Llama3 layout, parameter names and default init, in plain torch.

    Names: ``tok_embeddings``, ``layers.{l}.attention_norm`` / ``attention.wq|wk|wv|wo`` /
    ``ffn_norm`` / ``feed_forward.w1|w2|w3``, ``norm``, ``lm_head`` (torchtitan 0.3.0's
    head name), so spectral's ``torchtitan`` family places it. Pre-RMSNorm, SwiGLU MLP of
    width :func:`ffn_hidden_dim`, rotary positions (``theta``; without llama3's frequency
    scaling, which torchtitan applies for long contexts), no biases, untied.

    Init, torchtitan's defaults (``init_weights``): the embedding N(0, 1); ``wq``, ``wk``,
    ``wv``, ``w1`` truncated N(0, init_std²) cut at ±2; ``wo``, ``w2``, ``w3`` the same with
    std ``init_std / sqrt(2 (l + 1))`` in layer ``l`` (its depth init); norms 1; the head
    truncated N(0, 1 / width) cut at ±3 std. This is "the user's model": the sweep keeps
    it as the base and scales it by the rules away from the base (``init_`` with no
    ``init_std``), and SP keeps it at every width (the head's std then moves as
    width^-½, torchtitan's own law).
    """

    def __init__(
        self,
        width: int,
        depth: int,
        *,
        vocab_size: int = 256,
        block_size: int = 256,
        head_dim: int = 64,
        multiple_of: int = 16,
        theta: float = 500000.0,
        init_std: float = 0.02,
        multipliers: Any = None,
    ):
        super().__init__()
        _check_size(width, depth, head_dim)
        self.width, self.depth = width, depth
        self.vocab_size, self.block_size, self.head_dim = vocab_size, block_size, head_dim
        hidden = ffn_hidden_dim(width, multiple_of)
        self.tok_embeddings = nn.Embedding(vocab_size, width)
        self.layers = nn.ModuleList(
            _LlamaBlock(width, head_dim, hidden, theta) for _ in range(depth)
        )
        self.norm = nn.RMSNorm(width, eps=1e-5)
        self.lm_head = nn.Linear(width, vocab_size, bias=False)
        self.set_multipliers(multipliers)
        self._torchtitan_init(init_std)

    @torch.no_grad()
    def _torchtitan_init(self, std: float) -> None:
        if self.lm_head.weight.is_meta:  # no values to draw (a sweep plans its runs on meta)
            return
        nn.init.normal_(self.tok_embeddings.weight)
        for layer_id, block in enumerate(self.layers):
            depth_std = std / (2 * (layer_id + 1)) ** 0.5
            att, ffn = block.attention, block.feed_forward
            for linear in (att.wq, att.wk, att.wv, ffn.w1):
                nn.init.trunc_normal_(linear.weight, mean=0.0, std=std)
            for linear in (att.wo, ffn.w2, ffn.w3):
                nn.init.trunc_normal_(linear.weight, mean=0.0, std=depth_std)
            block.attention_norm.reset_parameters()
            block.ffn_norm.reset_parameters()
        self.norm.reset_parameters()
        head_std = self.width**-0.5
        nn.init.trunc_normal_(
            self.lm_head.weight, mean=0.0, std=head_std, a=-3 * head_std, b=3 * head_std
        )

    def forward(self, idx: torch.Tensor, return_hidden: bool = False):
        if idx.shape[1] > self.block_size:
            raise ValueError(f"sequence length {idx.shape[1]} exceeds block_size {self.block_size}")
        x = self.alpha_input * self.tok_embeddings(idx)
        for block in self.layers:
            x = block(x, self.alpha_hidden)
        logits = self.alpha_output * self.lm_head(self.norm(x))
        return (logits, x) if return_hidden else logits


def _selftest() -> None:  # pragma: no cover - quick manual check
    m = GPT(64, 2)
    logits, h = m(torch.randint(0, 256, (2, 16)), return_hidden=True)
    assert logits.shape == (2, 16, 256) and h.shape == (2, 16, 64)
    mlp = ResidualMLP(8, 3, 32, 4, k=3)
    out, h = mlp(torch.randn(5, 8), return_hidden=True)
    assert out.shape == (5, 3) and h.shape == (5, 32)
    assert math.isfinite(float(out.sum()))


if __name__ == "__main__":  # pragma: no cover
    _selftest()
