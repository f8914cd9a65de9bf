"""Coordinate checks: train the reference models a few steps across widths and depths.

For each parameterization (``sp``, ``mup-k1``, ``mup``), each point of a width sweep (at
fixed depth) and of a depth sweep (at fixed width) and each seed, a reference model is
trained for ``steps`` steps on one fixed batch. After every step the RMS norm of the last
block's output ``‖h_L(t)‖_R``, of its change since initialisation ``‖h_L(t) − h_L(0)‖_R``
(same input batch), and of the network output and its change are recorded. The log–log
slope of each against width and against depth at the last step is fitted.

**Pass rule.** A slope passes when ``|slope| ≤ 0.15`` (:data:`SLOPE_TOLERANCE`): the
quantity neither grows nor shrinks with width or depth by more than ``n^0.15`` / ``L^0.15``
across the sweep. μP parameterizations should pass; for ``sp`` the same test is reported
(it is expected to fail, which is the point of the comparison).

**Parameterizations.** Every point is built from the config module that
:mod:`spectral.codegen` generates (:func:`spectral.codegen.load_generated`), as the LR sweep
does: ``multipliers`` for the model, ``init_`` for the initialisation, ``build_optimizers``
for the real optimizer implementations (with their per-group compensations).

* ``sp`` — every ratio is 1: the ``mup`` module evaluated at ``(BASE_WIDTH, BASE_DEPTH)``
  (multipliers 1, base init std, base lr) at every width and depth. The base width and
  depth are the smallest of the sweep.
* ``mup-k1`` — the module generated with ``k = 1`` (Depth-μP style, ``α = 1/√L``).
* ``mup`` — the module generated with ``k = max(2, k)`` (CompleteP style, ``α = 1/L``).

``α_base`` (``--alpha-base``) multiplies the hidden blocks' multiplier only. ``init_std`` is
0.02 for the GPT and ``1/√n_base`` for the MLP, whose dense input layer ``init_`` draws with
``init_std/√d_in``; biases get their role's std, norm gains 1 and norm biases 0.

**Hybrids.** With a matrices-only optimizer (Muon, Muon-Kimi, Shampoo, SOAP, SSO), or when
``others`` is given, the hidden weight matrices use ``optimizer`` and every other parameter
(embeddings/input, readout, biases, LayerNorm) uses ``others`` (AdamW by default), each
under its own derived rules — the paper's Muon-Kimi-AdamW setup.

**Any optimizer.** ``spec`` (a declaration, e.g. from :func:`spectral.spec_file.load_spec`)
replaces the catalog name ``optimizer``, and ``factory(param_groups, **kwargs)`` builds its
implementation: the generated module is rendered from the declaration and its
``build_optimizers`` gets ``factories={name: factory}``. A factory also replaces a catalog
optimizer's built-in implementation.

**Your own model.** ``model_factory(width, depth)`` replaces the reference models: any
``nn.Module`` that the generated module's adapters recognise (Hugging Face Llama/Qwen2/Mistral
and GPT-2, nanoGPT, or anything with those module names), taking a ``LongTensor`` of token
ids ``(B, T)`` and returning logits ``(B, T, V)`` or an object with ``.logits``. Every point
goes through the generated module as a user's training script would: ``apply_multipliers``
(forward hooks), ``init_`` and ``build_optimizers``; for ``sp`` the hooks hold the base
multipliers and ``init_`` / ``build_optimizers`` are evaluated at ``(BASE_WIDTH,
BASE_DEPTH)``. ``h_L`` is the input of ``final_module(model)`` (the final norm), caught with a
forward pre-hook; a model without one is measured on its logits, and the result says so
(``"h_metric"``). The loss is next-token cross entropy on one fixed random batch of
``seq_len + 1`` tokens below the model's vocabulary size (``config.vocab_size``, else the
readout's ``out_features``, else ``vocab_size``). For other inputs, ``batch_factory(batch,
seed)`` returns the batch: see :func:`user_batch`. The rules assume a head dimension that
stays fixed as the width grows, so a factory whose head dimension changes with width is
refused before anything is trained.

**Top-order term** (MLP only). Besides ``h_L`` the MLP check records the all-update term of
the residual blocks, ``‖Σ_l α_l ΔW_l^(k) D … D ΔW_l^(1) h_{l-1}‖_R`` (``D`` the ReLU masks
at step ``t``): for ``k ≥ 2`` blocks it is the higher-order term that the ``k ≥ 2``
conditions keep at ``Θ(1)`` and the ``k = 1`` rules let vanish like ``L^{-(k-1)/2}``
(App. B.1).

The slope fitting and the pass rule are pure functions (no torch); everything that needs
torch, rich or matplotlib is imported inside the functions that use it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Callable, Iterable, Sequence

from .errors import first_line
from .spec import OptimizerSpec

__all__ = [
    "SLOPE_TOLERANCE",
    "PARAMETERIZATIONS",
    "METRICS",
    "fit_slope",
    "slope_passes",
    "aggregate",
    "record_step",
    "compute_slopes",
    "CoordCheckConfig",
    "run_coord_check",
    "plot_coord_check",
]

SLOPE_TOLERANCE = 0.15
"""Largest |log–log slope| that passes."""
PARAMETERIZATIONS = ("sp", "mup-k1", "mup")
METRICS = ("h", "delta_h")
"""Metrics judged by the pass rule (the ``"slopes"`` list)."""
EXTRA_METRICS = ("out", "delta_out", "delta_top")
"""Metrics whose slopes are reported but not judged (``"extra_slopes"``)."""


# --------------------------------------------------------------------------------------
# pure functions
# --------------------------------------------------------------------------------------


def fit_slope(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares fit of ``log y = slope·log x + c``; returns ``(slope, c)``.

    Points with a non-positive or non-finite ``y`` are dropped; with fewer than two usable
    points (or all ``x`` equal) the slope is ``nan``.

    >>> fit_slope([1, 2, 4], [3, 6, 12])[0]
    1.0
    """
    pts = [
        (math.log(x), math.log(y))
        for x, y in zip(xs, ys, strict=False)
        if x > 0 and y is not None and math.isfinite(y) and y > 0
    ]
    if len(pts) < 2:
        return math.nan, math.nan
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    if sxx == 0:
        return math.nan, math.nan
    sxy = sum((p[0] - mx) * (p[1] - my) for p in pts)
    slope = sxy / sxx
    slope = round(slope, 12) + 0.0  # tidy float noise; -0.0 -> 0.0
    return slope, my - slope * mx


