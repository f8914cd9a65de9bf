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

from .spec import OptimizerSpec

__all__ = [
    "SLOPE_TOLERANCE",
    "PARAMETERIZATIONS",
    "METRICS",
    "fit_slope",
    "slope_passes",
    "aggregate",
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
"""Base learning rate of every optimizer on the GPT when not given: at 0.01 AdamW's update is
~17x the initial residual stream within 10 steps and the loss spikes (docs/coord-check)."""

DEFAULT_ALPHA_BASE = {"mlp": 0.5, "gpt": 1.0}
"""Base hidden multiplier when ``--alpha-base`` is not given. With α ∝ 1/L the blocks' random
contribution at init adds ~α_base²·L_base/L to ‖h_L‖², a finite-depth transient that a depth
sweep from a shallow base picks up as a negative slope; for the MLP α_base = 0.5 keeps it
inside the default sweep (docs/coord-check/README.md, *Findings*)."""


@dataclass
class CoordCheckConfig:
    model: str = "mlp"
    """``mlp`` (the paper's residual MLP) or ``gpt`` (GPT-2 style)."""
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
        if self.model not in ("mlp", "gpt"):
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

    def _default_lr(self, optimizer: str) -> float:
        return GPT_DEFAULT_LR if self.model == "gpt" else DEFAULT_LR.get(optimizer, 0.01)

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

        return {
            "model": self.model,
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
            "seq_len": self.seq_len if self.model == "gpt" else None,
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
    0.02 for the GPT, ``1/√n_base`` for the MLP (its dense input layer gets ``σ/√d_in``)."""
    return 0.02 if cfg.model == "gpt" else 1.0 / math.sqrt(cfg.base_width)


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


def train_one(
    cfg: CoordCheckConfig, param: str, axis: str, width: int, depth: int, seed: int
) -> list[dict[str, Any]]:
    """Train one model; one point per step ``t = 0..steps`` (``t`` updates taken)."""
    import torch
    import torch.nn.functional as F

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
        point = {
            "parameterization": param,
            "axis": axis,
            "width": width,
            "depth": depth,
            "seed": seed,
            "step": t,
            "h": _rms(h),
            "delta_h": _rms(h - h0),
            "out": _rms(out),
            "delta_out": _rms(out - out0),
            "loss": loss,
        }
        if cfg.model == "mlp":
            point["delta_top"] = _top_order_term(model, inp, weights0)
        for key in ("h", "delta_h", "out", "delta_out", "loss", "delta_top"):
            if key in point and not math.isfinite(point[key]):
                point[key] = math.inf
        points.append(point)
        if t == cfg.steps or not math.isfinite(point["h"]):
            if t < cfg.steps:  # diverged: pad the remaining steps so every step has a point
                for tt in range(t + 1, cfg.steps + 1):
                    points.append({**point, "step": tt})
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
    points: list[dict[str, Any]] = []
    for param, axis, w, d, seed in sweep_runs(cfg):
        points.extend(train_one(cfg, param, axis, w, d, seed))
        if progress:
            progress(f"{param} {axis} n={w} L={d} seed={seed}")
    slopes = compute_slopes(points, metrics=METRICS, judged=True)
    extra = compute_slopes(points, metrics=EXTRA_METRICS, judged=False)
    mu = [s for s in slopes if s["parameterization"] != "sp"]
    return {
        "config": cfg.to_dict(),
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
                    f"{param}: {_TITLES.get(metric, metric)}\nslope {s['slope']:+.2f}{tag}",
                    fontsize=8,
                )
            else:
                ax.set_title(f"{param}: {_TITLES.get(metric, metric)}", fontsize=8)
            ax.tick_params(labelsize=7)
            if i == len(metrics) - 1:
                ax.set_xlabel(axis, fontsize=8)
    if axes[0][-1].get_legend_handles_labels()[0]:
        axes[0][-1].legend(fontsize=6, loc="best")
    opt = cfg["optimizer"] + (f"+{cfg['others']}" if cfg.get("others") else "")
    fixed = f"L={cfg['fixed_depth']}" if axis == "width" else f"n={cfg['fixed_width']}"
    model = cfg["model"] + (f" k={cfg['k']}" if cfg["model"] == "mlp" else "")
    fig.suptitle(
        f"coord check: {model}, {opt}, {axis} sweep ({fixed}), {cfg['steps']} steps, {cfg['seeds']} seeds",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path
