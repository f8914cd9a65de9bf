"""``spectral coord-check`` and ``spectral probe``: verification you can see.

Registered in :data:`spectral.cli.COMMANDS`. torch, numpy, matplotlib and rich are imported
inside the handlers only, so ``spectral derive`` never imports them.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from ..errors import SpecError
from .common import progress as _progress
from .common import write_json as _write_json

__all__ = [
    "configure_coord_check",
    "run_coord_check_cmd",
    "configure_probe",
    "run_probe_cmd",
]


def _ints(text: str) -> tuple[int, ...]:
    try:
        vals = tuple(int(v) for v in text.replace(" ", "").split(",") if v)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if not vals or min(vals) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return vals


def _names(text: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in text.split(",") if v.strip())


def _fmt(x: float | None) -> str:
    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:+.3f}"


def _add_user_optimizer_options(p: argparse.ArgumentParser, catalog_option: str) -> None:
    """``--spec`` and ``--factory``: check an optimizer the catalog does not know."""
    p.add_argument(
        "--spec",
        metavar="FILE.toml",
        help="an optimizer declared in a TOML file (as for `spectral derive --spec`)",
    )
    p.add_argument(
        "--factory",
        metavar="MODULE:CALLABLE",
        help="the implementation: CALLABLE(param_groups, **kwargs) returns the torch optimizer; "
        "MODULE is a dotted module or a path to a .py file (needed with --spec unless it names "
        f"a catalog optimizer; with a catalog {catalog_option} it replaces the built-in one)",
    )


def _check_outputs(args: argparse.Namespace, *names: str) -> None:
    """An output option given as '' is a mistake, not a request for no output."""
    for name in names:
        if getattr(args, name, None) == "":
            raise SpecError(f"--{name}: empty path")


def _make_folder(path: str, option: str) -> None:
    """Create an output folder (with parents) when missing; a file in the way is an error."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise SpecError(f"{option} {path}: exists and is not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SpecError(f"{option} {path}: cannot create it ({exc.strerror or exc})") from None


# --------------------------------------------------------------------------------------
# spectral coord-check
# --------------------------------------------------------------------------------------