def slope_passes(slope: float, tolerance: float = SLOPE_TOLERANCE) -> bool:
    """``|slope| ≤ tolerance``; ``nan`` (a diverged or degenerate fit) fails."""
    return math.isfinite(slope) and abs(slope) <= tolerance


def record_step(
    points: list[dict[str, Any]],
    run: tuple[str, str, int, int, int],
    t: int,
    steps: int,
    values: dict[str, float],
) -> bool:
    """Append the point of step ``t`` of one run; True when the run stops there.

    ``run`` is ``(parameterization, axis, width, depth, seed)``, ``values`` the metrics.
    A non-finite value is stored as ``inf`` (the slope fit drops that point). A run stops at
    its last step, or when ``h`` diverged; then the remaining steps are padded with the
    last point, so that every step has one.
    """
    param, axis, width, depth, seed = run
    point: dict[str, Any] = {
        "parameterization": param,
        "axis": axis,
        "width": width,
        "depth": depth,
        "seed": seed,
        "step": t,
    }
    point.update({k: v if math.isfinite(v) else math.inf for k, v in values.items()})
    points.append(point)
    if t < steps and math.isfinite(point["h"]):
        return False
    points.extend({**point, "step": tt} for tt in range(t + 1, steps + 1))
    return True


def aggregate(values: Iterable[float]) -> float:
    """Mean over seeds; ``inf`` if any seed diverged (so the fit drops that point)."""
    vals = list(values)
    if not vals:
        return math.nan
    if any(v is None or not math.isfinite(v) for v in vals):  # None: inf/nan read from JSON
        return math.inf
    return sum(vals) / len(vals)


def compute_slopes(
    points: Sequence[dict[str, Any]],
    *,
    metrics: Sequence[str] = METRICS,
    step: int | None = None,
    judged: bool = True,
) -> list[dict[str, Any]]:
    """Slopes at ``step`` (default: the last) of each metric, per parameterization and axis.

    ``points`` are dicts with keys ``parameterization``, ``axis``, ``width``, ``depth``,
    ``seed``, ``step`` and the metrics. Returns dicts with keys ``parameterization``,
    ``axis``, ``metric``, ``slope``, ``pass`` (``judged``), ``step``, ``x`` and ``y``.
    """
    if not points:
        return []
    last = max(p["step"] for p in points) if step is None else step
    out = []
    params = list(dict.fromkeys(p["parameterization"] for p in points))
    for param in params:
        for axis in ("width", "depth"):
            sel = [
                p
                for p in points
                if p["parameterization"] == param and p["axis"] == axis and p["step"] == last
            ]
            if not sel:
                continue
            xs = sorted({p[axis] for p in sel})
            for metric in metrics:
                if not all(metric in p for p in sel):
                    continue
                ys = [aggregate(p[metric] for p in sel if p[axis] == x) for x in xs]
                slope, _ = fit_slope(xs, ys)
                row = {
                    "parameterization": param,
                    "axis": axis,
                    "metric": metric,
                    "slope": slope if math.isfinite(slope) else None,
                    "step": last,
                    "x": xs,
                    "y": [y if math.isfinite(y) else None for y in ys],
                }
                if judged:
                    row["pass"] = slope_passes(slope)
                out.append(row)
    return out


# --------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------

DEFAULT_LR = {
    "sgd": 0.05,
    "adamw": 0.01,
    "lion": 0.001,
    "sophia": 0.01,
    "muon": 0.02,
    "muon-kimi": 0.01,
    "shampoo": 0.02,
    "soap": 0.01,
    "sso": 0.02,
}
"""Base learning rates of the MLP (at the base width and depth) when ``--lr`` is not given."""

GPT_DEFAULT_LR = 0.003
"""Base learning rate of every optimizer on the GPT (and on factory models) when not given: at
0.01 AdamW's update is ~17x the GPT's initial residual stream within 10 steps and the loss
spikes (docs/coord-check)."""

DEFAULT_ALPHA_BASE = {"mlp": 0.5, "gpt": 1.0, "custom": 1.0}
"""Base hidden multiplier when ``--alpha-base`` is not given. With α ∝ 1/L the blocks' random
contribution at init adds ~α_base²·L_base/L to ‖h_L‖², a finite-depth transient that a depth
sweep from a shallow base picks up as a negative slope; for the MLP α_base = 0.5 keeps it
inside the default sweep (docs/coord-check/README.md, *Findings*)."""


