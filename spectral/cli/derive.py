"""``spectral list`` and ``spectral derive``: the catalog, and one optimizer's rules.

Registered in :data:`spectral.cli.COMMANDS`. sympy is imported when ``derive`` runs.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..render import FORMATS  # the formats render.render() knows: one list
from .common import EXIT_OK, UsageError, add_output_options, emit

__all__ = ["configure_derive", "configure_list", "run_derive", "run_list"]


# --------------------------------------------------------------------------------------
# spectral list
# --------------------------------------------------------------------------------------


def configure_list(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("table", "json"), default="table", help="output format")
    add_output_options(p)


def run_list(args: argparse.Namespace) -> int:
    from ..catalog import catalog
    from ..render import catalog_rows

    rows = catalog_rows(catalog().values())
    if args.format == "json":
        import json

        emit(json.dumps(rows, indent=2, ensure_ascii=False) + "\n", args)
        return EXIT_OK
    from ..render import catalog_table

    emit(None, args, renderable=catalog_table(rows))
    return EXIT_OK


# --------------------------------------------------------------------------------------
# spectral derive
# --------------------------------------------------------------------------------------


def configure_derive(p: argparse.ArgumentParser) -> None:
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "optimizer", nargs="?", metavar="OPTIMIZER", help="a catalog name (see `spectral list`)"
    )
    which.add_argument("--spec", metavar="FILE.toml", help="an optimizer declared in a TOML file")
    p.add_argument("--k", type=int, default=2, help="maps per residual block (default 2)")
    p.add_argument("--format", choices=FORMATS, default="table", help="output format")
    p.add_argument(
        "--standalone", action="store_true", help="LaTeX: wrap the table in a compilable document"
    )
    p.add_argument(
        "--explain",
        action="store_true",
        help="add, per entry, the condition that fixed it, and the verification summary",
    )
    p.add_argument(
        "--all-roles",
        action="store_true",
        help="table, markdown, latex: also derive the roles placed by their dimensions: "
        "output_bias, outer_weight, outer_bias, rank_down_weight, normed_rank_down_weight, "
        "rank_up_weight, hidden_vector (docs/roles.md); --format json always lists them (a no-op there)",
    )
    p.add_argument(
        "--horizon",
        action="store_true",
        help="add the rules along the training horizon D and the batch B (lr by its laws, "
        "weight decay by its timescale B/(ηλD), ε and momenta where a law moves them); "
        "JSON: the key 'along'",
    )
    p.add_argument(
        "--input-kind",
        choices=("image", "language"),
        default=None,
        help="input-weight init variance: σ²_base/d₀ (image) or σ²_base (language)",
    )
    add_output_options(p)


def run_derive(args: argparse.Namespace) -> int:
    from ..catalog import derive

    if args.standalone and args.format != "latex":
        raise UsageError("--standalone applies only to --format latex")
    if args.spec is not None:
        from ..engine.spec_file import load_spec

        optimizer: Any = load_spec(args.spec)
    else:
        optimizer = args.optimizer
    # JSON is the machine-readable listing of every role a model may need, so it always
    # carries the roles placed by their dimensions; the human formats stay the paper's
    # tables (their golden files) unless --all-roles asks for the rest.
    d = derive(optimizer, k=args.k, all_roles=args.all_roles or args.format == "json")

    from .. import render

    if args.format == "table":
        emit(
            None, args, renderable=render.table(
                d, explain=args.explain, input_kind=args.input_kind, along=args.horizon
            )
        )
    elif args.format == "markdown":
        emit(
            render.markdown(
                d, explain=args.explain, input_kind=args.input_kind, along=args.horizon
            ),
            args,
        )
    elif args.format == "latex":
        emit(
            render.latex(
                d,
                standalone=args.standalone,
                explain=args.explain,
                input_kind=args.input_kind,
                along=args.horizon,
            ),
            args,
        )
    else:
        emit(render.json_text(d, explain=args.explain, along=args.horizon), args)
    return EXIT_OK
