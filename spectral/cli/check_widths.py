"""``spectral check``: a model's twins at three or more widths, each module's slopes against
the rules (:mod:`spectral.torch.check.widths`), as a table; exit code 1 when a module is off.

Registered in :data:`spectral.cli.COMMANDS`. torch, transformers and rich are imported inside
the handler only, so ``spectral derive`` never imports them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

from ..errors import SpecError, first_line
from ..measure.guard import DEFAULT_TIMEOUT
from . import options

__all__ = ["configure_check", "run_check"]

DESCRIPTION = (
    "Check a model across widths: build small twins of it at three or more widths (a Hugging "
    "Face config rescaled, or your factory), set each up with the rules of OPTIMIZER "
    "(apply_multipliers, init_, build_optimizers), take one step on a fixed batch, and fit "
    "the log-log slope of every module's output RMS at init and of its one-step change. A "
    "module more than 0.2 off the exponent the rules predict, or dead (0 before and after "
    "the step), is named with what to change; exit code 1 then."
)


def configure_check(p: argparse.ArgumentParser) -> None:
    p.add_argument("optimizer", help="catalog optimizer of the hidden weights (e.g. muon-kimi)")
    p.add_argument("--others", default=None, help="optimizer of all other roles (e.g. adamw)")
    p.add_argument("--k", type=options.integer(1, 8), default=2, help="maps per block (default 2)")
    p.add_argument("--base-width", type=options.integer(1, options.MAX_SIZE), default=64)
    p.add_argument("--base-depth", type=options.integer(1, options.MAX_SIZE), default=2)
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--model-factory",
        metavar="MODULE:FUNC",
        help="FUNC(width) or FUNC(width, depth) returns your model at that width (depth: 2 "
        "layers), as for coord-check; MODULE is a dotted module or a path to a .py file",
    )
    source.add_argument(
        "--hf-config",
        metavar="FILE.json",
        help="a Hugging Face config.json (with model_type, and architectures naming the "
        "class): its twins are rebuilt from it at each width, with 2 layers (read as data)",
    )
    p.add_argument(
        "--adapter",
        metavar="FILE.py:NAME|FILE.toml|FILE.json",
        help="for a model no built-in adapter recognises (docs/your-model.md)",
    )
    p.add_argument(
        "--widths",
        type=options.integers(1, 1 << 16, at_least=3, at_most=8),
        default=(64, 128, 256),
        help="widths of the twins (default 64,128,256)",
    )
    p.add_argument(
        "--lr", type=options.floats(0.0, 1e6, lo_open=True), default=3e-3,
        help="base learning rate (default 0.003)",
    )
    p.add_argument(
        "--weight-decay", type=options.floats(0.0, 1e6), default=0.0,
        help="base weight decay (default 0)",
    )
    p.add_argument(
        "--init-std", type=options.floats(0.0, 1e6, lo_open=True), default=0.02,
        help="base init std (default 0.02)",
    )
    p.add_argument(
        "--timeout", type=options.timeout, default=DEFAULT_TIMEOUT, metavar="SECONDS",
        help=f"time limit of the whole check (default {DEFAULT_TIMEOUT:g})",
    )


def _hf_model(path: str) -> Any:
    """The model a config.json describes, built on the meta device (no memory)."""
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise SpecError(f"--hf-config {path}: cannot read it: {first_line(exc)}") from None
    if not isinstance(data, dict) or not isinstance(data.get("model_type"), str):
        raise SpecError(f"--hf-config {path}: expected a JSON object with a model_type")
    import torch
    import transformers

    fields = {k: v for k, v in data.items() if k != "model_type"}
    try:
        config = transformers.AutoConfig.for_model(data["model_type"], **fields)
    except (ValueError, TypeError, KeyError) as exc:
        raise SpecError(f"--hf-config {path}: {first_line(exc)}") from None
    names = data.get("architectures") or []
    cls = getattr(transformers, names[0], None) if names and isinstance(names[0], str) else None
    if cls is None:
        raise SpecError(
            f"--hf-config {path}: architectures must name a transformers model class "
            "(e.g. [\"LlamaForCausalLM\"])"
        )
    with torch.device("meta"):
        return cls(config)


def _by_width(fn: Any) -> Any:
    """FUNC(width), or FUNC(width, depth) given the twins' depth (coord-check's factories)."""
    import inspect

    from ..torch.check.twins import TWIN_LAYERS

    try:
        takes = len(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return fn
    return (lambda width: fn(width, TWIN_LAYERS)) if takes >= 2 else fn


def _table(report: Any, title: str) -> Any:
    from rich.table import Table

    from ..torch.check.widths import SLOPE_TOLERANCE

    def cell(measured: float | None, predicted: float | None) -> str:
        if measured is None:
            return "—"
        if predicted is None:
            return f"{measured:+.2f}"
        off = abs(measured - predicted) > SLOPE_TOLERANCE
        text = f"{measured:+.2f} ({predicted:+.2g})"
        return f"[red]{text}[/red]" if off else text

    t = Table(title=title)
    t.add_column("module", overflow="fold")
    for column in ("role", "at init (rules)", "one step (rules)", ""):
        t.add_column(column)
    named = {line.split(" ")[0] for line in report.problems}
    from ..torch.check.widths import group_name

    for row in report.rows:
        verdict = "dead" if row.dead and row.kind != "bias" else ""
        if not verdict and group_name(row.name) in named:
            verdict = "off"
        t.add_row(
            row.name,
            row.label,
            cell(row.init_slope, row.init_predicted),
            cell(row.step_slope, row.step_predicted),
            f"[red]{verdict}[/red]" if verdict else "ok",
        )
    return t


def run_check(args: argparse.Namespace) -> int:
    import tempfile

    from ..codegen.torch import load_generated
    from ..measure.guard import user_code
    from .common import console, load_adapter, load_callable

    adapter = load_adapter(args.adapter) if args.adapter else None
    # the user's print()s go to stderr: stdout has the table
    with contextlib.redirect_stdout(sys.stderr):
        cfg = load_generated(
            args.optimizer,
            args.others,
            args.k,
            base_width=args.base_width,
            base_depth=args.base_depth,
            folder=tempfile.mkdtemp(prefix="spectral-check-"),
        )
        from ..torch.check.widths import check_widths

        with user_code("the check across widths", args.timeout):
            if args.model_factory:
                with user_code(f"importing {args.model_factory}", args.timeout):
                    factory = _by_width(
                        load_callable(args.model_factory, option="--model-factory")
                    )
                model = factory(min(args.widths))
            else:
                factory, model = None, _hf_model(args.hf_config)
            report = check_widths(
                cfg.CONFIG,
                model,
                list(args.widths),
                factory=factory,
                adapter=adapter,
                timeout=args.timeout,
                base={
                    "lr": args.lr,
                    "weight_decay": args.weight_decay,
                    "init_std": args.init_std,
                },
            )
    source = args.model_factory or args.hf_config
    opt = args.optimizer + (f"+{args.others}" if args.others else "")
    widths = ",".join(map(str, report.widths))
    title = f"check across widths — {source}, {opt}: log-log slopes over widths {widths}"
    out = console()
    if report.rows:
        out.print(_table(report, title))
    for line in report.problems:
        out.print(line, markup=False, highlight=False)
    if report.problems:
        return 1
    out.print(f"every module within ±0.2 of its rules at widths {widths}")
    return 0