def configure_coord_check(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model", choices=("mlp", "gpt"), default=None, help="reference model (default mlp)"
    )
    p.add_argument(
        "--model-factory",
        metavar="MODULE:FUNC",
        help="check your own model: FUNC(width, depth) returns an nn.Module that takes token "
        "ids (B, T) and returns logits (or an object with .logits, as Hugging Face models "
        "do), with a fixed head dimension; MODULE is a dotted module or a path to a .py file",
    )
    p.add_argument(
        "--batch-factory",
        metavar="MODULE:FUNC",
        help="with --model-factory, for inputs other than token ids: FUNC(batch, seed) returns "
        "inputs or (inputs, targets); inputs a tensor, a dict (model(**inputs)) or a list "
        "(model(*inputs)); integer targets: cross entropy, float targets: MSE, none: "
        "next-token loss on the input ids",
    )
    p.add_argument(
        "--adapter",
        metavar="FILE.py:NAME|FILE.toml|FILE.json",
        help="with --model-factory, for a model no built-in adapter recognises: an Adapter "
        "(or a dict of its fields: input, branches, output, roles, final, ...) in a Python "
        "file or module, or a .toml / .json file holding those fields (docs/your-model.md)",
    )
    p.add_argument(
        "--vocab-size",
        type=int,
        default=None,
        help="token ids are drawn below this (default: the model's config.vocab_size, else "
        "its readout's out_features)",
    )
    p.add_argument(
        "--k", type=int, default=2, help="maps per residual block of the MLP (default 2)"
    )
    p.add_argument(
        "--linear", action="store_true", help="MLP without ReLU (the paper's linear analysis)"
    )
    p.add_argument("--optimizer", default=None, help="catalog optimizer (default adamw)")
    _add_user_optimizer_options(p, "--optimizer")
    p.add_argument(
        "--others",
        default=None,
        help="optimizer for all but the hidden weights (hybrid; default adamw for "
        "matrices-only optimizers such as muon-kimi)",
    )
    p.add_argument(
        "--parameterizations",
        type=_names,
        default=("sp", "mup-k1", "mup"),
        help="comma-separated subset of sp,mup-k1,mup (default all three)",
    )
    p.add_argument(
        "--widths",
        type=_ints,
        default=None,
        help="width sweep (default 64,128,256,512)",
    )
    p.add_argument(
        "--depths",
        type=_ints,
        default=None,
        help="depth sweep (default 4,8,16,32,64,128; GPT and --model-factory 2,4,8,16,32)",
    )
    p.add_argument(
        "--width", type=int, default=None, help="width of the depth sweep (default: smallest width)"
    )
    p.add_argument(
        "--depth", type=int, default=None, help="depth of the width sweep (default: smallest depth)"
    )
    p.add_argument("--steps", type=int, default=10, help="training steps (default 10)")
    p.add_argument("--batch", type=int, default=8, help="batch size (default 8)")
    p.add_argument("--seeds", type=int, default=3, help="seeds per point (default 3)")
    p.add_argument(
        "--lr", type=float, default=None,
        help="base learning rate of --optimizer (default: MLP per optimizer, e.g. adamw 0.01; "
        "GPT and --model-factory 0.003)",
    )
    p.add_argument("--others-lr", type=float, default=None, help="base learning rate of --others")
    p.add_argument("--weight-decay", type=float, default=0.0, help="base weight decay (default 0)")
    p.add_argument(
        "--alpha-base",
        type=float,
        default=None,
        help="base block multiplier of the hidden blocks at the base depth (default: MLP 0.5, "
        "GPT and --model-factory 1)",
    )
    p.add_argument(
        "--seq-len",
        type=int,
        default=32,
        help="tokens per sequence of the GPT and of --model-factory (default 32)",
    )
    p.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads (default: torch's)"
    )
    p.add_argument("--device", default="cpu", help="torch device, e.g. cuda (default cpu)")
    p.add_argument("--json", metavar="FILE", help="write every point and every slope as JSON")
    p.add_argument("--plots", metavar="DIR", help="write one PNG per sweep into DIR")
    p.add_argument("--prefix", default=None, help="file name prefix of the PNGs")
    p.add_argument("--force", action="store_true", help="overwrite existing files")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _coord_table(result: dict[str, Any]):
    from rich.table import Table

    cfg = result["config"]
    opt = cfg["optimizer"] + (f"+{cfg['others']}" if cfg.get("others") else "")
    model = cfg.get("model_factory") or cfg["model"]
    t = Table(
        title=f"coord check — {model}, {opt}: log–log slopes at step {cfg['steps']} "
        f"(pass: |slope| ≤ {cfg['slope_tolerance']})"
    )
    logits = result.get("h_metric") == "logits"
    h_names = (
        {"h": "‖logits‖", "delta_h": "‖logits(t)−logits(0)‖"}
        if logits
        else {"h": "‖h_L‖", "delta_h": "‖h_L(t)−h_L(0)‖"}
    )
    for col in ("parameterization", "axis", "metric", "slope", "pass"):
        t.add_column(col, justify="right" if col == "slope" else "left")
    for s in result["slopes"]:
        ok = s["pass"]
        t.add_row(
            s["parameterization"],
            s["axis"],
            h_names.get(s["metric"], s["metric"]),
            _fmt(s["slope"]),
            "[green]pass[/]" if ok else "[red]fail[/]",
        )
    for s in result.get("extra_slopes", []):
        if s["metric"] == "delta_top":
            t.add_row(
                s["parameterization"], s["axis"], "top-order term", _fmt(s["slope"]), "[dim]info[/]"
            )
    notes = []
    if result.get("h_source"):
        notes.append(("metric: " if logits else "h_L: ") + result["h_source"])
    if cfg.get("factory"):
        notes.append(f"{cfg['optimizer']} = {cfg['factory']}")
    if notes:
        t.caption = "\n".join(notes)
    return t


