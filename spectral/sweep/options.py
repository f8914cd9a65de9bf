"""What a sweep runs: its configuration, presets and plan, before anything is trained.

:class:`SweepConfig` holds one optimizer's sweep (sizes, learning-rate grid, training
recipe, base values); :func:`plan` lists its runs (:class:`Job`); :data:`PRESETS` are the
command line's defaults. Nothing here imports torch at import time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..base_values import check_base_value
from ..errors import SpecError

__all__ = [
    "OPTIMIZERS",
    "PARAMETERIZATIONS",
    "PRESETS",
    "RULES_K",
    "Job",
    "SweepConfig",
    "check_base_values",
    "lr_factor",
    "plan",
    "resolve_device",
    "split_optimizer",
]

PARAMETERIZATIONS = ("sp", "mup-k1", "mup")
RULES_K = {"sp": 2, "mup-k1": 1, "mup": 2}
"""The ``k`` each parameterisation's rules are derived with (SP: the ``k = 2`` module at the base size)."""
OPTIMIZERS = ("adamw", "muon-kimi+adamw", "muon-shape+adamw", "muon-unit-rms+adamw")
"""The sweep's optimizers; the two Muon scale modes (issue 46, item 5 (iii)) are spectral.sweep.muon_scale's."""

# presets: a CPU run that fits in minutes, and a GPU run closer to the paper
PRESETS: dict[str, dict[str, Any]] = {
    # ~15-20 minutes per optimizer on 2 shared CPU cores: the base model is the smallest one
    # (tune small, transfer up); head_dim 32 so that width 32 has one head.
    "cpu": dict(
        widths=(32, 64, 128),
        depth=2,
        depths=(2, 4, 8, 16),
        width=32,
        base_width=32,
        base_depth=2,
        head_dim=32,
        log2_lrs={"adamw": (-11, -10, -9, -8, -7, -6, -5), "muon-kimi+adamw": (-8, -7, -6, -5, -4, -3)},
        steps=120,
        batch_size=16,
        block_size=64,
        eval_batches=8,
        n_bytes=4 * 2**20,
    ),
    # the paper's base model (256, 4) and head_dim 64, on one GPU
    "gpu": dict(
        widths=(256, 512, 1024, 2048),
        depth=4,
        depths=(4, 8, 16, 32, 64),
        width=256,
        base_width=256,
        base_depth=4,
        head_dim=64,
        log2_lrs={"adamw": (-12, -11, -10, -9, -8, -7, -6, -5), "muon-kimi+adamw": (-10, -9, -8, -7, -6, -5, -4, -3)},
        steps=1000,
        batch_size=64,
        block_size=256,
        eval_batches=32,
        n_bytes=64 * 2**20,
    ),
    # the μP-vs-SP comparison at 4-8x the CPU widths in one command of at most 8 minutes on
    # one H100/H200: --estimate timed it at 5.6 min on an H200, and it ran in 7.1 min wall
    # (docs/sweep/gpu/); depth 16 would add 2.8 min. A preset may also name the optimizer,
    # the parameterisations and the base tuning, used unless given.
    "gpu-8min": dict(
        optimizers=("muon-kimi+adamw",),
        params=("sp", "mup"),
        # the base's σ_hidden × η (α_out = 1, the base's pick over 0.25-16 in docs/sweep/gpu): on
        # one H100 it picked 2 × 0.02 and brought μP at n = 1024 from 1.546 to 1.498, level with
        # SP re-tuned there over σ_hidden × η (1.483; docs/sweep/gap/gpu). Same run count as
        # the α_out tuning it replaces (3 candidates).
        tune=(("init.hidden_weight", (1.0, 2.0, 4.0)),),
        # SP re-tuned at every size over the same α_out × η (--sp-retune) adds 70 SP runs, about
        # 5 min on an H200: off here to keep 8 minutes; its SP re-tunes η only
        sp_retune=False,
        widths=(128, 256, 512, 1024),
        depth=2,
        depths=(2, 4, 8),
        width=128,
        base_width=128,
        base_depth=2,
        head_dim=64,
        log2_lrs={"adamw": (-12, -11, -10, -9, -8, -7, -6), "muon-kimi+adamw": (-9, -8, -7, -6, -5, -4, -3)},
        steps=200,
        batch_size=32,
        block_size=256,
        eval_batches=8,
        n_bytes=16 * 2**20,
    ),
    # --fit-exponent in gpu-8min's regime on one lent GPU (not the paper's App. E: 200 steps, not 1,221;
    # 32 × 256 bytes of the stdlib, vocabulary 256, not BPE on OpenWebText; base 128 × 2, not 256 × 4):
    # gpu-8min's base and tokens, μP only,
    # the hidden (Muon-Kimi) and output (AdamW) η's exponents in width over 128-1024, two seeds.
    # Factors 2^-3 … 2^4: the CPU optima of these rows and of the input η lie within -2.2 … +3.0
    # (docs/sweep/exponents), so each keeps a neighbour on both sides. From the H200 step times
    # of docs/sweep/gpu/estimate.txt: 6 base runs, then 30 grid points (the factor 1 is shared
    # by both keys) × 4 widths, 124 runs trained, about 6.3 min of training (docs/transfer.md).
    "gpu-exponent": dict(
        optimizers=("muon-kimi+adamw",),
        fit_exponent=("lr.hidden_weight", "lr.output_weight"),
        log2_factors=(-3, -2, -1, 0, 1, 2, 3, 4),
        seeds=(0, 1),
        widths=(128, 256, 512, 1024),
        depth=2,
        depths=(2,),
        width=128,
        base_width=128,
        base_depth=2,
        head_dim=64,
        log2_lrs={"adamw": (-9, -8, -7), "muon-kimi+adamw": (-7, -6, -5)},
        steps=200,
        batch_size=32,
        block_size=256,
        eval_batches=8,
        n_bytes=16 * 2**20,
    ),
}
for _preset in PRESETS.values():  # the Muon scale modes' default η grid: Muon-Kimi's (the same Muon)
    for _name in OPTIMIZERS[2:]:
        _preset["log2_lrs"].setdefault(_name, _preset["log2_lrs"]["muon-kimi+adamw"])


