"""Careless and hostile user code for tests/test_hostile_cli.py: optimizer classes, factories
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
class _Tiny(torch.nn.Module):
    def __init__(self, width, depth, vocab=64, poison=None):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        self.blocks = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(depth))
        self.head = torch.nn.Linear(width, vocab)
        self.poison = poison

    def forward(self, ids):
        h = self.embed(ids)
        for b in self.blocks:
            h = h + torch.relu(b(h))
        out = self.head(h)
        if self.poison == "nan":
            out = out * float("nan")
        return out


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