@dataclass
class CoordCheckConfig:
    model: str = "mlp"
    """``mlp`` (the paper's residual MLP), ``gpt`` (GPT-2 style), or ``custom`` (set when
    ``model_factory`` is given)."""
    model_factory: Callable[[int, int], Any] | None = None
    """``model_factory(width, depth)`` -> your ``nn.Module`` (token ids ``(B, T)`` -> logits,
    or an object with ``.logits``); checked instead of the reference models."""
    batch_factory: Callable[[int, int], Any] | None = None
    """``batch_factory(batch, seed)`` -> the model's input for models that take other than
    token ids: ``inputs`` or ``(inputs, targets)``, see :func:`user_batch`."""
    model_factory_name: str | None = None
    """How messages and the result name ``model_factory`` (the CLI passes ``MODULE:FUNC`` as
    written); default ``module:qualname``."""
    batch_factory_name: str | None = None
    """The same for ``batch_factory``."""
    vocab_size: int | None = None
    """Vocabulary of the random token batch when the model does not tell (``config.vocab_size``
    or the readout's ``out_features``)."""
    optimizer: str = "adamw"
    others: str | None = None
    """Optimizer for every parameter but the hidden weights (default adamw for hybrids)."""
    spec: OptimizerSpec | None = None
    """A declaration to check instead of the catalog's ``optimizer`` (its name replaces it)."""
    factory: Callable[..., Any] | None = None
    """``factory(param_groups, **kwargs)`` building ``optimizer``'s implementation; needed
    for a ``spec`` the catalog does not declare."""
    k: int = 2
    relu: bool = True
    parameterizations: tuple[str, ...] = PARAMETERIZATIONS
    widths: tuple[int, ...] = (64, 128, 256, 512)
    depths: tuple[int, ...] = (2, 4, 8, 16)
    fixed_width: int | None = None
    """Width of the depth sweep (default: the base width, the smallest of ``widths``)."""
    fixed_depth: int | None = None
    """Depth of the width sweep (default: the base depth, the smallest of ``depths``)."""
    steps: int = 10
    batch: int = 8
    seeds: int = 3
    lr: float | None = None
    others_lr: float | None = None
    weight_decay: float = 0.0
    alpha_base: float | None = None
    """Base block multiplier ``α_base`` of the hidden blocks (input/output bases are 1)."""
    d_in: int = 32
    d_out: int = 8
    seq_len: int = 32
    device: str = "cpu"
    dtype: str = "float32"
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from .catalog import catalog, resolve
        from .errors import SpecError

        if self.spec is not None:
            if not isinstance(self.spec, OptimizerSpec):
                raise SpecError(f"spec must be an OptimizerSpec, got {type(self.spec).__name__}")
            main = self.spec
            if self.factory is None and catalog().get(main.name) != main:
                raise SpecError(
                    f"{main.name!r} is not a catalog declaration, so the generated module has "
                    "no implementation for it; pass a factory fn(param_groups, **kwargs) "
                    "(spectral coord-check --factory MODULE:CALLABLE; e.g. torch.optim:AdamW)"
                )
        else:
            main = resolve(self.optimizer)
        if self.factory is not None and not callable(self.factory):
            raise SpecError(f"factory must be callable, got {type(self.factory).__name__}")
        self.optimizer = main.name
        if self.others is None and not main.applies_to_biases:
            self.others = "adamw"
        if self.others is not None:
            self.others = resolve(self.others).name
            if not resolve(self.others).applies_to_biases:
                raise SpecError(
                    f"--others {self.others} applies to matrices only; the other parameters "
                    "include biases and LayerNorm gains, so pick a vector optimizer (adamw, ...)"
                )
        for p in self.parameterizations:
            if p not in PARAMETERIZATIONS:
                raise SpecError(
                    f"unknown parameterization {p!r}; choose from {', '.join(PARAMETERIZATIONS)}"
                )
        if self.model_factory is not None:
            if not callable(self.model_factory):
                raise SpecError(
                    f"model_factory must be callable, got {type(self.model_factory).__name__}"
                )
            self.model = "custom"
        elif self.model == "custom":
            raise SpecError("model 'custom' needs a model_factory(width, depth)")
        if self.batch_factory is not None:
            if self.model_factory is None:
                raise SpecError("a batch factory needs a model factory (--model-factory)")
            if not callable(self.batch_factory):
                raise SpecError(
                    f"batch_factory must be callable, got {type(self.batch_factory).__name__}"
                )
        if self.vocab_size is not None and (self.model_factory is None or self.vocab_size < 1):
            raise SpecError("vocab_size sizes a model factory's token batch: a positive integer")
        if self.model not in ("mlp", "gpt", "custom"):
            raise SpecError(f"--model must be mlp or gpt, got {self.model!r}")
        if self.model == "gpt":
            bad = [w for w in self.widths if w % 64]
            if bad:
                raise SpecError(f"GPT widths must be multiples of 64 (head dim), got {bad}")
        if len(self.widths) < 2 or len(self.depths) < 2:
            raise SpecError("need at least two widths and two depths to fit a slope")
        if min(self.widths) < 1 or min(self.depths) < 1 or self.steps < 1 or self.seeds < 1:
            raise SpecError("widths, depths, steps and seeds must be positive")
        if not 1 <= self.k <= 8:
            raise SpecError(f"--k must be from 1 to 8, got {self.k}")
        self.widths = tuple(sorted(set(self.widths)))
        self.depths = tuple(sorted(set(self.depths)))
        if self.fixed_width is None:
            self.fixed_width = self.widths[0]
        if self.fixed_depth is None:
            self.fixed_depth = self.depths[0]

    @property
    def base_width(self) -> int:
        return min(self.widths)

    @property
    def base_depth(self) -> int:
        return min(self.depths)

    @property
    def hidden(self) -> str | OptimizerSpec:
        """What the generated module is rendered for: the declaration, else the name."""
        return self.spec if self.spec is not None else self.optimizer

    def factories(self) -> dict[str, Callable[..., Any]]:
        """``build_optimizers(factories=...)``: the user's factory, checked, if any."""
        if self.factory is None:
            return {}
        from .probe import checked_factory, factory_label

        return {self.optimizer: checked_factory(self.factory, factory_label(self.factory))}

    @property
    def hybrid(self) -> bool:
        return self.others is not None

    @property
    def alpha(self) -> float:
        """``α_base``: the given one, else :data:`DEFAULT_ALPHA_BASE` of the model."""
        return self.alpha_base if self.alpha_base is not None else DEFAULT_ALPHA_BASE[self.model]

    def factory_name(self, which: str) -> str:
        """``model_factory``'s (``which="model"``) or ``batch_factory``'s name in messages."""
        from .probe import factory_label

        given = self.model_factory_name if which == "model" else self.batch_factory_name
        fn = self.model_factory if which == "model" else self.batch_factory
        return given or factory_label(fn)

    def _default_lr(self, optimizer: str) -> float:
        return DEFAULT_LR.get(optimizer, 0.01) if self.model == "mlp" else GPT_DEFAULT_LR

    def main_lr(self) -> float:
        return self.lr if self.lr is not None else self._default_lr(self.optimizer)

    def other_lr(self) -> float:
        if self.others_lr is not None:
            return self.others_lr
        return self._default_lr(self.others or self.optimizer)

    def rules_k(self, param: str) -> int:
        if param == "mup-k1":
            return 1
        return max(2, self.k) if self.model == "mlp" else 2

    def to_dict(self) -> dict[str, Any]:
        from .probe import factory_label
        from .spec import show

        custom = self.model == "custom"
        return {
            "model": self.model,
            "model_factory": self.factory_name("model") if custom else None,
            "batch_factory": None if self.batch_factory is None else self.factory_name("batch"),
            "vocab_size": self.vocab_size if custom else None,
            "optimizer": self.optimizer,
            "others": self.others,
            "spec": None
            if self.spec is None
            else {
                "name": self.spec.name,
                "update_norm": show(self.spec.update_norm),
                "applies_to": self.spec.applies_to,
            },
            "factory": None if self.factory is None else factory_label(self.factory),
            "k": self.k if self.model == "mlp" else None,
            "relu": self.relu if self.model == "mlp" else None,
            "parameterizations": list(self.parameterizations),
            "widths": list(self.widths),
            "depths": list(self.depths),
            "fixed_width": self.fixed_width,
            "fixed_depth": self.fixed_depth,
            "base_width": self.base_width,
            "base_depth": self.base_depth,
            "steps": self.steps,
            "batch": self.batch,
            "seeds": self.seeds,
            "lr": self.main_lr(),
            "others_lr": self.other_lr() if self.hybrid else None,
            "weight_decay": self.weight_decay,
            "alpha_base": self.alpha,
            "d_in": self.d_in if self.model == "mlp" else None,
            "d_out": self.d_out if self.model == "mlp" else None,
            "seq_len": self.seq_len
            if self.model == "gpt" or (custom and self.batch_factory is None)
            else None,
            "device": self.device,
            "slope_tolerance": SLOPE_TOLERANCE,
        }