@dataclass(frozen=True)
class SweepConfig:
    optimizer: str = "adamw"
    parameterizations: tuple[str, ...] = PARAMETERIZATIONS
    widths: tuple[int, ...] = (32, 64, 128)
    depth: int = 2
    """Depth of the width sweep."""
    depths: tuple[int, ...] = (2, 4, 8, 16)
    width: int = 32
    """Width of the depth sweep."""
    base_width: int = 32
    base_depth: int = 2
    log2_lrs: tuple[int, ...] = (-10, -9, -8, -7, -6, -5)
    steps: int = 120
    warmup: int | None = None
    """Warm-up steps; ``None``: 10% of ``steps``."""
    min_lr_ratio: float = 0.1
    batch_size: int = 16
    block_size: int = 64
    head_dim: int = 32
    eval_batches: int = 8
    init_std: float = 0.02
    weight_decay: float = 0.0
    eps: float = 1e-16
    multiplier: float | dict[str, float] = 1.0
    """Base block multiplier(s) α at (base_width, base_depth), as the generated module's
    ``multiplier=`` takes them: a number, or a dict keyed by layer (``{"output": 0.5}`` is
    microsoft/mup's ``output_mult``), role, optimizer or ``default``. Every
    parameterisation gets it (SP too: SP is the recipe evaluated at the base size)."""
    lr_scale: dict[str, float] | None = None
    """Per-role (or per-optimizer) factors on the grid's base learning rate, as
    ``{"input_weight": 0.25}``: that role's base η is ``0.25 × 2^log2_lr``, every other
    role's the grid's (the generated module's ``lr={"default": η, role: …}``). ``None``: one
    base η for all."""
    init_scale: dict[str, float] | None = None
    """Per-role (or per-optimizer) factors on the base init std, as ``{"hidden_weight": 2}``:
    that role's base std is ``2 × init_std`` (the generated module's ``init_std={"default":
    σ, role: …}``), scaled by the rule as usual. ``None``: one base std for all."""
    grad_clip: float = 1.0
    experts: int = 0
    """Mixtral-style mixture of this many experts in every block (0: the dense GPT); the
    router is the ``router_weight`` role (docs/router.md)."""
    top_k: int = 2
    """Experts each token is routed to (with ``experts``)."""
    ablation: tuple[tuple[str, str, float], ...] = ()
    """``spectral sweep --ablate``: (role, HP, width exponent) entries that replace the
    derived rule's exponent of ``r_n`` in ``mup`` runs (``0.0``: SP's rule); empty: the
    derived rules (:mod:`spectral.sweep.ablate`)."""
    ablation_name: str = ""
    """What ``ablation`` swaps, in words (``hidden init``): the tables' row name."""
    model: str = "gpt"
    """The reference model: ``gpt`` (nanoGPT's layout, every matrix drawn with
    ``init_std``) or ``llama`` (torchtitan's Llama3 layout, names and default init, which
    the runs keep as the base: :class:`spectral.models.torch.Llama`)."""
    seed: int = 0
    device: str = "cpu"
    threads: int | None = None

    @property
    def init_stds(self) -> float | dict[str, float] | None:
        """The base init std(s) the generated module's ``init_`` takes: ``init_std``, or a
        dict with ``init_scale``'s roles scaled; ``None`` for the Llama, whose own init is
        the base (``init_scale`` then multiplies its values: :func:`spectral.sweep.train.build_run`)."""
        if self.model == "llama":
            return None
        if not self.init_scale:
            return self.init_std
        return {"default": self.init_std} | {k: self.init_std * v for k, v in self.init_scale.items()}

    @property
    def warmup_steps(self) -> int:
        return self.warmup if self.warmup is not None else max(1, self.steps // 10)

    def settings(self) -> dict[str, Any]:
        """What every run of this sweep shares (besides the data): part of each run key.

        ``multiplier`` is there only when it is not the default 1.0, so that the keys of
        runs recorded before it existed (all at α = 1) still match and resume.
        """
        extra = {} if self.multiplier == 1.0 else {"multiplier": self.multiplier}
        scale = {k: v for k, v in (self.lr_scale or {}).items() if v != 1.0}  # a factor 1 changes nothing
        if scale:
            extra["lr_scale"] = scale
        init = {k: v for k, v in (self.init_scale or {}).items() if v != 1.0}
        if init:
            extra["init_scale"] = init
        if self.model != "gpt":  # only then: the keys of GPT runs stay as they were
            extra["model"] = self.model
        if self.experts:  # only then: the keys of dense runs stay as they were
            extra["experts"], extra["top_k"] = self.experts, self.top_k
        if self.ablation:  # likewise: runs under the derived rules keep their keys
            extra["ablation"] = {"name": self.ablation_name,
                                 "exponents": [[role, hp, float(a)] for role, hp, a in self.ablation]}
        return extra | {
            "optimizer": self.optimizer,
            "base_width": self.base_width,
            "base_depth": self.base_depth,
            "steps": self.steps,
            "warmup": self.warmup_steps,
            "min_lr_ratio": self.min_lr_ratio,
            "batch_size": self.batch_size,
            "block_size": self.block_size,
            "head_dim": self.head_dim,
            "eval_batches": self.eval_batches,
            "init_std": self.init_std,
            "weight_decay": self.weight_decay,
            "eps": self.eps,
            "grad_clip": self.grad_clip,
            "seed": self.seed,
        }

    def sizes(self, axis: str) -> list[tuple[int, int]]:
        """``(width, depth)`` pairs of one axis, smallest first."""
        if axis == "width":
            return [(n, self.depth) for n in sorted(self.widths)]
        if axis == "depth":
            return [(self.width, L) for L in sorted(self.depths)]
        raise ValueError(f"axis must be 'width' or 'depth', not {axis!r}")


@dataclass(frozen=True)
class Job:
    parameterization: str
    width: int
    depth: int
    log2_lr: int

    @property
    def lr(self) -> float:
        return 2.0**self.log2_lr


def plan(cfg: SweepConfig) -> list[Job]:
    """Every run of the sweep, each (parameterisation, size, LR) once, width axis first."""
    seen: set[Job] = set()
    jobs: list[Job] = []
    for axis in ("width", "depth"):
        for width, depth in cfg.sizes(axis):
            for p in cfg.parameterizations:
                for e in cfg.log2_lrs:
                    job = Job(p, width, depth, e)
                    if job not in seen:
                        seen.add(job)
                        jobs.append(job)
    return jobs


def lr_factor(step: int, steps: int, warmup: int, min_ratio: float) -> float:
    """Linear warm-up to 1 over ``warmup`` steps, then cosine decay to ``min_ratio``."""
    if step < warmup:
        return (step + 1) / warmup
    span = max(1, steps - warmup)
    progress = min(1.0, (step - warmup) / span)
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def split_optimizer(name: str) -> tuple[str, str]:
    name = name.strip().lower()
    if name == "adamw":
        return "adamw", "adamw"
    if name in ("muon-kimi+adamw", "muon-kimi-adamw"):
        return "muon-kimi", "adamw"
    from .muon_scale import SWEEP_OPTIMIZERS  # Megatron-LM's Muon scale modes

    if name in SWEEP_OPTIMIZERS:
        return SWEEP_OPTIMIZERS[name]
    raise SpecError(f"sweep optimizer must be one of {', '.join(OPTIMIZERS)}, not {name!r}")


def resolve_device(device: str) -> str:
    if device == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def check_base_values(cfg: SweepConfig) -> None:
    """Refuse a negative ``--multiplier`` / ``--lr-scale`` / ``--init-scale`` or a key that names nothing for this
    optimizer, before any training (the same check as ``spectral transfer --multiplier``)."""
    from ..transfer import plan as transfer_plan  # the derivation engine: only when checking
    from .muon_scale import engine_optimizer

    hidden, others = split_optimizer(cfg.optimizer)
    p = transfer_plan(engine_optimizer(hidden), None if others == hidden else engine_optimizer(others), 2)
    check_base_value(cfg.multiplier, p, "multiplier")
    if cfg.lr_scale is not None:
        if not isinstance(cfg.lr_scale, dict):
            raise SpecError("--lr-scale: expected ROLE=FACTOR pairs, e.g. input_weight=0.25")
        check_base_value(cfg.lr_scale, p, "lr_scale")
    if cfg.init_scale is not None:
        if not isinstance(cfg.init_scale, dict):
            raise SpecError("--init-scale: expected ROLE=FACTOR pairs, e.g. hidden_weight=2")
        check_base_value(cfg.init_scale, p, "init_scale")
