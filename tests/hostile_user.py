"""Careless and hostile user code for tests/cli/test_hostile_cli.py: optimizer classes, factories
and models that hang, exit, print, or step to NaN, inf, 1e300 or exactly nothing.

Imported by name (``hostile_user.NaNStep``: tests/ is on ``sys.path`` under pytest, and the
subprocess tests put it on ``PYTHONPATH``).
"""

from __future__ import annotations

import sys
import time

import torch


class _Base(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, weight_decay=0.0):
        super().__init__(params, {"lr": lr, "weight_decay": weight_decay})

    def delta(self, p):  # a sign step: the update of Lion
        return p.grad.sign()

    @torch.no_grad()
    def step(self, closure=None):
        for g in self.param_groups:
            for p in g["params"]:
                p.add_(self.delta(p), alpha=-g["lr"])


class NaNStep(_Base):
    def delta(self, p):
        return torch.full_like(p, float("nan"))


class InfStep(_Base):
    def delta(self, p):
        return torch.full_like(p, float("inf"))


class HugeStep(_Base):
    def delta(self, p):
        return torch.full_like(p, 1e300 if p.dtype == torch.float64 else 1e38)


class ZeroStep(_Base):
    def delta(self, p):
        return torch.zeros_like(p)


class HangingStep(_Base):
    def delta(self, p):
        while True:
            time.sleep(0.05)


class StubbornHang(_Base):
    """Swallows the first interruptions, as careless code with a bare ``except`` does."""

    def delta(self, p):
        for _ in range(3):
            try:
                while True:
                    time.sleep(0.05)
            except BaseException:  # noqa: BLE001 - the careless code under test
                pass
        while True:
            time.sleep(0.05)


class HangingInit(_Base):
    def __init__(self, params, lr=1e-3, weight_decay=0.0):
        while True:
            time.sleep(0.05)


def _exit_step(code):
    class ExitStep(_Base):
        def delta(self, p):
            sys.exit(code)

    ExitStep.__name__ = ExitStep.__qualname__ = f"ExitStep{code}"
    return ExitStep


ExitStep0, ExitStep3, ExitStep5 = _exit_step(0), _exit_step(3), _exit_step(5)
ExitStepText = _exit_step("bye")


class ExitInit(_Base):
    def __init__(self, params, lr=1e-3, weight_decay=0.0):
        sys.exit(4)


class RaisingInit(_Base):
    def __init__(self, params, lr=1e-3, weight_decay=0.0):
        raise RuntimeError("no such hardware\nsecond line")


class RaisingStep(_Base):
    def delta(self, p):
        raise KeyError("boom")


class MemoryStep(_Base):
    def delta(self, p):
        raise MemoryError()


class PrintingSign(_Base):
    """Lion's sign step, talking on stdout all the time."""

    def __init__(self, params, lr=1e-3, weight_decay=0.0):
        print("hello from __init__")
        super().__init__(params, lr, weight_decay)

    def delta(self, p):
        print("stepping", tuple(p.shape))
        return p.grad.sign()


class NotAnOptimizer:
    def __init__(self, params, lr=1e-3):
        pass


# factories for `probe --factory` and `coord-check --factory`
def nan_factory(groups, **kwargs):
    return NaNStep(groups, lr=kwargs.get("lr", 1e-3))


def zero_factory(groups, **kwargs):
    return ZeroStep(groups, lr=kwargs.get("lr", 1e-3))


def hanging_factory(groups, **kwargs):
    while True:
        time.sleep(0.05)


def exiting_factory(groups, **kwargs):
    sys.exit(7)


def int_factory(groups, **kwargs):
    return 3


def raising_factory(groups, **kwargs):
    raise ValueError("nope")


def printing_factory(groups, **kwargs):
    print("factory says hi")
    return torch.optim.AdamW(groups, **kwargs)


def hanging_step_factory(groups, **kwargs):
    return HangingStep(groups, lr=kwargs.get("lr", 1e-3))