# --------------------------------------------------------------------------------------
# training (torch): every point is built from a generated config module
# --------------------------------------------------------------------------------------


_FOLDER: list[str] = []


def _folder() -> str:
    """One temporary folder per process for the rendered config modules."""
    import tempfile

    if not _FOLDER:
        _FOLDER.append(tempfile.mkdtemp(prefix="spectral-coordcheck-"))
    return _FOLDER[0]


def config_module(cfg: CoordCheckConfig, param: str) -> Any:
    """The config module :mod:`spectral.codegen` generates for ``param`` (``mup-k1``: k = 1,
    ``mup``: :meth:`CoordCheckConfig.rules_k`; ``sp`` uses the ``mup`` module at the base size)."""
    from .codegen import load_generated

    k = cfg.rules_k("mup" if param == "sp" else param)
    return load_generated(
        cfg.hidden,
        cfg.others,
        k,
        base_width=cfg.base_width,
        base_depth=cfg.base_depth,
        folder=_folder(),
    )


def base_init_std(cfg: CoordCheckConfig) -> float:
    """The generated module's ``init_std`` (σ of the matrices at the base size): GPT-2's
    (and Hugging Face's ``initializer_range``) 0.02 for the GPT and factory models,
    ``1/√n_base`` for the MLP (its dense input layer gets ``σ/√d_in``)."""
    return 1.0 / math.sqrt(cfg.base_width) if cfg.model == "mlp" else 0.02


@dataclass
class _Setup:
    model: Any
    optimizers: list
    hparams: dict[str, dict[str, Any]]
    needs_graph: bool


def build(cfg: CoordCheckConfig, param: str, width: int, depth: int, seed: int) -> _Setup:
    """Model, init and optimizers of ``param`` at ``(width, depth)`` from the generated
    config module: ``multipliers``, ``init_`` and ``build_optimizers``; ``sp`` evaluates the
    module at ``(BASE_WIDTH, BASE_DEPTH)``, where every ratio is 1."""
    import torch

    from .models import GPT, ResidualMLP

    mod = config_module(cfg, param)
    w, d = (mod.BASE_WIDTH, mod.BASE_DEPTH) if param == "sp" else (width, depth)
    mult = dict(mod.multipliers(w, d))
    mult["hidden"] *= cfg.alpha  # α_base: the hidden blocks' base multiplier only
    torch.manual_seed(seed)
    if cfg.model == "mlp":
        model = ResidualMLP(
            cfg.d_in, cfg.d_out, width, depth, k=cfg.k, relu=cfg.relu, multipliers=mult
        )
    else:
        model = GPT(width, depth, block_size=max(cfg.seq_len, 8), multipliers=mult)
    torch.manual_seed(10_007 * seed + 17)
    mod.init_(model, w, d, base_init_std(cfg))
    model.to(cfg.device)
    lr: Any = cfg.main_lr()
    if cfg.hybrid:
        lr = {cfg.optimizer: cfg.main_lr(), cfg.others: cfg.other_lr()}
    factories = cfg.factories()
    extra = {"factories": factories} if factories else {}
    opts = mod.build_optimizers(model, w, d, lr=lr, weight_decay=cfg.weight_decay, **extra)
    # a dict of optimizers (one per name), or one optimizer over every group
    parts = list(opts.values()) if isinstance(opts, dict) else [opts]
    names = {id(p): n for n, p in model.named_parameters()}
    hp_table = {
        names[id(p)]: {
            "role": g["role"],
            "optimizer": g["optimizer"],
            "lr": g["lr"],
            "weight_decay": g["weight_decay"],
        }
        for opt in parts
        for g in opt.param_groups
        for p in g["params"]
    }
    needs_graph = any(h["optimizer"] == "sophia" for h in hp_table.values())
    return _Setup(model, parts, hp_table, needs_graph=needs_graph)


