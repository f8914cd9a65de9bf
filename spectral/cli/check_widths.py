"""``spectral check``: a model's twins at three or more widths, each module's slopes against
the rules (:mod:`spectral.torch.check.widths`), as a table; exit code 1 when a module is off.

Registered in :data:`spectral.cli.COMMANDS`. torch, transformers and rich are imported inside
the handler only, so ``spectral derive`` never imports them.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any

from ..errors import SpecError, Terminated, first_line
from ..measure.fit import SLOPE_TOLERANCE_WIDTHS, within
from ..measure.guard import DEFAULT_TIMEOUT
from ..text import for_terminal
from . import options

__all__ = ["DESCRIPTION", "configure_check", "run_check"]

DESCRIPTION = (
    "Check a model across widths: build small twins of it at three or more widths (a Hugging "
    "Face config rescaled, or your factory), set each up with the rules of OPTIMIZER "
    "(apply_multipliers, init_, build_optimizers), take one step on a fixed batch, and fit "
    "the log-log slope of every module's output RMS at init and of its one-step change. A "
    f"module more than {SLOPE_TOLERANCE_WIDTHS:g} off the exponent the rules predict, or dead "
    "(0 before and after the step), is named with what to change; exit code 1 then."
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
        type=options.integers(1, 1 << 16, at_least=3, at_most=8, distinct=True),
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
        "--seeds", type=options.integer(1, 1000), default=1,
        help="twins drawn per width, their RMS averaged before the fit (default 1; at a few "
        "heads of width one draw's slopes scatter by about 0.1)",
    )
    p.add_argument(
        "--patterns", type=_pattern, action="append", metavar="REGEX=ROLE",
        help="give the parameters whose name matches REGEX this role, before the adapter's "
        "(repeatable; e.g. 'self_attn\\.sinks$=hidden_bias'), as patterns= in check()",
    )
    p.add_argument(
        "--timeout", type=options.timeout, default=DEFAULT_TIMEOUT, metavar="SECONDS",
        help=f"time limit of the whole check (default {DEFAULT_TIMEOUT:g})",
    )
    p.add_argument(
        "--verbose", "-v", action="store_true",
        help="also print what transformers and torch log or warn meanwhile (kept off otherwise)",
    )


def _pattern(text: str) -> tuple[str, str]:
    """REGEX=ROLE (split at the last '=': a role has none), the regex compiled and the role
    known, each refused in one line."""
    import re

    from ..scaling import unknown_role

    pattern, sep, role = text.rpartition("=")
    if not sep or not pattern or not role:
        raise argparse.ArgumentTypeError(f"expected REGEX=ROLE, got {text!r}")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"{pattern!r} does not compile: {exc}") from None
    problem = unknown_role(pattern, role)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return pattern, role


def _by_width(fn: Any, option: str) -> Any:
    """FUNC(width), or FUNC(width, depth) given the twins' depth (coord-check's factories);
    a function that takes neither is refused before it is called."""
    import inspect

    from ..torch.check.twins import TWIN_LAYERS

    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return fn

    def binds(*args: int) -> bool:
        try:
            sig.bind(*args)
        except TypeError:
            return False
        return True

    if binds(1, 2) and len(sig.parameters) >= 2:
        return lambda width: fn(width, TWIN_LAYERS)
    if binds(1):
        return fn
    raise SpecError(
        f"{option}: {getattr(fn, '__name__', 'the factory')}{sig} takes neither (width) nor "
        "(width, depth)"
    )


def _table(report: Any, title: str) -> Any:
    from rich.table import Table


    def cell(measured: float | None, predicted: float | None) -> str:
        if measured is None:
            return "—"
        if predicted is None:
            return f"{measured:+.2f}"
        off = not within(measured, predicted, SLOPE_TOLERANCE_WIDTHS)
        text = f"{measured:+.2f} ({predicted:+.2g})"
        return f"[red]{text}[/red]" if off else text

    t = Table(title=title)
    t.add_column("module", overflow="fold")
    for column in ("role", "at init (rules)", "one step (rules)", ""):
        t.add_column(column)
    named = {line.split(" ")[0] for line in report.problems}
    from ..torch.check.verdict import group_name

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


@contextlib.contextmanager
def _temporary_folder() -> Any:
    """A ``spectral-check-*`` folder for the generated config, removed when the block ends:
    on success, on an error, on Ctrl-C (KeyboardInterrupt) and on SIGTERM (turned into
    :class:`Terminated` while the block runs; the previous handler is restored)."""
    import signal
    import tempfile
    import threading

    def terminate(signum: int, frame: Any) -> None:  # noqa: ARG001 - a handler's signature
        raise Terminated

    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, terminate) if main_thread else None
    try:
        with tempfile.TemporaryDirectory(prefix="spectral-check-") as folder:
            yield folder
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


def _first_model(factory: Any, width: int, option: str) -> Any:
    """``factory(width)``, checked as coord-check checks its factory: what it raises or a
    result that is no ``nn.Module`` is one line naming it (exit code 2)."""
    from torch import nn

    try:
        model = factory(width)
    except Exception as exc:  # noqa: BLE001 - the user's code: any failure is bad input
        raise SpecError(f"{option}: the factory raised at width {width}: {first_line(exc)}") from None
    if not isinstance(model, nn.Module):
        raise SpecError(
            f"{option}: the factory returned {type(model).__name__} at width {width}, not a "
            "torch.nn.Module"
        )
    return model


def run_check(args: argparse.Namespace) -> int:
    try:
        return _run_check(args)
    except Terminated:
        sys.stderr.write("error: terminated (SIGTERM)\n")
        return 143


def _measure(args: argparse.Namespace) -> tuple[Any, list[str]]:
    """The check's report, and the notes of building the model."""
    from ..codegen.torch import load_generated
    from ..measure.guard import user_code
    from .common import load_adapter, load_callable
    from .hf_config import hf_model

    adapter = load_adapter(args.adapter) if args.adapter else None
    option = f"--model-factory {args.model_factory}"
    notes: list[str] = []
    # the user's print()s go to stderr: stdout has the table
    with contextlib.redirect_stdout(sys.stderr), _temporary_folder() as folder:
        with user_code("the check across widths", args.timeout):
            if args.model_factory:
                with user_code(f"importing {args.model_factory}", args.timeout):
                    factory = _by_width(
                        load_callable(args.model_factory, option="--model-factory"), option
                    )
                with user_code(f"{option} at width {min(args.widths)}", args.timeout):
                    model = _first_model(factory, min(args.widths), option)
            else:
                factory, (model, notes) = None, hf_model(args.hf_config)
            cfg = load_generated(
                args.optimizer,
                args.others,
                args.k,
                base_width=args.base_width,
                base_depth=args.base_depth,
                folder=folder,
            )
            from ..torch.config import check_widths

            report = check_widths(
                cfg.CONFIG,
                model,
                list(args.widths),
                factory=factory,
                adapter=adapter,
                patterns=args.patterns,
                seeds=args.seeds,
                timeout=args.timeout,
                base={
                    "lr": args.lr,
                    "weight_decay": args.weight_decay,
                    "init_std": args.init_std,
                },
            )
    return report, notes


def _run_check(args: argparse.Namespace) -> int:
    from .quiet import third_party_kept

    kept = None
    try:
        with third_party_kept() as kept:
            report, notes = _measure(args)
    finally:
        if kept is not None and args.verbose:
            for line in kept.third_party:
                sys.stderr.write(f"note: {for_terminal(line)}\n")
    for note in [*notes, *kept.notes]:  # the twins' heads, a forward not run
        sys.stderr.write(f"note: {for_terminal(note)}\n")
    source = args.model_factory or args.hf_config
    opt = args.optimizer + (f"+{args.others}" if args.others else "")
    widths = ",".join(map(str, report.widths))
    title = f"check across widths — {source}, {opt}: log-log slopes over widths {widths}"
    from .common import console

    out = console()
    if report.rows:
        out.print(_table(report, title))
    for line in report.problems:
        # the advice names check()'s argument; here it is an option
        line = line.replace("(patterns={...})", "(--patterns REGEX=ROLE)")
        out.print(line, markup=False, highlight=False, soft_wrap=True)  # one line each
    if report.problems:
        return 1
    out.print(f"every module within ±{SLOPE_TOLERANCE_WIDTHS:g} of its rules at widths {widths}")
    return 0
