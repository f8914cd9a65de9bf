"""``spectral codegen`` and ``spectral transfer``: handlers registered in :mod:`spectral.cli`.

Neither imports torch: ``codegen`` writes a module that does, ``transfer`` is plain Python.
Heavy imports happen inside the handlers, so ``spectral derive`` stays light.
"""

from __future__ import annotations

import argparse
from typing import Any

# parse_base_value stays in __all__: it was defined here before it moved below the CLI
from ..base_values import check_base_value, parse_base_value
from .options import MAX_SIZE

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
    "Write a Python module of plain numbers that imports the runtime spectral.torch "
    "(--vendor: one standalone file, standard library + torch only) with "
    "the μP rules of HIDDEN_OPT — and of --others OPT for every role HIDDEN_OPT does not "
    "take — plus hparams(), apply_multipliers() (forward hooks: the model's source stays "
    "as it is), init_(), build_optimizers() (one torch.optim.Optimizer over real "
    "implementations: torch.optim, pytorch-optimizer) and check(). With --others, "
    "HIDDEN_OPT trains the hidden weights and OPT the input/output weights, all biases "
    "and norm gains (the paper's Muon-Kimi + AdamW); without it HIDDEN_OPT trains every "
    "role it applies to, so a matrix-only optimizer then needs a model without biases or "
    "norm parameters."
)
TRANSFER_DESCRIPTION = (
    "Print the concrete per-role hyperparameters of a target model (--width, --depth) from "
    "base values tuned at (--base-width, --base-depth): the numbers the generated module's "
    "hparams() returns (--format json prints exactly that dict). Every base value takes one "
    "number or KEY=VALUE pairs, KEY a role (hidden_weight), an optimizer (adamw) or default: "
    "--lr muon=0.02,adamw=3e-4, --weight-decay hidden_weight=0.1,default=0. A plain number "
    "of --weight-decay or --init-std reaches the weights only: biases and norm gains get 0 "
    "unless their role is named. --d-in N gives a dense input layer's fan-in."
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
    p.add_argument(
        "--all-roles",
        action="store_true",
        help="also give rules to the roles placed by their dimensions: output_bias, "
        "outer_weight, outer_bias, rank_down_weight, normed_rank_down_weight, "
        "rank_up_weight, hidden_vector (docs/roles.md)",
    )
    p.add_argument("--base-width", type=_positive_int, required=True, metavar="N")
    p.add_argument("--base-depth", type=_positive_int, required=True, metavar="L")
    base = p.add_mutually_exclusive_group()
    base.add_argument(
        "--base-steps",
        type=_positive_number,
        metavar="S",
        help="the horizon the base values were tuned at, in optimizer steps",
    )
    base.add_argument(
        "--base-tokens",
        type=_positive_number,
        metavar="D",
        help="the horizon the base values were tuned at, in training tokens (steps × batch)",
    )
    p.add_argument(
        "--base-batch",
        type=_positive_number,
        metavar="B",
        help="the batch size the base values were tuned at (sequences or tokens, as --batch)",
    )


def _positive_number(text: str) -> float:
    """A run's steps, tokens or batch: a number of at least 1 (``4000``, ``2.5e9``)."""
    from ..scaling import MAX_RUN

    shown = text.strip()[:20]
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {shown!r}") from None
    if not (1 <= value <= MAX_RUN):  # also refuses nan and inf
        raise argparse.ArgumentTypeError(f"expected a number from 1 to 2**80, got {shown!r}")
    return value


RUN_OPTIONS = ("steps", "tokens", "batch", "base_steps", "base_tokens", "base_batch")
"""The options naming a run's horizon and batch, by their ``hparams`` keyword."""


def _run(args: argparse.Namespace) -> dict[str, float]:
    return {k: getattr(args, k) for k in RUN_OPTIONS if getattr(args, k, None) is not None}


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    if value > MAX_SIZE:  # width / base_width must stay a float that holds it
        shown = (
            text.strip() if len(text.strip()) <= 20 else f"an integer of {len(text.strip())} digits"
        )
        raise argparse.ArgumentTypeError(
            f"expected a positive integer of at most 2**53, got {shown}"
        )
    return value


def _plan(args: argparse.Namespace) -> Any:
    from ..errors import SpecError
    from ..transfer import plan

    extra = {}
    for path in args.spec:
        from ..engine.spec_file import load_spec

        spec = load_spec(path)
        if spec.name in extra:
            raise SpecError(f"two --spec files declare {spec.name!r}")
        extra[spec.name] = spec
    hidden = args.optimizer
    if hidden is None:
        if len(extra) != 1:
            raise SpecError("name HIDDEN_OPT (or give exactly one --spec file to use it)")
        hidden = next(iter(extra))
    return plan(hidden, args.others, args.k, catalog=extra or None, all_roles=args.all_roles)


def _command_line(args: argparse.Namespace, p: Any) -> str:
    parts = ["spectral codegen", p.hidden]
    if p.others:
        parts += ["--others", p.others]
    parts += [f"--spec {s}" for s in args.spec]
    parts += [f"--k {args.k}", f"--base-width {args.base_width}", f"--base-depth {args.base_depth}"]
    parts += ["--all-roles"] if p.all_roles else []
    parts += [f"--{k.replace('_', '-')} {v:g}" for k, v in _base_run(args).items()]
    return " ".join(parts)


def _base_run(args: argparse.Namespace) -> dict[str, float]:
    keys = ("base_steps", "base_tokens", "base_batch")
    return {k: getattr(args, k) for k in keys if getattr(args, k, None) is not None}


# --------------------------------------------------------------------------------------
# spectral codegen
# --------------------------------------------------------------------------------------


def configure_codegen(p: argparse.ArgumentParser) -> None:
    _add_common(p)
    p.add_argument(
        "-o", "--output", metavar="FILE", help="write the module to FILE (default: stdout)"
    )
    p.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    p.add_argument(
        "--framework",
        # spectral.codegen.FRAMEWORKS (not imported: light)
        choices=("torch", "jax", "torchtitan", "megatron"),
        default="torch",
        help="torch (default): the PyTorch module; jax: the same rules as a JAX module "
        "(jax + optax: labels(), init(), optimizer() over optax.multi_transform); "
        "torchtitan: torchtitan's optimizer param_groups and per-module init, hook-free "
        "(docs/torchtitan.md); megatron: Megatron-core's config_overrides and "
        "TransformerConfig init, hook-free (docs/megatron.md)",
    )
    p.add_argument(
        "--vendor",
        action="store_true",
        help="write one standalone file: the runtime's sources copied in, so the module "
        "imports neither spectral nor sympy (the same code as the importing form)",
    )
    p.add_argument(
        "--absorb-multipliers",
        action="store_true",
        help="the hook-free form: every block multiplier 1, absorbed into the init, lr, "
        "weight decay and eps of the modules it scaled (verified like any rule set; "
        "no apply_multipliers, no model change). --framework torchtitan and megatron always "
        "use it",
    )


def run_codegen(args: argparse.Namespace) -> int:
    import sys

    from .common import EXIT_OK, emit, wrote
    from ..codegen import check_options, render

    # a form the target cannot write is refused before anything is derived or written
    check_options(args.framework, vendor=args.vendor, absorb=args.absorb_multipliers)
    p = _plan(args)
    source = render(
        p,
        base_width=args.base_width,
        base_depth=args.base_depth,
        command=_command_line(args, p)
        + ("" if args.framework == "torch" else f" --framework {args.framework}")
        + (" --vendor" if args.vendor else "")
        + (" --absorb-multipliers" if args.absorb_multipliers else ""),
        framework=args.framework,
        vendor=True if args.vendor else None,  # None: codegen.context.VENDOR_DEFAULT
        absorb=args.absorb_multipliers,
        base_run=_base_run(args),
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
        wrote(args.output, f" ({p.label}, k = {args.k})", stderr=True)
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
        "--init-std",
        type=parse_base_value,
        required=True,
        metavar="SIGMA",
        help="base init std σ (biases and norm gains: 0 unless their role is named)",
    )
    p.add_argument(
        "--weight-decay",
        type=parse_base_value,
        default=0.0,
        metavar="WD",
        help="base weight decay(s) (default 0; biases and norm gains: 0 unless named)",
    )
    p.add_argument(
        "--eps",
        type=parse_base_value,
        default=None,
        metavar="EPS",
        help="base ε (default: each implementation's, AdamW 1e-8, Shampoo 1e-6)",
    )
    p.add_argument(
        "--multiplier",
        type=parse_base_value,
        default=1.0,
        metavar="ALPHA",
        help="base multiplier(s); keys may also be layers: input, hidden, output",
    )
    p.add_argument(
        "--d-in",
        type=_positive_int,
        default=None,
        metavar="N",
        help="fan-in of a dense input layer: its init std is σ/sqrt(N) (default: an "
        "embedding, drawn with σ)",
    )
    run = p.add_mutually_exclusive_group()
    run.add_argument(
        "--steps",
        type=_positive_number,
        metavar="S",
        help="the target run's horizon in optimizer steps (needs --base-steps, or "
        "--base-tokens and --base-batch): lr, weight decay and ε move by the rules along "
        "the horizon (spectral derive OPT --horizon)",
    )
    run.add_argument(
        "--tokens",
        type=_positive_number,
        metavar="D",
        help="the target run's horizon in training tokens (needs --base-tokens, or "
        "--base-steps and --base-batch)",
    )
    p.add_argument(
        "--batch",
        type=_positive_number,
        metavar="B",
        help="the target run's batch size (needs --base-batch); without --steps/--tokens "
        "the token horizon is held",
    )
    p.add_argument("--format", choices=("table", "json"), default="table", help="output format")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    p.add_argument("--force", action="store_true", help="overwrite FILE if it exists")


BASE_OPTIONS = ("lr", "init_std", "weight_decay", "eps", "multiplier")
"""The base values ``spectral transfer`` takes, by their ``hparams`` keyword."""


def _check_eps(eps: Any, p: Any) -> None:
    """An optimizer with an ε rule but no known default (a --spec file's) needs --eps."""
    from ..errors import SpecError
    from ..transfer import DEFAULT_EPS

    if eps is not None and not isinstance(eps, dict):
        return
    given = eps or {}
    for opt in dict.fromkeys(p.optimizers.values()):
        if not p.has_eps(opt) or opt in DEFAULT_EPS or opt in given or "default" in given:
            continue
        roles = [r for r, o in p.optimizers.items() if o == opt]
        if not all(r in given for r in roles):
            raise SpecError(
                f"--eps: {opt} has an ε rule and no default ε is known for it; give its "
                f"base value, e.g. --eps {opt}=1e-8"
            )


def run_transfer(args: argparse.Namespace) -> int:
    import json

    from .common import EXIT_OK, emit
    from ..errors import SpecError
    from ..transfer import hparams

    p = _plan(args)
    base = {what: getattr(args, what) for what in BASE_OPTIONS}
    for what, value in base.items():
        check_base_value(value, p, what)
    _check_eps(args.eps, p)
    try:
        hp = hparams(
            p,
            args.base_width,
            args.base_depth,
            args.width,
            args.depth,
            d_in=args.d_in,
            **base,
            **_run(args),
        )
    except ValueError as exc:  # a role without an lr, an ε without a default, overflow
        raise SpecError(str(exc)) from None
    if args.format == "json":
        emit(json.dumps(hp, indent=2) + "\n", args)
        return EXIT_OK
    emit(transfer_table(p, hp, args), args)
    return EXIT_OK


def transfer_table(p: Any, hp: dict[str, dict[str, float]], args: argparse.Namespace) -> str:
    """Plain aligned text: one row per role, one column per HP (``—`` where none)."""
    from ..transfer import HP_OUT

    from ..scaling import run_ratios
    from ..transfer import momentum_factors

    r_n = args.width / args.base_width
    r_L = args.depth / args.base_depth
    run = _run(args)
    rows = [["role", "optimizer", *HP_OUT]]
    # Without --d-in the input_weight std is an embedding's; a dense input layer's is
    # σ/sqrt(d_in), which init_ applies but this command cannot know (footnote DENSE_INPUT).
    footnote = (
        getattr(args, "d_in", None) is None
        and hp.get("input_weight", {}).get("init_std", 0.0) != 0.0
    )
    for role, values in hp.items():
        cells = [f"{values[h]:.6g}" if h in values else "—" for h in HP_OUT]
        if footnote and role == "input_weight":
            cells[HP_OUT.index("init_std")] += "*"
        rows.append([role, p.optimizers[role], *cells])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        f"{p.label}, k = {args.k}: ({args.base_width}, {args.base_depth}) → "
        f"({args.width}, {args.depth}), r_n = {r_n:g}, r_L = {r_L:g}",
        "",
    ]
    if any(k in run for k in ("steps", "tokens", "batch")):
        r_d, r_b = run_ratios(run)
        lines[0] += f"; r_D = {r_d:g} (tokens), r_B = {r_b:g} (batch)"
        moved = {}
        for role, f in momentum_factors(p, **run).items():
            if f != 1.0:
                moved.setdefault(p.optimizers[role], f)
        notes = [f"{o}: 1 - β of every momentum × {f:.6g}" for o, f in moved.items()]
        import textwrap

        text = (
            "along the horizon and the batch (spectral derive OPT --horizon): lr by its laws, "
            "weight decay keeping lr·wd·tokens/batch the base's; "
            + ("; ".join(notes) if notes else "ε and momenta held")
        )
        tail = ["", *textwrap.wrap(text, 88)]
    for i, r in enumerate(rows):
        left = [c.ljust(w) for c, w in zip(r[:2], widths[:2], strict=True)]
        right = [c.rjust(w) for c, w in zip(r[2:], widths[2:], strict=True)]
        lines.append("  ".join(left + right).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    if any(k in run for k in ("steps", "tokens", "batch")):
        lines += tail
    if footnote:
        lines += ["", DENSE_INPUT]
    if p.uncovered:
        lines += ["", f"no optimizer trains {', '.join(p.uncovered)} (add --others adamw)"]
    return "\n".join(lines) + "\n"


DENSE_INPUT = (
    "* input_weight: an embedding is drawn with this std, a dense input layer with\n"
    "  std/sqrt(d_in); pass --d-in N to print that number"
)
"""Footnote of the input_weight init_std when --d-in is not given."""