def _rms(t) -> float:
    return float(t.detach().double().pow(2).mean().sqrt())


def _top_order_term(model, x, weights0) -> float:
    """``‖Σ_l α_l ΔW^(k) D … D ΔW^(1) h_{l-1}‖_R`` on ``x`` (masks ``D`` at the current step)."""
    import torch

    with torch.no_grad():
        h = model.alpha_input * model.input(x)
        total = torch.zeros_like(h)
        for li, block in enumerate(model.blocks):
            z = h
            dz = h
            for i, layer in enumerate(block.layers):
                if i > 0 and block.relu:
                    mask = (z > 0).to(z.dtype)
                    z = torch.relu(z)
                    dz = dz * mask
                dw = layer.weight - weights0[(li, i)]
                dz = dz @ dw.T
                z = layer(z)
            total = total + model.alpha_hidden * dz
            h = h + model.alpha_hidden * z
    return _rms(total)


def _data(cfg: CoordCheckConfig, seed: int):
    import torch

    gen = torch.Generator().manual_seed(1_000 + seed)
    if cfg.model == "mlp":
        x = torch.randn(cfg.batch, cfg.d_in, generator=gen)
        y = torch.randn(cfg.batch, cfg.d_out, generator=gen)
    else:
        x = torch.randint(0, 256, (cfg.batch, cfg.seq_len + 1), generator=gen)
        y = None
    return x.to(cfg.device), (y.to(cfg.device) if y is not None else None)



# --------------------------------------------------------------------------------------
# your own model: model_factory(width, depth), through the generated module's hooks
# --------------------------------------------------------------------------------------



def make_user_model(cfg: CoordCheckConfig, width: int, depth: int) -> Any:
    """``cfg.model_factory(width, depth)``, checked: an exception it raises or a result that
    is no ``nn.Module`` is a one-line :class:`~spectral.errors.SpecError`."""
    import torch

    from .errors import SpecError

    call = f"model factory {cfg.factory_name('model')}({width}, {depth})"
    try:
        model = cfg.model_factory(width, depth)
    except Exception as exc:  # the user's code: any failure is bad input
        raise SpecError(f"{call} raised {first_line(exc)}") from None
    if not isinstance(model, torch.nn.Module):
        raise SpecError(f"{call} returned {type(model).__name__}, not a torch.nn.Module")
    return model


def _generated(cfg: CoordCheckConfig, what: str, fn: Callable[..., Any], *args, **kwargs):
    """A call into the generated module; its ``ValueError`` (an unrecognised model, a
    parameter with no role, tied embeddings) becomes a one-line error naming the factory."""
    from .errors import SpecError

    try:
        return fn(*args, **kwargs)
    except SpecError:
        raise
    except (ValueError, TypeError) as exc:
        raise SpecError(
            f"model factory {cfg.factory_name('model')}: {what}: {first_line(exc)}"
        ) from None


def inspect_user_model(cfg: CoordCheckConfig) -> dict[str, Any]:
    """Check the factory before training anything; returns what the result reports.

    Builds one model per width of the sweeps (at the smallest depth) and refuses a
    head dimension that changes with width: the rules keep attention logits at Θ(1) only
    with a fixed head dimension (heads = width / head_dim) or 1/d attention scaling. Also
    installs the multipliers once (so an unrecognised model fails here, not mid-sweep) and
    finds h_L: the input of ``final_module(model)``, else the logits, and the vocabulary of
    the random token batch.
    """
    from .errors import SpecError

    mod = config_module(cfg, "mup")
    depth = cfg.base_depth
    dims: dict[int, list[int]] = {}
    widths = sorted({*cfg.widths, cfg.fixed_width})
    for width in widths:
        model = make_user_model(cfg, width, depth)
        if width == widths[0]:
            handle = _generated(
                cfg, "apply_multipliers", mod.apply_multipliers, model, width, depth
            )
            vocab = None
            if cfg.batch_factory is None:
                vocab = _vocab_size(cfg, model, handle.modules["output"])
            final = mod.final_module(model)
            final_name = next((n for n, m in model.named_modules() if m is final), None)
        dims[width] = sorted(mod._head_dims(model))
    if len({tuple(d) for d in dims.values()}) > 1:
        seen = ", ".join(f"width {w}: {d or 'none'}" for w, d in dims.items())
        raise SpecError(
            f"model factory {cfg.factory_name('model')}: the head dimension changes with "
            f"width ({seen}). The rules assume a fixed head dimension (heads = width / "
            "head_dim) or 1/d attention scaling; build the model with a fixed head_dim and "
            "width // head_dim heads"
        )
    head_dims = next(iter(dims.values()))
    if final_name is None:
        metric = "logits"
        note = "logits: the model has no final norm (final_module found none)"
    else:
        metric = "final-norm input"
        note = f"input of {final_name or 'the model'} (the final norm): the residual stream h_L"
    return {"h_metric": metric, "h_source": note, "head_dims": head_dims, "vocab_size": vocab}