def exiting_step_factory(groups, **kwargs):
    return ExitStep3(groups, lr=kwargs.get("lr", 1e-3))


# model factories for `coord-check --model-factory`
class _MLP(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.up_proj = torch.nn.Linear(width, 2 * width, bias=False)
        self.down_proj = torch.nn.Linear(2 * width, width, bias=False)

    def forward(self, x):
        return self.down_proj(torch.relu(self.up_proj(x)))


class _Attention(torch.nn.Module):
    def __init__(self, width, head_dim=8):
        super().__init__()
        self.head_dim, self.heads = head_dim, width // head_dim
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (
            torch.nn.Linear(width, width, bias=False) for _ in range(4)
        )

    def forward(self, x):
        B, T, W = x.shape
        q, k, v = (
            p(x).view(B, T, self.heads, self.head_dim).transpose(1, 2)
            for p in (self.q_proj, self.k_proj, self.v_proj)
        )
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, W))


class _Layer(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.input_layernorm = torch.nn.RMSNorm(width)
        self.self_attn = _Attention(width)
        self.post_attention_layernorm = torch.nn.RMSNorm(width)
        self.mlp = _MLP(width)

    def forward(self, h):
        h = h + self.self_attn(self.input_layernorm(h))
        return h + self.mlp(self.post_attention_layernorm(h))


class _Tiny(torch.nn.Module):
    """Llama-named (embed_tokens, layers.N.self_attn / mlp, norm, lm_head), head_dim 8."""

    def __init__(self, width, depth, vocab=40, poison=None):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(vocab, width)
        self.layers = torch.nn.ModuleList(_Layer(width) for _ in range(depth))
        self.norm = torch.nn.RMSNorm(width)
        self.lm_head = torch.nn.Linear(width, vocab, bias=False)
        self.poison = poison

    def forward(self, ids):
        h = self.embed_tokens(ids)
        if self.poison == "nan":
            h = h * float("nan")
        for layer in self.layers:
            h = layer(h)
        return self.lm_head(self.norm(h))


def nan_model(width, depth):
    return _Tiny(width, depth, poison="nan")


def hanging_model(width, depth):
    while True:
        time.sleep(0.05)


def exiting_model(width, depth):
    sys.exit(2)


def int_model(width, depth):
    return 5


def raising_model(width, depth):
    raise RuntimeError("cannot build")


def printing_model(width, depth):
    print("model", width, depth)
    return _Tiny(width, depth)


class _Diverging(_Tiny):
    """Finite at step 0; from its third forward pass (the measurement after the first
    update) the logits are NaN, as when training blows up."""

    def __init__(self, width, depth):
        super().__init__(width, depth)
        self.calls = 0

    def forward(self, ids):
        self.calls += 1
        out = super().forward(ids)
        return out * float("nan") if self.calls > 2 else out


def diverging_model(width, depth):
    return _Diverging(width, depth)


# model factories for `spectral check --model-factory` (and coord-check's inf loss)
class _Scaled(_Tiny):
    """Its output times ``factor``: 0 (nothing learns), inf, 1e30 (the loss is inf)."""

    def __init__(self, width, depth, factor):
        super().__init__(width, depth)
        self.factor = factor

    def forward(self, ids):
        return super().forward(ids) * self.factor


def zero_output_model(width, depth):
    return _Scaled(width, depth, 0.0)


def inf_output_model(width, depth):
    return _Scaled(width, depth, float("inf"))


def huge_output_model(width, depth):
    return _Scaled(width, depth, 1e30)


def width_ignoring_model(width, depth):
    return _Tiny(16, depth)


def none_model(width, depth):
    return None


def no_argument_model():
    return _Tiny(16, 2)


def three_argument_model(width, depth, vocab):
    return _Tiny(width, depth, vocab)


def tiny_model(width, depth):
    return _Tiny(width, depth)
