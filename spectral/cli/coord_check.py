"""``spectral coord-check``: verification you can see (``spectral probe``: :mod:`.probe`).

Registered in :data:`spectral.cli.COMMANDS`. torch, numpy, matplotlib and rich are imported
inside the handlers only, so ``spectral derive`` never imports them.
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Any

from ..errors import SpecError
from ..measure.fit import SLOPE_TOLERANCE_COORD
from ..measure.guard import DEFAULT_TIMEOUT
from . import options
from .common import EXIT_DERIVATION, EXIT_OK, wrote
from .common import progress as _progress
from .common import write_json as _write_json

__all__ = [
    "DESCRIPTION",
    "configure_coord_check",
    "run_coord_check",
]

DESCRIPTION = (
    "Coordinate check: train the residual MLP or the GPT for a few steps under "
    "sp, mup-k1 and mup across a width sweep and a depth sweep; fit the log-log slope of "
    f"‖h_L‖_R and ‖h_L(t) − h_L(0)‖_R at the last step (pass: |slope| ≤ "
    f"{SLOPE_TOLERANCE_COORD:g}); JSON, PNGs and a table."
)


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
        type=options.integer(2, 2**24),
        default=None,
        help="token ids are drawn below this (default: the model's config.vocab_size, else "
        "its readout's out_features)",
    )
    p.add_argument(
        "--k", type=options.integer(1, 8), default=2, help="maps per residual block of the MLP (default 2)"
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
        type=options.integers(1, 8192, at_least=2, at_most=16),
        default=None,
        help="width sweep, two to sixteen widths up to 8192 (default 64,128,256,512)",
    )
    p.add_argument(
        "--depths",
        type=options.integers(1, 1024, at_least=2, at_most=16),
        default=None,
        help="depth sweep (default 4,8,16,32,64,128; GPT and --model-factory 2,4,8,16,32)",
    )
    p.add_argument(
        "--width", type=options.integer(1, 8192), default=None, help="width of the depth sweep (default: smallest width)"
    )
    p.add_argument(
        "--depth", type=options.integer(1, 1024), default=None, help="depth of the width sweep (default: smallest depth)"
    )
    p.add_argument(
        "--steps", type=options.integer(1, 10_000), default=10, help="training steps (default 10)"
    )
    p.add_argument(
        "--batch", type=options.integer(1, 4096), default=8, help="batch size (default 8)"
    )
    p.add_argument(
        "--seeds", type=options.integer(1, 100), default=3, help="seeds per point (default 3)"
    )
    p.add_argument(
        "--lr", type=options.floats(0.0, 1e6, lo_open=True), default=None,
        help="base learning rate of --optimizer (default: MLP per optimizer, e.g. adamw 0.01; "
        "GPT and --model-factory 0.003)",
    )
    p.add_argument(
        "--others-lr", type=options.floats(0.0, 1e6, lo_open=True), default=None,
        help="base learning rate of --others",
    )
    p.add_argument(
        "--weight-decay", type=options.floats(0.0, 1e6), default=0.0,
        help="base weight decay (default 0)",
    )
    p.add_argument(
        "--alpha-base",
        type=options.floats(0.0, 1e6, lo_open=True),
        default=None,
        help="base block multiplier of the hidden blocks at the base depth (default: MLP 0.5, "
        "GPT and --model-factory 1)",
    )
    p.add_argument(
        "--seq-len",
        type=options.integer(1, 65536),
        default=32,
        help="tokens per sequence of the GPT and of --model-factory (default 32)",
    )
    p.add_argument(
        "--threads", type=options.integer(1, 1024), default=None,
        help="torch CPU threads (default: torch's)",
    )
    p.add_argument(
        "--device", type=options.device, default="cpu", help="torch device, e.g. cuda (default cpu)"
    )
    p.add_argument(
        "--timeout", type=options.timeout, default=DEFAULT_TIMEOUT, metavar="SECONDS",
        help=f"time limit of one run (building a model and training it; default {DEFAULT_TIMEOUT:g})",
    )
    p.add_argument("--json", metavar="FILE", help="write every point and every slope as JSON")
    p.add_argument("--plots", metavar="DIR", help="write one PNG per sweep into DIR")
    p.add_argument(
        "--prefix", type=options.file_prefix, default=None,
        help="file name prefix of the PNGs (a name, not a path: they go into --plots)",
    )
    p.add_argument("--force", action="store_true", help="overwrite existing files")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _coord_table(result: dict[str, Any]):
    from rich.table import Table

    from ..text import for_rich

    cfg = result["config"]
    opt = for_rich(cfg["optimizer"] + (f"+{cfg['others']}" if cfg.get("others") else ""))
    model = for_rich(cfg.get("model_factory") or cfg["model"])  # a path: no markup, one line
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
        notes.append(("metric: " if logits else "h_L: ") + for_rich(result["h_source"]))
    if cfg.get("factory"):
        notes.append(for_rich(f"{cfg['optimizer']} = {cfg['factory']}"))
    if notes:
        t.caption = "\n".join(notes)
    return t


def run_coord_check(args: argparse.Namespace) -> int:
    import contextlib
    import sys

    from ..measure.guard import user_code

    # the user's print()s (at import or while training) go to stderr: stdout has the table
    with contextlib.redirect_stdout(sys.stderr):
        cfg = _coord_config(args, user_code)
        plots = _coord_outputs(args, cfg)
        result = _coord_run(args, cfg)
    from ..coordcheck import plot_coord_check
    from .common import console

    if plots:
        _make_folder(args.plots, "--plots")
    for path, axis in zip(plots, ("width", "depth"), strict=False):
        plot_coord_check(result, axis, path, force=args.force)
    if plots:
        result["plots"] = plots
    if args.json:
        _write_json(args.json, result, args.force)
    console().print(_coord_table(result))
    for path in plots:
        wrote(path)
    from ..coordcheck import divergence_text, diverged
    from ..text import for_terminal

    model = for_terminal(cfg.model_factory_name or cfg.model)
    if result["diverged"] is not None:  # the slopes of a diverged run mean nothing
        sys.stderr.write(f"error: model {model} {divergence_text(result['diverged'])}; the check fails\n")
        return EXIT_DERIVATION
    sp = diverged(p for p in result["points"] if p["parameterization"] == "sp")
    if sp is not None:  # expected of sp at large sizes: said, not an error
        sys.stderr.write(f"note: model {model} {divergence_text(sp)} (sp is the comparison; "
                         "its fits drop the diverged points)\n")
    return EXIT_OK


def _refuse_clashes(args: argparse.Namespace) -> None:
    """Options that contradict each other, or that only one model kind takes."""
    if args.spec is not None and args.optimizer is not None:
        raise SpecError("give --optimizer or --spec FILE.toml, not both")
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


def _coord_config(args: argparse.Namespace, user_code: Any):
    """The :class:`CoordCheckConfig` of the arguments; the user's modules imported under the
    time limit."""
    from ..coordcheck import CoordCheckConfig

    _refuse_clashes(args)
    options.check_device(args.device)
    spec = None
    if args.spec is not None:
        from ..engine.spec_file import load_spec

        spec = load_spec(args.spec)
    import torch

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    from .common import load_callable

    loaded = {}
    for option, attr in (
        ("--factory", "factory"),
        ("--model-factory", "model_factory"),
        ("--batch-factory", "batch_factory"),
    ):
        text = getattr(args, attr)
        loaded[attr] = None
        if text is not None:
            with user_code(f"importing {text}", args.timeout):
                loaded[attr] = load_callable(text, option=option)
    gpt = args.model == "gpt" or loaded["model_factory"] is not None
    adapter = None
    if args.adapter is not None:
        from .common import load_adapter

        adapter = load_adapter(args.adapter)
    # Sweeps reach well past the base: the mup slopes converge to 0 only as the finite-size
    # corrections die out (random branch sum ~ 1/L in variance; widths below the batch's
    # token count), see docs/coord-check/README.md.
    widths = args.widths or (64, 128, 256, 512)
    depths = args.depths or ((2, 4, 8, 16, 32) if gpt else (4, 8, 16, 32, 64, 128))
    return CoordCheckConfig(
        model=args.model or "mlp",
        model_factory=loaded["model_factory"],
        batch_factory=loaded["batch_factory"],
        model_factory_name=args.model_factory,  # as written: a file path, not a module name
        batch_factory_name=args.batch_factory,
        vocab_size=args.vocab_size,
        adapter=adapter,
        optimizer=args.optimizer or "adamw",
        others=args.others,
        spec=spec,
        factory=loaded["factory"],
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


def _coord_outputs(args: argparse.Namespace, cfg: Any) -> list[str]:
    """Check ``--json``, the ``--plots`` folder and its PNGs before any training, creating
    nothing (the folder is made when the plots are written); returns the PNGs' paths."""
    from ..io import check_distinct, check_output, check_output_folder

    _check_outputs(args, "json", "plots")
    if args.prefix is not None and not args.plots:
        raise SpecError("--prefix names the PNGs of --plots DIR; give --plots too")
    plots: list[str] = []
    folder_exists = False
    if args.plots:
        folder_exists = check_output_folder(args.plots, option="--plots")
        name = args.model_factory.rpartition(":")[2] if cfg.model_factory else cfg.model
        prefix = args.prefix or (f"{name}-{cfg.optimizer}" + (f"+{cfg.others}" if cfg.others else "")).replace("/", "-")
        plots = [str(Path(args.plots) / f"{prefix}-{axis}.png") for axis in ("width", "depth")]
    pngs = {f"--plots ({Path(p).name})": p for p in plots}
    check_distinct({"--json": args.json, "--plots": args.plots, **pngs})
    # --json DIR/r.json --plots DIR, DIR still to be made: nothing is there to refuse yet
    into_new = args.json is not None and bool(plots) and not folder_exists and (
        os.path.realpath(os.path.dirname(args.json) or ".") == os.path.realpath(args.plots))
    if args.json is not None and not into_new:
        check_output(args.json, force=args.force, option="--json")
    if folder_exists:  # a folder still to be made holds no PNG yet
        for option, path in pngs.items():
            check_output(path, force=args.force, option=option)
    return plots


def _coord_run(args: argparse.Namespace, cfg: Any) -> dict[str, Any]:
    from ..coordcheck import run_coord_check, sweep_runs

    if args.quiet:
        return run_coord_check(cfg, timeout=args.timeout)
    total = len(sweep_runs(cfg))
    with _progress(total, "coord-check") as bar:
        task = bar.add_task("coord-check", total=total, what="")

        def tick(what: str) -> None:
            bar.update(task, advance=1, what=what)

        return run_coord_check(cfg, progress=tick, timeout=args.timeout)