def _to(obj: Any, device: str) -> Any:
    if hasattr(obj, "to") and callable(obj.to):
        return obj.to(device)
    if isinstance(obj, dict):
        return {k: _to(v, device) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to(v, device) for v in obj)
    return obj


def user_batch(cfg: CoordCheckConfig, seed: int, vocab_size: int | None) -> tuple[Any, Any, bool]:
    """``(inputs, targets, shift)``: the fixed batch of one seed for a factory model.

    Without a batch factory: ``batch × (seq_len + 1)`` random token ids below
    ``vocab_size`` (generator seeded ``1000 + seed``, as for the GPT); the model sees the
    first ``seq_len``, the targets are the next tokens.

    With ``batch_factory(batch, seed)``, it returns ``inputs`` or ``(inputs, targets)``:

    * ``inputs``: a tensor (``model(inputs)``), a dict (``model(**inputs)``, e.g. Hugging
      Face's ``input_ids`` / ``attention_mask`` / ``pixel_values``) or a list
      (``model(*inputs)``); it must not depend on anything but ``(batch, seed)``;
    * ``targets``: integer class indices (cross entropy over the output's last dimension;
      shape ``output.shape[:-1]``), a float tensor of the output's shape (mean squared
      error), or ``None`` / left out: next-token cross entropy on ``inputs``, a 2-D integer
      tensor of token ids (or a dict with ``input_ids``) — then ``shift`` is True and the
      loss compares ``logits[:, :-1]`` with ``ids[:, 1:]``.
    """
    import torch

    from .errors import SpecError

    if cfg.batch_factory is None:
        gen = torch.Generator().manual_seed(1_000 + seed)
        x = torch.randint(0, vocab_size, (cfg.batch, cfg.seq_len + 1), generator=gen)
        x = x.to(cfg.device)
        return x[:, :-1], x[:, 1:], False
    call = f"batch factory {cfg.factory_name('batch')}({cfg.batch}, {seed})"
    try:
        got = cfg.batch_factory(cfg.batch, seed)
    except Exception as exc:  # the user's code: any failure is bad input
        raise SpecError(f"{call} raised {first_line(exc)}") from None
    inputs, targets = got if isinstance(got, tuple) and len(got) == 2 else (got, None)
    if not isinstance(inputs, (torch.Tensor, dict, list, tuple)):
        raise SpecError(
            f"{call} returned {type(inputs).__name__} as the inputs; return a tensor, a dict "
            "of keyword arguments or a list of positional ones (optionally with targets: "
            "(inputs, targets))"
        )
    if targets is not None and not isinstance(targets, torch.Tensor):
        raise SpecError(f"{call}: the targets are a {type(targets).__name__}, not a tensor")
    inputs, targets = _to(inputs, cfg.device), _to(targets, cfg.device)
    if targets is not None:
        return inputs, targets, False
    ids = inputs.get("input_ids") if isinstance(inputs, dict) else inputs
    if not (
        isinstance(ids, torch.Tensor)
        and ids.ndim == 2
        and not ids.is_floating_point()
        and ids.shape[1] >= 2
    ):
        raise SpecError(
            f"{call} returned no targets, so the loss is next-token cross entropy, which "
            "needs token ids (a 2-D integer tensor, or a dict with input_ids, at least 2 "
            "tokens long); return (inputs, targets) for any other input"
        )
    return inputs, ids[:, 1:], True


def _forward(model: Any, inputs: Any) -> Any:
    if isinstance(inputs, dict):
        out = model(**inputs)
    elif isinstance(inputs, (list, tuple)):
        out = model(*inputs)
    else:
        out = model(inputs)
    return _logits(out)


def _logits(out: Any) -> Any:
    """The output tensor: itself, ``.logits`` (Hugging Face), ``["logits"]`` or the first
    element of a tuple."""
    import torch

    from .errors import SpecError

    if isinstance(out, torch.Tensor):
        return out
    logits = getattr(out, "logits", None)
    if logits is None and isinstance(out, dict):
        logits = out.get("logits")
    if logits is None and isinstance(out, (tuple, list)) and out:
        logits = out[0]
    if not isinstance(logits, torch.Tensor):
        raise SpecError(
            f"the model returned {type(out).__name__}; the check needs a tensor of logits or "
            "an object with .logits"
        )
    return logits


def _user_loss(out: Any, targets: Any, shift: bool) -> Any:
    import torch.nn.functional as F

    if shift:
        out = out[:, :-1]
    if targets.is_floating_point():
        return F.mse_loss(out, targets)
    return F.cross_entropy(out.reshape(-1, out.shape[-1]).float(), targets.reshape(-1))


def _vocab_size(cfg: CoordCheckConfig, model: Any, readout: list[str]) -> int:
    """The token ids' range: ``cfg.vocab_size``, the model's ``config.vocab_size``, or the
    readout's ``out_features`` (the modules ``apply_multipliers`` put alpha_out on)."""
    from .errors import SpecError

    if cfg.vocab_size is not None:
        return cfg.vocab_size
    found = getattr(getattr(model, "config", None), "vocab_size", None)
    if isinstance(found, int) and found > 0:
        return found
    for name in readout:
        found = getattr(model.get_submodule(name), "out_features", None)
        if isinstance(found, int) and found > 0:
            return found
    raise SpecError(
        f"model factory {cfg.factory_name('model')}: cannot tell the vocabulary size (no "
        "config.vocab_size, no readout with out_features); pass --vocab-size"
    )


@dataclass
class _UserSetup:
    model: Any
    optimizers: list
    final: Any
    """The module whose input is h_L (None: measure the logits)."""
    vocab_size: int