def run_coord_check_cmd(args: argparse.Namespace) -> int:
    from .common import console
    from ..coordcheck import CoordCheckConfig, plot_coord_check, run_coord_check, sweep_runs

    if args.spec is not None and args.optimizer is not None:
        raise SpecError("give --optimizer or --spec FILE.toml, not both")
    spec = factory = None
    if args.spec is not None:
        from ..spec_file import load_spec

        spec = load_spec(args.spec)
    if args.factory is not None:
        from .common import load_callable

        factory = load_callable(args.factory)
    if args.model_factory is not None and args.model is not None:
        raise SpecError("give --model or --model-factory, not both")
    if args.model_factory is None:
        for option, value in (
            ("--batch-factory", args.batch_factory),
            ("--adapter", args.adapter),
            ("--vocab-size", args.vocab_size),
        ):
            if value is not None:
                raise SpecError(f"{option} goes with --model-factory MODULE:FUNC")
    if args.batch_factory is not None and args.vocab_size is not None:
        raise SpecError(
            "--vocab-size sizes the random token batch; a --batch-factory makes its own"
        )
    if args.threads is not None:
        if args.threads < 1:
            raise SpecError(f"--threads must be positive, got {args.threads}")
        import torch

        torch.set_num_threads(args.threads)
    model_factory = batch_factory = None
    if args.model_factory is not None:
        from .common import load_callable

        model_factory = load_callable(args.model_factory, option="--model-factory")
    if args.batch_factory is not None:
        from .common import load_callable

        batch_factory = load_callable(args.batch_factory, option="--batch-factory")
    adapter = None
    if args.adapter is not None:
        from .common import load_adapter

        adapter = load_adapter(args.adapter)
    gpt = args.model == "gpt" or model_factory is not None
    # Sweeps reach well past the base: the mup slopes converge to 0 only as the finite-size
    # corrections die out (random branch sum ~ 1/L in variance; widths below the batch's
    # token count), see docs/coord-check/README.md.
    widths = args.widths or (64, 128, 256, 512)
    depths = args.depths or ((2, 4, 8, 16, 32) if gpt else (4, 8, 16, 32, 64, 128))
    cfg = CoordCheckConfig(
        model=args.model or "mlp",
        model_factory=model_factory,
        batch_factory=batch_factory,
        model_factory_name=args.model_factory,  # as written: a file path, not a module name
        batch_factory_name=args.batch_factory,
        vocab_size=args.vocab_size,
        adapter=adapter,
        optimizer=args.optimizer or "adamw",
        others=args.others,
        spec=spec,
        factory=factory,
        k=args.k,
        relu=not args.linear,
        parameterizations=tuple(args.parameterizations),
        widths=widths,
        depths=depths,
        fixed_width=args.width,
        fixed_depth=args.depth,
        steps=args.steps,
        batch=args.batch,
        seeds=args.seeds,
        lr=args.lr,
        others_lr=args.others_lr,
        weight_decay=args.weight_decay,
        alpha_base=args.alpha_base,
        seq_len=args.seq_len,
        device=args.device,
    )
    _check_outputs(args, "json", "plots")
    if args.plots:
        _make_folder(args.plots, "--plots")
    if args.json and Path(args.json).exists() and not args.force:
        raise SpecError(f"{args.json} exists; pass --force to overwrite it")
    total = len(sweep_runs(cfg))
    if args.quiet:
        result = run_coord_check(cfg)
    else:
        with _progress(total, "coord-check") as bar:
            task = bar.add_task("coord-check", total=total, what="")

            def tick(what: str) -> None:
                bar.update(task, advance=1, what=what)

            result = run_coord_check(cfg, progress=tick)
    paths = []
    if args.plots:
        name = args.model_factory.rpartition(":")[2] if model_factory else cfg.model
        prefix = args.prefix or f"{name}-{cfg.optimizer}" + (
            f"+{cfg.others}" if cfg.others else ""
        )
        for axis in ("width", "depth"):
            path = Path(args.plots) / f"{prefix}-{axis}.png"
            if path.exists() and not args.force:
                raise SpecError(f"{path} exists; pass --force to overwrite it")
            plot_coord_check(result, axis, str(path))
            paths.append(str(path))
        result["plots"] = paths
    if args.json:
        _write_json(args.json, result, args.force)
    console().print(_coord_table(result))
    for path in paths:
        console().print(f"wrote {path}")
    return 0


# --------------------------------------------------------------------------------------
# spectral probe
# --------------------------------------------------------------------------------------


def configure_probe(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "optimizer", nargs="*", help="catalog optimizer(s), or 'all' (or none, with --spec)"
    )
    _add_user_optimizer_options(p, "OPTIMIZER")
    p.add_argument(
        "--widths", type=_ints, default=(64, 128, 256, 512, 1024), help="widths (default 64..1024)"
    )
    p.add_argument("--d0", type=int, default=32, help="fixed input/output dimension (default 32)")
    p.add_argument("--seeds", type=int, default=1, help="gradients per point (default 1)")
    p.add_argument("--rank", type=int, default=2, help="rank of the synthetic gradient (default 2)")
    p.add_argument(
        "--noise", type=float, default=1e-3, help="spectral norm of the added noise (default 1e-3)"
    )
    p.add_argument("--device", default="cpu", help="torch device (default cpu)")
    p.add_argument(
        "--dtype", choices=("float32", "float64"), default="float32", help="parameter dtype"
    )
    p.add_argument("--json", metavar="FILE", help="write the result as JSON")
    p.add_argument("--markdown", metavar="FILE", help="write the table as Markdown")
    p.add_argument("--plot", metavar="FILE.png", help="write a log–log plot of ‖ΔW‖_R against n")
    p.add_argument("--force", action="store_true", help="overwrite existing files")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _probe_table(results):
    from rich.table import Table

    t = Table(title="probe — exponent of ‖ΔW‖_R in n: measured vs declared (pass: |Δ| ≤ 0.1)")
    for col in ("optimizer", "role", "shape", "declared", "measured", "pass", "note"):
        t.add_column(col, justify="right" if col in ("declared", "measured") else "left")
    for res in results:
        for r in res.rows:
            t.add_row(
                res.optimizer,
                r.role,
                r.shape,
                f"{r.declared:+.2f}",
                f"{r.measured:+.3f}",
                "[green]pass[/]" if r.passed else "[red]FAIL[/]",
                r.note,
            )
    from ..probe import PROBE_BUILDERS

    own = [
        f"{res.optimizer} = {res.implementation}"
        for res in results
        if res.optimizer not in PROBE_BUILDERS
        or PROBE_BUILDERS[res.optimizer].name != res.implementation
    ]
    if own:
        t.caption = "measured: " + "; ".join(own)
    return t


