"""JAX coordinate check: the flax ResidualMLP trained through the generated JAX module.

The JAX twin of ``spectral coord-check --model mlp`` (:mod:`spectral.coordcheck`), on CPU::

    python -m spectral.cli.coord_check_jax --optimizer muon-kimi --others adamw --json out.json

For each parameterization (``sp``, ``mup-k1``, ``mup``), each point of a width sweep (at
the smallest depth) and of a depth sweep (at the smallest width) and each seed,
:class:`spectral.models.flax.ResidualMLP` is trained for ``steps`` steps on one fixed batch,
every piece taken from the module ``spectral codegen --framework jax`` writes: the block
multipliers from ``multipliers(n, L)`` (the hidden one times ``α_base``), the
initialisation from ``init(params, key, n, L, init_std=...)``, the optimizer from
``optimizer(params, n, L, lr=...)`` (``optax.multi_transform`` over the real optax
optimizers); ``sp`` is the ``mup`` module evaluated at the base size. The same quantities
as the PyTorch check are recorded (``‖h_L‖_R``, ``‖h_L(t) − h_L(0)‖_R``, the output, its
change and the top-order update term of the blocks) and the same pure functions fit and
judge the slopes (:func:`spectral.coordcheck.judge`, pass: ``|slope| ≤ 0.15``).

Defaults are those of the PyTorch MLP check: ``ResidualMLP(32, 8, n, L, k=2)``, MSE on
random targets, batch 8, 10 steps, 3 seeds, ``init_std = 1/√n_base``, ``α_base = 0.5``,
widths 64–512 at L = 4, depths 4–128 at n = 64, base lr AdamW 0.01, Muon-Kimi 0.01 +
AdamW 0.01. Seeds use JAX's generator, so the numbers are not the PyTorch run's, only
their slopes should agree.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from . import (
    DEFAULT_ALPHA_BASE,
    DEFAULT_LR,
    PARAMETERIZATIONS,
    SLOPE_TOLERANCE_COORD,
    judge,
    record_step,
)
from ..errors import SpecError

__all__ = ["JaxCoordCheckConfig", "run_coord_check_jax", "slope_table"]


@dataclass
class JaxCoordCheckConfig:
    """One JAX coordinate check of the residual MLP (fields as in CoordCheckConfig)."""

    optimizer: str = "adamw"
    others: str | None = None
    """Optimizer of every parameter but the hidden weights (adamw for matrix-only ones)."""
    k: int = 2
    relu: bool = True
    parameterizations: tuple[str, ...] = PARAMETERIZATIONS
    widths: tuple[int, ...] = (64, 128, 256, 512)
    depths: tuple[int, ...] = (4, 8, 16, 32, 64, 128)
    steps: int = 10
    batch: int = 8
    seeds: int = 3
    lr: float | None = None
    others_lr: float | None = None
    weight_decay: float = 0.0
    alpha_base: float = DEFAULT_ALPHA_BASE["mlp"]
    d_in: int = 32
    d_out: int = 8
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from ..catalog import resolve

        main = resolve(self.optimizer)
        self.optimizer = main.name
        if self.others is None and not main.applies_to_biases:
            self.others = "adamw"
        if self.others is not None:
            other = resolve(self.others)
            if not other.applies_to_biases:
                raise SpecError(
                    f"--others {other.name} applies to matrices only; the other parameters "
                    "include biases, so pick a vector optimizer (adamw, ...)"
                )
            self.others = other.name
        for p in self.parameterizations:
            if p not in PARAMETERIZATIONS:
                raise SpecError(
                    f"unknown parameterization {p!r}; choose from {', '.join(PARAMETERIZATIONS)}"
                )
        self.widths = tuple(sorted(set(self.widths)))
        self.depths = tuple(sorted(set(self.depths)))
        if len(self.widths) < 2 or len(self.depths) < 2:
            raise SpecError("need at least two widths and two depths to fit a slope")
        if min(self.widths) < 1 or min(self.depths) < 1 or self.steps < 1 or self.seeds < 1:
            raise SpecError("widths, depths, steps and seeds must be positive")
        if not 1 <= self.k <= 8:
            raise SpecError(f"--k must be from 1 to 8, got {self.k}")

    @property
    def base_width(self) -> int:
        return self.widths[0]

    @property
    def base_depth(self) -> int:
        return self.depths[0]

    def base_lr(self) -> float | dict[str, float]:
        main = self.lr if self.lr is not None else DEFAULT_LR.get(self.optimizer, 0.01)
        if self.others is None:
            return main
        other = self.others_lr if self.others_lr is not None else DEFAULT_LR.get(self.others)
        return {self.optimizer: main, self.others: other if other is not None else 0.01}

    def rules_k(self, param: str) -> int:
        return 1 if param == "mup-k1" else max(2, self.k)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(
            model="mlp (flax nnx, spectral.models.flax.ResidualMLP)",
            framework="jax",
            parameterizations=list(self.parameterizations),
            widths=list(self.widths),
            depths=list(self.depths),
            base_width=self.base_width,
            base_depth=self.base_depth,
            lr=self.base_lr(),
            init_std=1.0 / math.sqrt(self.base_width),
            slope_tolerance=SLOPE_TOLERANCE_COORD,
        )
        return out


_MODULES: dict[tuple, Any] = {}


def config_module(cfg: JaxCoordCheckConfig, param: str) -> Any:
    """The JAX config module for ``param`` (``sp`` uses the ``mup`` module at the base)."""
    import atexit
    import importlib.util
    import shutil
    import sys
    import tempfile
    from pathlib import Path

    from ..codegen.jax import render

    k = cfg.rules_k("mup" if param == "sp" else param)
    key = (cfg.optimizer, cfg.others, k, cfg.base_width, cfg.base_depth)
    if key not in _MODULES:
        source = render(
            cfg.optimizer,
            cfg.others,
            k,
            base_width=cfg.base_width,
            base_depth=cfg.base_depth,
        )
        folder = Path(tempfile.mkdtemp(prefix="spectral-coordcheck-jax-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)  # nothing left in $TMPDIR
        path = folder / "config_jax.py"
        path.write_text(source, encoding="utf-8")
        spec = importlib.util.spec_from_file_location(f"spectral_jax_config_{len(_MODULES)}", path)
        module = importlib.util.module_from_spec(spec)
        # registered like an import: the --vendor form's dataclasses look their module up
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        _MODULES[key] = module
    return _MODULES[key]


def _sweep(cfg: JaxCoordCheckConfig) -> list[tuple[str, str, int, int]]:
    runs = []
    for param in cfg.parameterizations:
        runs += [(param, "width", w, cfg.base_depth) for w in cfg.widths]
        runs += [(param, "depth", cfg.base_width, d) for d in cfg.depths]
    return runs


def _train_point(
    cfg: JaxCoordCheckConfig, param: str, axis: str, width: int, depth: int
) -> list[dict[str, Any]]:
    """Every seed at one point of the sweep: one point per step ``t = 0..steps`` and seed.

    The step and the measurements are compiled once per point (the shapes and the
    optimizer's numbers are the same for every seed)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax
    from flax import nnx

    from ..models.flax import ResidualMLP

    mod = config_module(cfg, param)
    w, d = (mod.BASE_WIDTH, mod.BASE_DEPTH) if param == "sp" else (width, depth)
    mult = dict(mod.multipliers(w, d))
    mult["hidden"] *= cfg.alpha_base  # α_base: the hidden blocks' base multiplier only
    model = ResidualMLP(
        cfg.d_in, cfg.d_out, width, depth, k=cfg.k, relu=cfg.relu, multipliers=mult,
        rngs=nnx.Rngs(0),
    )
    graphdef, state0 = nnx.split(model, nnx.Param)
    tx = mod.optimizer(state0, w, d, lr=cfg.base_lr(), weight_decay=cfg.weight_decay)

    def forward(state, x):
        return nnx.merge(graphdef, state)(x, return_hidden=True)

    @jax.jit
    def step(state, opt_state, x, y):
        def loss(s):
            return jnp.mean((forward(s, x)[0] - y) ** 2)

        grads = jax.grad(loss)(state)
        updates, opt_state = tx.update(grads, opt_state, state)
        return optax.apply_updates(state, updates), opt_state

    @jax.jit
    def measure(state, start, x, y, out0, h0):
        out, h = forward(state, x)
        return {
            "h": _traced_rms(h),
            "delta_h": _traced_rms(h - h0),
            "out": _traced_rms(out),
            "delta_out": _traced_rms(out - out0),
            "loss": jnp.mean((out - y) ** 2),
            "delta_top": _top_order_term(nnx.merge(graphdef, state), start, x),
        }

    points = []
    for seed in range(cfg.seeds):
        key = jax.random.key(10_007 * seed + 17)
        state = mod.init(state0, key, w, d, init_std=1.0 / math.sqrt(cfg.base_width))
        start = state
        gen = np.random.default_rng(1_000 + seed)
        x = jnp.asarray(gen.standard_normal((cfg.batch, cfg.d_in)), jnp.float32)
        y = jnp.asarray(gen.standard_normal((cfg.batch, cfg.d_out)), jnp.float32)
        opt_state = tx.init(state)
        out0, h0 = forward(state, x)
        for t in range(cfg.steps + 1):
            values = {k: float(v) for k, v in measure(state, start, x, y, out0, h0).items()}
            if record_step(points, (param, axis, width, depth, seed), t, cfg.steps, values):
                break
            state, opt_state = step(state, opt_state, x, y)
    return points


def _top_order_term(model: Any, start: Any, x: Any) -> Any:
    """``‖Σ_l α_l ΔW^(k) D … D ΔW^(1) h_{l-1}‖_R`` on ``x`` (masks ``D`` at this step),
    with ΔW the change of each block kernel since ``start``."""
    import jax
    import jax.numpy as jnp

    h = model.alpha_input * model.input(x)
    total = jnp.zeros_like(h)
    for li, block in enumerate(model.blocks):
        z, dz = h, h
        for i, layer in enumerate(block.layers):
            if i > 0 and block.relu:
                dz = dz * (z > 0).astype(z.dtype)
                z = jax.nn.relu(z)
            dw = layer.kernel[...] - start["blocks"][li]["layers"][i]["kernel"][...]
            dz = dz @ dw
            z = layer(z)
        total = total + model.alpha_hidden * dz
        h = h + model.alpha_hidden * z
    return _traced_rms(total)


def _traced_rms(a: Any) -> Any:
    """The RMS of a jax array as a traced jax value (inside ``jax.jit``, no float yet): the
    JAX form of :func:`spectral.measure.fit.rms`, which takes a concrete torch tensor."""
    import jax.numpy as jnp

    return jnp.sqrt(jnp.mean(jnp.square(a)))


def run_coord_check_jax(
    cfg: JaxCoordCheckConfig, *, progress: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Every run of the sweep; the JSON-ready result (config, points, slopes), in the
    layout of :func:`spectral.coordcheck.run_coord_check`."""
    points: list[dict[str, Any]] = []
    for param, axis, w, d in _sweep(cfg):
        points.extend(_train_point(cfg, param, axis, w, d))
        if progress:
            progress(f"{param} {axis} n={w} L={d} ({cfg.seeds} seeds)")
    return {"config": cfg.to_dict(), **judge(points), "points": points}


_METRIC_NAMES = {"h": "‖h_L‖", "delta_h": "‖h_L(t)−h_L(0)‖", "delta_top": "top-order term"}


def slope_table(result: dict[str, Any]) -> str:
    """The slope table of ``spectral coord-check`` as plain text: parameterization, axis,
    metric, slope, pass (the top-order term is reported, not judged)."""
    cfg = result["config"]
    opt = cfg["optimizer"] + (f"+{cfg['others']}" if cfg.get("others") else "")
    rows = [("parameterization", "axis", "metric", "slope", "pass")]
    for s in result["slopes"]:
        rows.append(
            (
                s["parameterization"],
                s["axis"],
                _METRIC_NAMES.get(s["metric"], s["metric"]),
                "—" if s["slope"] is None else f"{s['slope']:+.3f}",
                "pass" if s["pass"] else "fail",
            )
        )
    for s in result.get("extra_slopes", []):
        if s["metric"] == "delta_top":
            slope = "—" if s["slope"] is None else f"{s['slope']:+.3f}"
            rows.append((s["parameterization"], s["axis"], "top-order term", slope, "info"))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = [
        f"coord check (JAX) — mlp, {opt}: log–log slopes at step {cfg['steps']} "
        f"(pass: |slope| ≤ {cfg['slope_tolerance']})",
        "",
    ]
    for i, r in enumerate(rows):
        cells = [c.rjust(w) if j == 3 else c.ljust(w) for j, (c, w) in enumerate(zip(r, widths, strict=True))]
        lines.append("  ".join(cells).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n"
