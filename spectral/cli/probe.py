"""``spectral probe``: a declaration against its implementation, on one tensor per role.

Registered in :data:`spectral.cli.COMMANDS`. torch, matplotlib and rich are imported inside
the handler only. Every output (``--json``, ``--markdown``, ``--plot``) is checked before any
measuring and written by :func:`spectral.io.write_atomic`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from typing import Any

from ..errors import SpecError
from ..measure.guard import DEFAULT_TIMEOUT
from . import options
from .coord_check import _add_user_optimizer_options, _check_outputs
from .common import progress as _progress
from .common import write_json as _write_json

__all__ = ["configure_probe", "probe_markdown", "run_probe"]



def configure_probe(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "optimizer", nargs="*", help="catalog optimizer(s), or 'all' (or none, with --spec)"
    )
    _add_user_optimizer_options(p, "OPTIMIZER")
    p.add_argument(
        "--widths",
        type=options.integers(2, 8192, at_least=2, at_most=16),
        default=(64, 128, 256, 512, 1024),
        help="widths, two to sixteen up to 8192 (default 64..1024)",
    )
    p.add_argument(
        "--d0", type=options.integer(1, 4096), default=32,
        help="fixed input/output dimension (default 32)",
    )
    p.add_argument(
        "--seeds", type=options.integer(1, 100), default=1, help="gradients per point (default 1)"
    )
    p.add_argument(
        "--rank", type=options.integer(1, 4096), default=2,
        help="rank of the synthetic gradient (default 2)",
    )
    p.add_argument(
        "--noise", type=options.floats(0.0, 1e3), default=1e-3,
        help="spectral norm of the added noise (default 1e-3)",
    )
    p.add_argument("--device", type=options.device, default="cpu", help="torch device (default cpu)")
    p.add_argument(
        "--timeout", type=options.timeout, default=DEFAULT_TIMEOUT, metavar="SECONDS",
        help=f"time limit of one measurement (one build and its steps; default {DEFAULT_TIMEOUT:g})",
    )
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
    from ..measure.probe import PROBE_BUILDERS

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


def _probe_plot(results, path: str, force: bool) -> None:
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
    buffer = io.BytesIO()  # rendered in memory, written by the one writer
    try:
        fig.savefig(buffer, format="png", dpi=80)
    finally:
        plt.close(fig)
    from ..io import write_atomic

    write_atomic(path, buffer.getvalue(), force=force)


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
        from ..engine.spec_file import load_spec

        spec = load_spec(args.spec)
    factory = load_callable(args.factory) if args.factory is not None else None
    return (spec if spec is not None else resolve(names[0])), factory


def run_probe(args: argparse.Namespace) -> int:
    from ..catalog import catalog, resolve
    from .common import console
    from ..measure.probe import PROBE_BUILDERS, probe

    names = list(args.optimizer)
    import torch  # noqa: F401 - before any time limit: its import is not the user's time

    from ..measure.guard import user_code

    with contextlib.redirect_stdout(sys.stderr), user_code(f"importing {args.factory}", args.timeout):
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
    from ..io import check_distinct, check_output

    outputs = {"--json": args.json, "--markdown": args.markdown, "--plot": args.plot}
    check_distinct(outputs)
    for option, path in outputs.items():
        if path is not None:
            check_output(path, force=args.force, option=option)
    if min(args.widths) <= args.d0:
        raise SpecError(f"--widths: every width must be larger than --d0 {args.d0}; got {min(args.widths)}")
    options.check_device(args.device)
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
        "timeout": args.timeout,
    }
    # the user's print()s go to stderr: stdout carries the table
    with contextlib.redirect_stdout(sys.stderr):
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
        _probe_plot(results, args.plot, args.force)
    return 0 if all(r.passed for r in results) else 1