def probe_markdown(results) -> str:
    lines = [
        "| optimizer | implementation | role | shape | declared | measured | pass | note |",
        "|---|---|---|---|---:|---:|---|---|",
    ]
    for res in results:
        for r in res.rows:
            lines.append(
                f"| {res.optimizer} | `{res.implementation}` | {r.role} | {r.shape} | "
                f"{r.declared:+.2f} | {r.measured:+.3f} | {'pass' if r.passed else '**FAIL**'} | "
                f"{r.note} |"
            )
    return "\n".join(lines) + "\n"


def _probe_plot(results, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(results)
    cols = min(3, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.3 * cols, 2.6 * rows), squeeze=False)
    for idx, res in enumerate(results):
        ax = axes[idx // cols][idx % cols]
        for r in res.rows:
            ax.plot(
                res.widths,
                r.norms,
                marker="o",
                ms=3,
                lw=1,
                label=f"{r.role} {r.measured:+.2f} (decl {r.declared:+.1f})",
            )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{res.optimizer}", fontsize=9)
        ax.set_xlabel("n", fontsize=8)
        ax.set_ylabel("‖ΔW‖_R", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=5.5)
    for idx in range(n, rows * cols):
        axes[idx // cols][idx % cols].axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def _user_optimizer(args: argparse.Namespace, names: list[str]) -> tuple[Any, Any]:
    """``(spec or None, factory or None)`` from ``--spec`` / ``--factory``, checked against
    the OPTIMIZER names given: one optimizer only, and an implementation must be known."""
    from ..catalog import resolve

    if args.spec is None and args.factory is None:
        return None, None
    if args.spec is not None and names:
        raise SpecError("give OPTIMIZER or --spec FILE.toml, not both")
    if args.spec is None and (len(names) != 1 or names == ["all"]):
        raise SpecError("--factory replaces the implementation of one OPTIMIZER (or of --spec)")
    from .common import load_callable

    spec = None
    if args.spec is not None:
        from ..spec_file import load_spec

        spec = load_spec(args.spec)
    factory = load_callable(args.factory) if args.factory is not None else None
    return (spec if spec is not None else resolve(names[0])), factory


def run_probe_cmd(args: argparse.Namespace) -> int:
    from ..catalog import catalog, resolve
    from .common import console
    from ..probe import PROBE_BUILDERS, probe

    names = list(args.optimizer)
    spec, factory = _user_optimizer(args, names)
    if spec is not None:
        if factory is None and spec.name not in PROBE_BUILDERS:
            raise SpecError(
                f"--spec {args.spec} declares {spec.name!r}, which has no built-in "
                "implementation; pass --factory MODULE:CALLABLE, a function "
                "fn(param_groups, **kwargs) returning the torch optimizer"
            )
        optimizers: list[Any] = [spec]
    else:
        if not names:
            raise SpecError("name an OPTIMIZER (or 'all'), or give --spec FILE.toml")
        if names == ["all"]:
            names = [n for n in catalog() if n in PROBE_BUILDERS]
        optimizers = [resolve(n) for n in names]
    _check_outputs(args, "json", "markdown", "plot")
    for path in (args.json, args.markdown, args.plot):
        if path and Path(path).exists() and not args.force:
            raise SpecError(f"{path} exists; pass --force to overwrite it")
    total = sum(len(args.widths) * (5 if o.applies_to_biases else 3) for o in optimizers)
    settings = {
        "factory": factory,
        "widths": args.widths,
        "d0": args.d0,
        "seeds": args.seeds,
        "rank": args.rank,
        "noise": args.noise,
        "device": args.device,
        "dtype": args.dtype,
    }
    if args.quiet:
        results = [probe(o, **settings) for o in optimizers]
    else:
        with _progress(total, "probe") as bar:
            task = bar.add_task("probe", total=total, what="")

            def advance(what: str) -> None:
                bar.update(task, advance=1, what=what)

            results = [probe(o, **settings, progress=advance) for o in optimizers]
    console().print(_probe_table(results))
    if args.json:
        data: Any = (
            results[0].to_dict()
            if len(results) == 1
            else {"results": [r.to_dict() for r in results]}
        )
        _write_json(args.json, data, args.force)
    if args.markdown:
        from ..io import write_atomic

        write_atomic(args.markdown, probe_markdown(results), force=args.force)
    if args.plot:
        _probe_plot(results, args.plot)
    return 0 if all(r.passed for r in results) else 1
