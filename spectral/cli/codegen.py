"""``spectral codegen`` and ``spectral transfer``: handlers registered in :mod:`spectral.cli`.

Neither imports torch: ``codegen`` writes a module that does, ``transfer`` is plain Python.
Heavy imports happen inside the handlers, so ``spectral derive`` stays light.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = [
    "CODEGEN_DESCRIPTION",
    "TRANSFER_DESCRIPTION",
    "configure_codegen",
    "configure_transfer",
    "parse_base_value",
    "run_codegen",
    "run_transfer",
]

CODEGEN_DESCRIPTION = (
    "Write a standalone Python module (standard library + torch only, plain numbers) with "
    "the μP rules of HIDDEN_OPT — and of --others OPT for every role HIDDEN_OPT does not "
    "take — plus hparams(), classify(), init_(), param_groups() and build_optimizers() "
    "built on real implementations (torch.optim, pytorch-optimizer). With --others, "
    "HIDDEN_OPT trains the hidden weights and OPT the input/output weights and all biases "
    "(the paper's Muon-Kimi + AdamW); without it HIDDEN_OPT trains every role it applies "
    "to, so a matrix-only optimizer then needs a model without biases or norm parameters."
)
TRANSFER_DESCRIPTION = (
    "Print the concrete per-role hyperparameters of a target model (--width, --depth) from "
    "base values tuned at (--base-width, --base-depth): the numbers the generated module's "
    "hparams() returns. --lr, --weight-decay and --eps take one number or NAME=VALUE pairs "
    "per optimizer (e.g. --lr muon=0.02,adamw=3e-4)."
)


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "optimizer",
        nargs="?",
        metavar="HIDDEN_OPT",
        help="optimizer of the hidden weights: a catalog name or the name in a --spec file "
        "(default: the one --spec file's optimizer)",
    )
    p.add_argument(
        "--others",
        metavar="OPT",
        help="optimizer of every other role: input/output weights and biases (e.g. adamw)",
    )
    p.add_argument(
        "--spec",
        metavar="FILE.toml",
        action="append",
        default=[],
        help="add an optimizer declared in a TOML file, usable in either slot (repeatable)",
    )
    p.add_argument("--k", type=int, default=2, help="maps per residual block (default 2)")
    p.add_argument("--base-width", type=_positive_int, required=True, metavar="N")
    p.add_argument("--base-depth", type=_positive_int, required=True, metavar="L")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _number(text: str) -> float:
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def parse_base_value(text: str) -> float | dict[str, float]:
    """``0.01`` or ``muon=0.02,adamw=3e-4`` (optimizer name → base value)."""
    if "=" not in text:
        return _number(text)
    out: dict[str, float] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        name = name.strip().lower()
        if not sep or not name:
            raise argparse.ArgumentTypeError(f"expected NAME=VALUE pairs, got {text!r}")
        if name in out:
            raise argparse.ArgumentTypeError(f"{name} is given twice in {text!r}")
        out[name] = _number(value.strip())
    return out


def _plan(args: argparse.Namespace) -> Any:
    from ..errors import SpecError
    from ..transfer import plan

    extra = {}
    for path in args.spec:
        from ..spec_file import load_spec

        spec = load_spec(path)
        if spec.name in extra:
            raise SpecError(f"two --spec files declare {spec.name!r}")
        extra[spec.name] = spec
    hidden = args.optimizer
    if hidden is None:
        if len(extra) != 1:
            raise SpecError("name HIDDEN_OPT (or give exactly one --spec file to use it)")
        hidden = next(iter(extra))
    return plan(hidden, args.others, args.k, catalog=extra or None)


def _command_line(args: argparse.Namespace, p: Any) -> str:
    parts = ["spectral codegen", p.hidden]
    if p.others:
        parts += ["--others", p.others]
    parts += [f"--spec {s}" for s in args.spec]
    parts += [f"--k {args.k}", f"--base-width {args.base_width}", f"--base-depth {args.base_depth}"]
    return " ".join(parts)


# --------------------------------------------------------------------------------------
# spectral codegen
# --------------------------------------------------------------------------------------


def configure_codegen(p: argparse.ArgumentParser) -> None:
    _add_common(p)
    p.add_argument(
        "-o", "--output", metavar="FILE", help="write the module to FILE (default: stdout)"
    )
    p.add_argument("--force", action="store_true", help="overwrite FILE if it exists")


def run_codegen(args: argparse.Namespace) -> int:
    import sys

    from .common import EXIT_OK, emit
    from ..codegen import render

    p = _plan(args)
    source = render(
        p,
        base_width=args.base_width,
        base_depth=args.base_depth,
        command=_command_line(args, p),
    )
    emit(source, args)
    if p.uncovered:
        who = f"--others {p.others}" if p.others else f"{p.hidden} (and no --others)"
        sys.stderr.write(
            f"note: {who} trains matrices only: {', '.join(p.uncovered)} are left "
            "untrained, so the model must have no biases or norm parameters (use an --others "
            "optimizer that takes vectors, e.g. --others adamw, otherwise)\n"
        )
    if args.output:
        sys.stderr.write(f"wrote {args.output} ({p.label}, k = {args.k})\n")
    return EXIT_OK


# --------------------------------------------------------------------------------------
# spectral transfer
# --------------------------------------------------------------------------------------


def configure_transfer(p: argparse.ArgumentParser) -> None:
    _add_common(p)
    p.add_argument("--width", type=_positive_int, required=True, metavar="N2")
    p.add_argument("--depth", type=_positive_int, required=True, metavar="L2")
    p.add_argument(
        "--lr", type=parse_base_value, required=True, help="base learning rate(s)", metavar="LR"
    )
    p.add_argument(
        "--init-std", type=_number, required=True, help="base init std σ", metavar="SIGMA"
    )
    p.add_argument(
        "--weight-decay",
        type=parse_base_value,
        default=0.0,
        metavar="WD",
        help="base weight decay(s) (default 0)",
    )
    p.add_argument(
        "--eps",
        type=parse_base_value,
        default=None,
        metavar="EPS",
        help="base ε (default: each implementation's, AdamW 1e-8, Shampoo 1e-6)",
    )
    p.add_argument(
        "--multiplier", type=_number, default=1.0, metavar="ALPHA", help="base multiplier"
    )
    p.add_argument("--format", choices=("table", "json"), default="table", help="output format")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    p.add_argument("--force", action="store_true", help="overwrite FILE if it exists")


def _check_names(value: Any, p: Any, what: str) -> None:
    from ..errors import SpecError

    if not isinstance(value, dict):
        return
    used = set(p.optimizers.values())
    unknown = sorted(set(value) - used)
    missing = sorted(used - set(value))
    if unknown:
        raise SpecError(
            f"--{what} names {', '.join(unknown)}, not used here ({', '.join(sorted(used))})"
        )
    if missing and what != "eps":
        raise SpecError(f"--{what} has no value for {', '.join(missing)}")


def run_transfer(args: argparse.Namespace) -> int:
    import json

    from .common import EXIT_OK, emit
    from ..errors import SpecError
    from ..transfer import hparams

    p = _plan(args)
    for what in ("lr", "weight_decay", "eps"):
        _check_names(getattr(args, what), p, what.replace("_", "-"))
    eps = args.eps
    if isinstance(eps, dict):  # optimizers without a value keep their default
        from ..transfer import DEFAULT_EPS

        eps = {**{o: DEFAULT_EPS[o] for o in p.optimizers.values() if o in DEFAULT_EPS}, **eps}
    try:
        hp = hparams(
            p,
            args.base_width,
            args.base_depth,
            args.width,
            args.depth,
            lr=args.lr,
            init_std=args.init_std,
            weight_decay=args.weight_decay,
            eps=eps,
            multiplier=args.multiplier,
        )
    except ValueError as exc:
        raise SpecError(str(exc)) from None
    if args.format == "json":
        emit(json.dumps(hp, indent=2) + "\n", args)
        return EXIT_OK
    emit(transfer_table(p, hp, args), args)
    return EXIT_OK


def transfer_table(p: Any, hp: dict[str, dict[str, float]], args: argparse.Namespace) -> str:
    """Plain aligned text: one row per role, one column per HP (``—`` where none)."""
    from ..transfer import HP_OUT

    r_n = args.width / args.base_width
    r_L = args.depth / args.base_depth
    rows = [["role", "optimizer", *HP_OUT]]
    for role, values in hp.items():
        cells = [f"{values[h]:.6g}" if h in values else "—" for h in HP_OUT]
        rows.append([role, p.optimizers[role], *cells])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        f"{p.label}, k = {args.k}: ({args.base_width}, {args.base_depth}) → "
        f"({args.width}, {args.depth}), r_n = {r_n:g}, r_L = {r_L:g}",
        "",
    ]
    for i, r in enumerate(rows):
        left = [c.ljust(w) for c, w in zip(r[:2], widths[:2], strict=True)]
        right = [c.rjust(w) for c, w in zip(r[2:], widths[2:], strict=True)]
        lines.append("  ".join(left + right).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    if p.uncovered:
        lines += ["", f"no optimizer trains {', '.join(p.uncovered)} (add --others adamw)"]
    return "\n".join(lines) + "\n"