def build_user(cfg: CoordCheckConfig, param: str, width: int, depth: int, seed: int) -> _UserSetup:
    """The factory's model at ``(width, depth)``, through the generated module.

    ``apply_multipliers(model, width, depth, multiplier=base)`` installs the hooks (it checks
    that the model has ``2·depth`` residual branch ends, so it is called at the model's own
    size) with base values chosen so that the multipliers are the module's at ``(w, d)``
    times ``α_base`` on the hidden blocks; ``(w, d) = (width, depth)`` for μP and
    ``(BASE_WIDTH, BASE_DEPTH)`` for ``sp``, where every ratio is 1. ``init_`` and
    ``build_optimizers`` are evaluated at ``(w, d)``.
    """
    import torch

    mod = config_module(cfg, param)
    w, d = (mod.BASE_WIDTH, mod.BASE_DEPTH) if param == "sp" else (width, depth)
    want = dict(mod.multipliers(w, d))
    want["hidden"] *= cfg.alpha
    ratio = mod.multipliers(width, depth)  # base 1: the ratios' factors alone
    base = {layer: want[layer] / ratio[layer] for layer in want}
    torch.manual_seed(seed)
    model = make_user_model(cfg, width, depth)
    handle = _generated(
        cfg, "apply_multipliers", mod.apply_multipliers, model, width, depth, multiplier=base
    )
    torch.manual_seed(10_007 * seed + 17)
    _generated(cfg, "init_", mod.init_, model, w, d, base_init_std(cfg))
    model.to(cfg.device)
    lr: Any = cfg.main_lr()
    if cfg.hybrid:
        lr = {cfg.optimizer: cfg.main_lr(), cfg.others: cfg.other_lr()}
    factories = cfg.factories()
    extra = {"factories": factories} if factories else {}
    opt = _generated(
        cfg,
        "build_optimizers",
        mod.build_optimizers,
        model,
        w,
        d,
        lr=lr,
        weight_decay=cfg.weight_decay,
        **extra,
    )
    vocab = 0
    if cfg.batch_factory is None:
        vocab = _vocab_size(cfg, model, handle.modules["output"])
    return _UserSetup(model, [opt], mod.final_module(model), vocab)


def _train_user(
    cfg: CoordCheckConfig, param: str, axis: str, width: int, depth: int, seed: int
) -> list[dict[str, Any]]:
    """:func:`train_one` for a factory model: h_L caught at the final norm's input."""
    import torch

    from .errors import SpecError

    s = build_user(cfg, param, width, depth, seed)
    model = s.model
    inputs, targets, shift = user_batch(cfg, seed, s.vocab_size)
    caught: list = []

    def catch(module, args, kwargs):
        x = args[0] if args else next(v for v in kwargs.values() if isinstance(v, torch.Tensor))
        caught.append(x.detach())

    hook = s.final.register_forward_pre_hook(catch, with_kwargs=True) if s.final else None
    points = []
    out0 = h0 = None
    try:
        for t in range(cfg.steps + 1):
            caught.clear()
            with torch.no_grad():
                out = _forward(model, inputs)
                try:
                    loss = float(_user_loss(out, targets, shift))
                except (RuntimeError, ValueError, IndexError) as exc:
                    raise SpecError(
                        f"the loss on the output of model factory {cfg.factory_name('model')} "
                        f"(shape {tuple(out.shape)}) failed: {first_line(exc)}"
                    ) from None
            h = caught[-1] if s.final is not None else out
            if t == 0:
                out0, h0 = out.detach().clone(), h.detach().clone()
            values = {
                "h": _rms(h),
                "delta_h": _rms(h - h0),
                "out": _rms(out),
                "delta_out": _rms(out - out0),
                "loss": loss,
            }
            if record_step(points, (param, axis, width, depth, seed), t, cfg.steps, values):
                break
            for opt in s.optimizers:
                opt.zero_grad(set_to_none=True)
            _user_loss(_forward(model, inputs), targets, shift).backward()
            for opt in s.optimizers:
                opt.step()
    finally:
        if hook is not None:
            hook.remove()
    return points


def train_one(
    cfg: CoordCheckConfig, param: str, axis: str, width: int, depth: int, seed: int
) -> list[dict[str, Any]]:
    """Train one model; one point per step ``t = 0..steps`` (``t`` updates taken)."""
    import torch
    import torch.nn.functional as F

    if cfg.model_factory is not None:
        return _train_user(cfg, param, axis, width, depth, seed)
    s = build(cfg, param, width, depth, seed)
    model = s.model
    x, y = _data(cfg, seed)
    inp = x if cfg.model == "mlp" else x[:, :-1]
    weights0 = {}
    if cfg.model == "mlp":
        weights0 = {
            (li, i): layer.weight.detach().clone()
            for li, block in enumerate(model.blocks)
            for i, layer in enumerate(block.layers)
        }

    def loss_of(out):
        if cfg.model == "mlp":
            return F.mse_loss(out, y)
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), x[:, 1:].reshape(-1))

    points = []
    out0 = h0 = None
    for t in range(cfg.steps + 1):
        with torch.no_grad():
            out, h = model(inp, return_hidden=True)
            loss = float(loss_of(out))
        if t == 0:
            out0, h0 = out.detach().clone(), h.detach().clone()
        values = {
            "h": _rms(h),
            "delta_h": _rms(h - h0),
            "out": _rms(out),
            "delta_out": _rms(out - out0),
            "loss": loss,
        }
        if cfg.model == "mlp":
            values["delta_top"] = _top_order_term(model, inp, weights0)
        if record_step(points, (param, axis, width, depth, seed), t, cfg.steps, values):
            break
        for opt in s.optimizers:
            opt.zero_grad(set_to_none=True)
        loss_t = loss_of(model(inp))
        loss_t.backward(create_graph=s.needs_graph)
        for opt in s.optimizers:
            opt.step()
    return points


def sweep_runs(cfg: CoordCheckConfig) -> list[tuple[str, str, int, int, int]]:
    runs = []
    for param in cfg.parameterizations:
        for w in cfg.widths:
            for seed in range(cfg.seeds):
                runs.append((param, "width", w, cfg.fixed_depth, seed))
        for d in cfg.depths:
            for seed in range(cfg.seeds):
                runs.append((param, "depth", cfg.fixed_width, d, seed))
    return runs


def run_coord_check(
    cfg: CoordCheckConfig, *, progress: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Every run of the sweep; returns the JSON-ready result (config, points, slopes)."""
    import torch

    torch.set_num_threads(max(1, torch.get_num_threads()))
    user = inspect_user_model(cfg) if cfg.model_factory is not None else None
    points: list[dict[str, Any]] = []
    for param, axis, w, d, seed in sweep_runs(cfg):
        points.extend(train_one(cfg, param, axis, w, d, seed))
        if progress:
            progress(f"{param} {axis} n={w} L={d} seed={seed}")
    slopes = compute_slopes(points, metrics=METRICS, judged=True)
    extra = compute_slopes(points, metrics=EXTRA_METRICS, judged=False)
    mu = [s for s in slopes if s["parameterization"] != "sp"]
    config = cfg.to_dict()
    if user is not None:  # factory models: the vocabulary used, where h_L was measured
        config["vocab_size"] = user.pop("vocab_size")
    return {
        "config": config,
        **(user or {}),
        "pass_rule": f"|slope| <= {SLOPE_TOLERANCE} at the last step, for h and delta_h, "
        "against width and against depth; sp is judged by the same test",
        "pass": all(s["pass"] for s in mu) if mu else None,
        "slopes": slopes,
        "extra_slopes": extra,
        "points": points,
    }


# --------------------------------------------------------------------------------------
# plots
# --------------------------------------------------------------------------------------

_TITLES = {
    "h": "‖h_L‖_R",
    "delta_h": "‖h_L(t) − h_L(0)‖_R",
    "delta_top": "top-order update term",
    "out": "‖output‖_R",
    "delta_out": "‖Δ output‖_R",
}


def plot_coord_check(
    result: dict[str, Any],
    axis: str,
    path: str,
    *,
    metrics: Sequence[str] | None = None,
    dpi: int = 64,
) -> str:
    """One PNG for the ``axis`` sweep: rows = metrics, columns = parameterizations; x = width
    or depth (log), one line per step (light → dark), slope at the last step in the title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfg = result["config"]
    points = [p for p in result["points"] if p["axis"] == axis]
    params = [p for p in cfg["parameterizations"]]
    if metrics is None:
        metrics = ["h", "delta_h"] + (["delta_top"] if cfg["model"] == "mlp" else [])
    slopes = {
        (s["parameterization"], s["metric"]): s
        for s in result["slopes"] + result.get("extra_slopes", [])
        if s["axis"] == axis
    }
    steps = sorted({p["step"] for p in points})
    xs = sorted({p[axis] for p in points})
    fig, axes = plt.subplots(
        len(metrics),
        len(params),
        figsize=(3.0 * len(params), 2.3 * len(metrics)),
        squeeze=False,
        sharex=True,
    )
    titles = dict(_TITLES)
    if result.get("h_metric") == "logits":
        titles.update(h="‖logits‖_R (no final norm)", delta_h="‖logits(t) − logits(0)‖_R")
    cmap = plt.get_cmap("viridis")
    shown_steps = [t for t in steps if t > 0] if len(metrics) else steps
    for j, param in enumerate(params):
        for i, metric in enumerate(metrics):
            ax = axes[i][j]
            for t in steps:
                if metric.startswith("delta") and t == 0:
                    continue
                ys = [
                    aggregate(
                        p[metric]
                        for p in points
                        if p["parameterization"] == param
                        and p[axis] == x
                        and p["step"] == t
                        and metric in p
                    )
                    for x in xs
                ]
                ys = [y if (math.isfinite(y) and y > 0) else float("nan") for y in ys]
                frac = (t / max(steps)) if max(steps) else 1.0
                ax.plot(
                    xs,
                    ys,
                    marker="o",
                    ms=2.5,
                    lw=1.0,
                    color=cmap(0.1 + 0.85 * frac),
                    label=f"t={t}"
                    if (i == 0 and j == len(params) - 1 and t in (shown_steps[0], steps[-1]))
                    else None,
                )
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            s = slopes.get((param, metric))
            if s is not None and s.get("slope") is not None:
                tag = "" if "pass" not in s else (" ✓" if s["pass"] else " ✗")
                ax.set_title(
                    f"{param}: {titles.get(metric, metric)}\nslope {s['slope']:+.2f}{tag}",
                    fontsize=8,
                )
            else:
                ax.set_title(f"{param}: {titles.get(metric, metric)}", fontsize=8)
            ax.tick_params(labelsize=7)
            if i == len(metrics) - 1:
                ax.set_xlabel(axis, fontsize=8)
    if axes[0][-1].get_legend_handles_labels()[0]:
        axes[0][-1].legend(fontsize=6, loc="best")
    opt = cfg["optimizer"] + (f"+{cfg['others']}" if cfg.get("others") else "")
    fixed = f"L={cfg['fixed_depth']}" if axis == "width" else f"n={cfg['fixed_width']}"
    model = cfg.get("model_factory") or cfg["model"]
    model += f" k={cfg['k']}" if cfg["model"] == "mlp" else ""
    fig.suptitle(
        f"coord check: {model}, {opt}, {axis} sweep ({fixed}), {cfg['steps']} steps, {cfg['seeds']} seeds",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path
