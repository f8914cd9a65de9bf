"""``spectral sweep``: the command line of :mod:`spectral.sweep`, registered in :mod:`spectral.cli`.

Parses the arguments into :class:`~spectral.sweep.options.SweepConfig` objects (defaults
from a preset), checks ``--out`` before any work, runs the stages of each optimizer (the
base tuning, then the transfer sweep), writes the reports, and prints what happened: the
only part of the sweep that prints. Also ``python -m spectral.sweep``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..sweep import data
from .. import sweep as sweep_package
from ..base_values import parse_base_value
from ..errors import SpecError
from ..io import check_output_folder
from ..sweep import report as sweep_report
from ..sweep import ablate_report as sweep_ablate
from ..sweep import compare_arms as sweep_compare
from ..sweep import fit_exponent as sweep_fit
from ..sweep import train as sweep_train
from ..sweep.estimate import estimate
from ..sweep.power import power_rows, render_power
from ..sweep.options import (
    OPTIMIZERS,
    PARAMETERIZATIONS,
    PRESETS,
    SweepConfig,
    check_base_values,
    resolve_device,
)
from ..sweep.records import RUNS_FILE, check_appendable, read_runs
from ..sweep.retune import has_retune_runs, retune_configs, retuned_rows
from ..sweep.exponent import FitKey, fit_configs, parse_fit_key, with_factor
from ..sweep.ablate import Ablation, check_variant, parse_variant
from ..sweep.along_run import along_configs, run_along
from ..sweep.checks import check_plan, check_roles
from ..sweep.tune import apply, base_configs, candidates, label, parse_tune
from ..text import for_terminal
from . import options, sweep_along
from .common import wrote
from .step_bar import StepBar

__all__ = ["configs_from_args", "configure_sweep", "main", "run_sweep"]


_SIZES = options.integers(1, 65536, at_most=32)
_COUNTS = options.integers(1, 4096, at_most=32)


def configure_sweep(p: argparse.ArgumentParser) -> None:
    """The ``sweep`` arguments; defaults come from the cpu/gpu preset unless given."""
    p.add_argument("--optimizer", "-O", action="append", choices=OPTIMIZERS,
                   help="optimizer or hybrid; repeat for several (default: adamw)")
    p.add_argument("--param", action="append", choices=PARAMETERIZATIONS, dest="params",
                   help="parameterisation; repeat for several (default: all three)")
    p.add_argument("--widths", type=_SIZES, help="widths of the width sweep (multiples of --head-dim)")
    p.add_argument("--depth", type=options.integer(1, 4096), help="depth of the width sweep")
    p.add_argument("--depths", type=_COUNTS, help="depths of the depth sweep")
    p.add_argument("--width", type=options.integer(1, 65536), help="width of the depth sweep")
    p.add_argument("--base-width", type=options.integer(1, 65536), help="n_base of the ratio rules")
    p.add_argument("--base-depth", type=options.integer(1, 4096), help="L_base of the ratio rules")
    p.add_argument("--log2-lrs", type=options.integers(-64, 16, at_most=32),
                   help="base learning rates as powers of two, e.g. -10,-9,-8")
    p.add_argument("--steps", type=options.integers(1, 10_000_000, at_most=32), help=sweep_along.STEPS_HELP)
    sweep_along.configure_along(p)
    p.add_argument("--warmup", type=options.integer(0, 10_000_000), help="warm-up steps (default: 10%% of --steps)")
    p.add_argument("--min-lr-ratio", type=options.floats(0.0, 1.0), default=0.1,
                   help="cosine floor as a fraction of the peak")
    p.add_argument("--batch-size", type=options.integer(1, 65536))
    p.add_argument("--block-size", type=options.integer(1, 65536), help="context length")
    p.add_argument("--head-dim", type=options.integer(1, 65536), help="attention head dimension (fixed across widths)")
    p.add_argument("--eval-batches", type=options.integer(1, 100_000))
    p.add_argument("--experts", type=options.integer(0, 1024), default=0,
                   help="a Mixtral-style mixture of this many experts in every block (0: dense MLPs); "
                        "its router is the router_weight role, e.g. --fit-exponent lr.router_weight")
    p.add_argument("--top-k", type=options.integer(1, 1024), default=2, help="experts per token (with --experts)")
    p.add_argument("--model", choices=("gpt", "llama"), default="gpt",
                   help="the reference model: gpt (nanoGPT's layout, every matrix drawn with --init-std) or "
                        "llama (torchtitan's Llama3 layout, names and default init, kept as the base: "
                        "--init-std is its hidden std, the output projections' shrinks with depth)")
    p.add_argument("--init-std", type=options.floats(0.0, 1e6, lo_open=True), default=0.02)
    p.add_argument("--weight-decay", type=options.floats(0.0, 1e6), default=0.0,
                   help="base weight decay λ (scaled by each role's rule; default 0)")
    p.add_argument("--eps", type=options.floats(0.0, 1.0), default=1e-16, help="base AdamW ε (the paper: 1e-16)")
    p.add_argument("--multiplier", type=parse_base_value, default=1.0, metavar="ALPHA",
                   help="base block multiplier(s) at the base size, for every parameterisation: "
                        "a number or KEY=VALUE pairs, KEY a layer (input, hidden, output), a role, "
                        "an optimizer or default; e.g. output=0.5 (microsoft/mup's output_mult)")
    p.add_argument("--lr-scale", type=parse_base_value, metavar="ROLE=F,…",
                   help="factors on the grid's base η for some roles or optimizers, e.g. "
                        "input_weight=0.25 (the embedding's base η is a quarter of the grid's)")
    p.add_argument("--init-scale", type=parse_base_value, metavar="ROLE=F,…",
                   help="factors on the base init std (--init-std) for some roles or optimizers, e.g. "
                        "hidden_weight=2 (the hidden matrices start at twice the std the rule gives)")
    p.add_argument("--seed", type=options.integer(0, 2**63 - 1), help="init and batch seed (default 0)")
    p.add_argument("--seeds", type=options.integers(0, 2**63 - 1, at_most=64), metavar="S1,S2,…",
                   help="several seeds: every run once per seed; reports use the seed-mean loss")
    p.add_argument("--tune", action="append", type=parse_tune, default=[], metavar="KEY=V1,V2,…",
                   help="tune these base multiplier values × the log2 η grid at the base size only, then "
                        "run the transfer sweep with the winner (seed-mean loss); KEY as in --multiplier, "
                        "e.g. output=1,4,16,64, or lr.ROLE for a factor on that role's base η as in --lr-scale "
                        "(lr.input_weight=0.25,1,4), or init.ROLE for a factor on its base init std as in --init-scale; repeat for several keys (all combinations); "
                        "'none': no tuning, also where the preset tunes")
    p.add_argument("--base-optimum", choices=("fit", "argmin"), default="fit",
                   help="--tune's winner: fit (default: the grid point nearest the per-knob parabola's vertex "
                        "over the seed-mean losses, so near-ties do not decide) or argmin (the grid's lowest)")
    p.add_argument("--sp-retune", action=argparse.BooleanOptionalAction, default=None,
                   help="with --tune: SP gets, at every size, the search μP gets at the base (every --tune "
                        "value × every log2 η), and the report sets SP re-tuned beside SP at the base values "
                        "and μP (default: on; off in the gpu-8min preset, whose 8 minutes it would exceed)")
    p.add_argument("--fit-exponent", action="append", type=parse_fit_key, default=[], metavar="KEY",
                   help="measure the exponent the loss wants for one role instead of the transfer sweep: "
                        "lr.ROLE, init.ROLE or multiplier.KEY; μP at the base-optimal η (over --log2-lrs, "
                        "after --tune) with that value × 2^e for e in --log2-factors at every size, "
                        "the best e per size and seed fitted against log2 size (95%% interval); "
                        "repeat for several keys")
    p.add_argument("--log2-factors", type=options.integers(-16, 16, at_most=33),
                   metavar="E1,E2,…", help="--fit-exponent's grid of factors 2^e, consecutive integers "
                                            "around 0 (default -2,-1,0,1,2)")
    p.add_argument("--ablate", action="store_true",
                   help="instead of the transfer sweep: at the largest of --widths (the base depth), μP at the "
                        "base-optimal η (after --tune) with one role-rule at a time swapped to SP's (hidden, "
                        "readout and embedding init, output multiplier, embedding, norm-gain, hidden and output η, "
                        "weight-decay scaling, ε), and μP and SP themselves, every seed; writes ablation.md")
    p.add_argument("--ablate-variant", action="append", type=parse_variant, default=[], metavar="KIND.ROLE=EXP",
                   help="with --ablate: also a named variant, the role's width exponent set to EXP, e.g. "
                        "lr.input_weight=-0.5 (KIND: lr, init (the std's exponent), multiplier, wd, eps); repeatable")
    p.add_argument("--variants-only", action="store_true",
                   help="with --ablate and --ablate-variant: train μP and the named variants only (no swap to "
                        "SP's rules, no SP run); comparison.md pairs each variant with μP")
    p.add_argument("--estimate", action="store_true",
                   help="train nothing: time a few steps at each size on --device and print the plan "
                        "(runs × steps) with its estimated wall time")
    p.add_argument("--data", default="stdlib",
                   help="'stdlib' (default: the standard library's .py sources), a text file, "
                        "or a folder of nanoGPT uint16 .bin token shards (with --vocab-size)")
    p.add_argument("--n-bytes", type=options.integer(1024, 2**40),
                   help="bytes of text to use (stdlib corpus / text file)")
    p.add_argument("--val-fraction", type=options.floats(0.0, 1.0, lo_open=True, hi_open=True), default=0.1)
    p.add_argument("--vocab-size", type=options.integer(2, 2**24), help="token vocabulary of --data DIR shards")
    p.add_argument("--device", type=options.device, default="auto",
                   help="cpu, cuda, cuda:1, … (default: cuda if present)")
    p.add_argument("--preset", choices=sorted(PRESETS),
                   help="defaults for everything not given: cpu (minutes on 2 cores), gpu (the paper's "
                        "base 256 × 4, 1000 steps), gpu-8min (Muon-Kimi+AdamW, SP against μP with σ_hidden "
                        "tuned at the base, widths 128-1024, in under 8 minutes on one H100/H200), "
                        "gpu-exponent (gpu-8min's model: the hidden and output η exponents fitted over "
                        "widths 128-1024, two seeds, about 6.3 minutes of training on one H200); "
                        "default: gpu on a CUDA device, else cpu")
    p.add_argument("--threads", type=options.integer(1, 1024), help="torch.set_num_threads (CPU)")
    p.add_argument("--jobs", "-j", type=options.integer(1, 1024), default=1, metavar="N",
                   help="train N runs at once, each in a worker process (CPU: with cores/N threads "
                        "unless --threads; CUDA: sharing the device); records as with 1 but the time "
                        "(default: 1, in this process)")
    # required: a bare `spectral sweep` must not start a 126-run sweep in a folder of its choosing
    p.add_argument("--out", "-o", required=True, metavar="DIR",
                   help="results folder, created if missing (one subfolder per optimizer)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (log lines only)")
    p.add_argument("--report-only", action="store_true", help="render tables and plots from runs.jsonl; train nothing")


def configs_from_args(args: argparse.Namespace) -> list[SweepConfig]:
    device = args.device
    if device == "auto":
        device = resolve_device("auto")
    preset = _preset(args)

    def pick(name: str, attr: str | None = None):
        v = getattr(args, attr or name, None)
        return preset[name] if v is None else v

    base = SweepConfig(
        parameterizations=tuple(args.params or preset.get("params", PARAMETERIZATIONS)),
        widths=tuple(pick("widths")),
        depth=pick("depth"),
        depths=tuple(pick("depths")),
        width=pick("width"),
        base_width=pick("base_width"),
        base_depth=pick("base_depth"),
        steps=sweep_along.base_steps(args, preset),
        warmup=args.warmup,
        min_lr_ratio=args.min_lr_ratio,
        batch_size=pick("batch_size"),
        block_size=pick("block_size"),
        head_dim=pick("head_dim"),
        eval_batches=pick("eval_batches"),
        init_std=args.init_std,
        weight_decay=args.weight_decay,
        eps=args.eps,
        model=args.model,
        experts=args.experts,
        top_k=args.top_k,
        multiplier=args.multiplier,
        lr_scale=args.lr_scale,
        init_scale=args.init_scale,
        seed=_seeds(args)[0],
        device=device,
        threads=args.threads,
    )
    if base.model == "llama" and base.experts:
        raise SpecError("--experts is the GPT's mixture of experts: not with --model llama")
    if base.experts and base.top_k > base.experts:
        raise SpecError(f"--top-k {base.top_k} exceeds --experts {base.experts}")
    for n in base.widths + (base.width,):
        if n % base.head_dim:
            raise SpecError(f"width {n} is not a multiple of --head-dim {base.head_dim}")
    out = []
    tune = _tune(args)
    for o in args.optimizer or preset.get("optimizers", ["adamw"]):
        cfg = replace(base, optimizer=o, log2_lrs=tuple(preset["log2_lrs"][o] if args.log2_lrs is None else args.log2_lrs))
        check_base_values(cfg)
        # the roles --fit-exponent and --tune name, before the values they lead to: a key that
        # names nothing is blamed on the option the user typed, not on --init-scale
        check_roles(cfg, _fit_keys(args), (), tune)
        for c in candidates(base.multiplier, tune) if tune else []:
            _blamed_on("--tune", check_base_values, apply(cfg, c))
        for key in _fit_keys(args):
            _blamed_on(f"--fit-exponent {key.text}", check_base_values, with_factor(cfg, key, 2.0))
        out.append(cfg)
    return out


def _blamed_on(option: str, check: Callable[[Any], None], cfg: Any) -> None:
    """``check(cfg)`` for a config that ``option`` derived from the user's: its refusal
    names ``option``, not the internal option (``--lr-scale``, ``--init-scale``,
    ``--multiplier``) that carries the value (the user's own were checked before)."""
    try:
        check(cfg)
    except SpecError as exc:
        text = str(exc)
        for internal in ("--lr-scale", "--init-scale", "--multiplier"):
            if text.startswith(internal + ":"):
                raise SpecError(option + text[len(internal):]) from None
        raise


def _preset(args: argparse.Namespace) -> dict[str, Any]:
    """``--preset``, or ``gpu`` on a CUDA device and ``cpu`` otherwise."""
    device = resolve_device(args.device)
    return PRESETS[args.preset or ("gpu" if device.startswith("cuda") else "cpu")]


def _tune(args: argparse.Namespace) -> list[tuple[str, tuple[float, ...]]]:
    """``--tune``, or the preset's base tuning (``--tune none`` turns it off)."""
    if any(k == "none" for k, _ in args.tune):
        return []
    return list(args.tune) or list(_preset(args).get("tune", ()))


def _sp_retune(args: argparse.Namespace) -> bool:
    """``--sp-retune`` / ``--no-sp-retune``, or the preset's (on unless it says otherwise)."""
    return bool(args.sp_retune) if args.sp_retune is not None else bool(_preset(args).get("sp_retune", True))


def _seeds(args: argparse.Namespace) -> tuple[int, ...]:
    """``--seeds``, or ``--seed`` (default 0); not both."""
    if args.seeds is not None and args.seed is not None:
        raise SpecError("give --seed or --seeds, not both")
    if args.seeds is not None:
        if len(set(args.seeds)) != len(args.seeds):
            raise SpecError(f"--seeds: a seed is given twice in {','.join(map(str, args.seeds))}")
        return tuple(args.seeds)
    if args.seed is None and "seeds" in _preset(args):
        return tuple(_preset(args)["seeds"])
    return (0 if args.seed is None else args.seed,)


def _out_dirs(args: argparse.Namespace, cfgs: list[SweepConfig]) -> list[Path]:
    """``--out`` and its per-optimizer folders, checked before any work and without writing.

    A path that is there but is not a folder is refused; ``--report-only`` renders what is
    on disk, so it needs each optimizer's ``runs.jsonl`` (else it would write empty reports).
    """
    root = Path(args.out)
    dirs = [root, *(root / cfg.optimizer for cfg in cfgs)]
    for d in dirs:
        if d.exists() and not d.is_dir():
            raise SpecError(f"--out: {str(d)!r} exists and is not a directory")
    if not args.report_only and not args.estimate:  # a folder that cannot be made: now, not after the data
        check_output_folder(root, option="--out")
    for d in dirs[1:]:  # an unwritable runs.jsonl is found now, not after the first run
        if not args.report_only and not args.estimate:
            check_appendable(d / RUNS_FILE)
    if args.report_only:
        for d in dirs[1:]:
            if not (d / RUNS_FILE).is_file():
                raise SpecError(
                    f"--report-only: no {str(d / RUNS_FILE)!r}; run the sweep first "
                    "(without --report-only)"
                )
    return dirs


def _make_dirs(dirs: list[Path]) -> None:
    """Create the output folders (with parents); a failure is one line, not a traceback."""
    for d in dirs:
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SpecError(f"--out: cannot create {str(d)!r} ({exc.strerror or exc})") from None


def run_sweep(args: argparse.Namespace, argv: Iterable[str] | None = None) -> int:
    """The ``sweep`` command; with ``--jobs N`` its runs train in N worker processes, shut
    down when it ends (terminated, with their unfinished runs, on Ctrl-C or an error)."""
    if args.jobs == 1 or args.report_only or args.estimate:
        return _run_sweep(args, argv, None)
    from ..sweep.parallel import Workers

    with Workers(args.jobs) as workers:
        return _run_sweep(args, argv, workers)


def _command_line(argv: Iterable[str] | None) -> str:
    """The command as the user typed it, for the records and reports."""
    import shlex
    import sys

    words = list(argv) if argv is not None else sys.argv[1:]
    if words[:1] == ["sweep"]:  # called as `spectral sweep ...`
        words = words[1:]
    return "spectral sweep " + shlex.join(words)


def _warner() -> Callable[[str], None]:
    """A warning printer that says each damaged line once, however often it is read."""
    import sys

    warned: set[str] = set()

    def warn(message: str) -> None:
        if message not in warned:
            warned.add(message)
            sys.stderr.write(f"warning: {for_terminal(message)}\n")
            sys.stderr.flush()

    return warn


def _run_sweep(args: argparse.Namespace, argv: Iterable[str] | None, workers: Any) -> int:
    if args.estimate and args.report_only:
        raise SpecError("--estimate and --report-only exclude each other")
    if not args.report_only:
        options.check_device(args.device)
    cfgs = configs_from_args(args)
    tune = _tune(args)
    command = _command_line(argv)
    n_bytes = args.n_bytes if args.n_bytes is not None else _preset(args)["n_bytes"]
    seeds = _seeds(args)
    fit_keys = _check_fit_args(args)
    _check_ablate_args(args, fit_keys)
    # the roles each option names and every value the rules give: before any folder, file or run
    alongs = sweep_along.alongs_from_args(args, cfgs, tune, fit_keys)
    check_plan(cfgs, tune, fit_keys, _log2_factors(args), list(args.ablate_variant) if args.ablate else None)
    dirs = _out_dirs(args, cfgs)
    out_root = dirs[0]
    corpus = None
    if not args.report_only:  # before any folder is made: a bad --data leaves nothing behind
        corpus = data.load_data(args.data, n_bytes=n_bytes, val_fraction=args.val_fraction, vocab_size=args.vocab_size)
    if args.estimate:
        return _print_estimates(cfgs, tune, seeds, out_root, corpus, command, fit_keys, _log2_factors(args),
                                _sp_retune(args), list(args.ablate_variant) if args.ablate else None,
                                jobs=args.jobs, swaps=not args.variants_only, alongs=alongs)
    _make_dirs(dirs)
    warn = _warner()
    for cfg in cfgs:
        out = out_root / cfg.optimizer

        def train(c: SweepConfig, out: Path = out) -> None:
            if corpus is not None:
                bar = None if args.no_progress else StepBar()
                sweep_train.run_sweep(c, out, corpus, progress=bar, command=command, log=_print, warn=warn,
                                      workers=workers)

        if alongs:
            for pth in run_along(cfg, alongs, seeds, out, train, warn=warn, command=command, rule=args.base_optimum):
                wrote(pth)
            continue
        if args.ablate:
            for pth in sweep_ablate.run_ablation(cfg, _variants(args, cfg, out), tune, seeds, out, train, warn=warn,
                                                 command=command, rule=args.base_optimum, swaps=not args.variants_only):
                wrote(pth)
            continue
        if fit_keys:
            for pth in sweep_fit.fit_exponents(cfg, fit_keys, _log2_factors(args), tune, seeds, out,
                                               train, warn=warn, command=command, rule=args.base_optimum):
                wrote(pth)
            continue
        choice, before, retuned = None, cfg, None
        if tune:
            cfg, choice = sweep_train.tune_at_base(cfg, tune, seeds, out, train, warn=warn, rule=args.base_optimum)
            _print_choice(cfg, choice)
        for s in seeds:  # stage 2 (the only stage without --tune): both axes
            train(replace(cfg, seed=s))
        if choice is not None and _sp_retune(args):  # stage 3: SP tuned as μP is, at every size
            for c in retune_configs(before, choice.candidates, choice.winner, seeds):
                train(c)
            records = read_runs(out / RUNS_FILE, warn=warn)
            if has_retune_runs(records, before, choice.candidates, choice.winner):
                retuned = retuned_rows(records, before, choice.candidates, choice.winner, seeds, choice.keys)
        paths = sweep_report.write_report(out, cfg, seeds=seeds, choice=choice, warn=warn, retuned=retuned)
        paths += sweep_compare.write_sweep_comparison(out, before, cfg, choice, seeds, warn=warn)
        for pth in paths:
            wrote(pth)
    if args.ablate or alongs:
        return 0
    if fit_keys:
        index = sweep_fit.write_exponent_index(out_root, OPTIMIZERS)
        if index is not None:
            wrote(index)
        return 0
    # the index covers every optimizer folder under --out that has a report
    known = [replace(cfgs[0], optimizer=o) for o in OPTIMIZERS if (out_root / o / "drift.json").is_file()]
    if known:
        wrote(sweep_report.write_index(out_root, known))
    return 0


def _fit_keys(args: argparse.Namespace) -> list[FitKey]:
    """``--fit-exponent``, or the preset's."""
    return list(args.fit_exponent) or [parse_fit_key(k) for k in _preset(args).get("fit_exponent", ())]


def _log2_factors(args: argparse.Namespace) -> tuple[int, ...]:
    """``--log2-factors``, or the preset's, or -2..2; sorted."""
    given = args.log2_factors or _preset(args).get("log2_factors", (-2, -1, 0, 1, 2))
    return tuple(sorted(given))


def _check_fit_args(args: argparse.Namespace) -> list[FitKey]:
    """``--fit-exponent``'s keys once each, and its grid: consecutive integers around 0 (a
    parabola needs a uniform grid). Returns the keys (none: the transfer sweep)."""
    keys = _fit_keys(args)
    if not keys:
        if args.log2_factors:
            raise SpecError("--log2-factors is --fit-exponent's grid; give --fit-exponent KEY too")
        return keys
    texts = [k.text for k in keys]
    if len(set(texts)) != len(texts):
        raise SpecError(f"--fit-exponent: {next(k for k in texts if texts.count(k) > 1)} is given twice")
    e = list(_log2_factors(args))
    if len(e) < 3 or e != list(range(e[0], e[0] + len(e))) or not e[0] < 0 < e[-1]:
        raise SpecError("--log2-factors: expected at least three consecutive integers around 0, "
                        f"e.g. -2,-1,0,1,2; got {','.join(map(str, e))}")
    if args.params:
        raise SpecError("--fit-exponent runs μP only (the rule under test); drop --param")
    return keys


def _check_ablate_args(args: argparse.Namespace, fit_keys: list[FitKey]) -> None:
    """``--ablate`` runs μP and SP itself, at one η per seed: no --param, --fit-exponent."""
    if args.ablate_variant and not args.ablate:
        raise SpecError("--ablate-variant is a row of --ablate's table; give --ablate too")
    if args.variants_only and not args.ablate_variant:
        raise SpecError("--variants-only trains μP and the --ablate-variant rows; give --ablate and --ablate-variant")
    if not args.ablate:
        return
    if fit_keys:
        raise SpecError("--ablate and --fit-exponent exclude each other")
    if args.params:
        raise SpecError("--ablate runs μP, each swap and SP itself; drop --param")


def _variants(args: argparse.Namespace, cfg: SweepConfig, out: Path) -> list[Ablation]:
    """``--ablate-variant``'s rows, each checked against ``cfg``'s derived rules."""
    if not args.ablate_variant:
        return []
    from ..sweep.recipe import derived_rules

    rules = derived_rules(cfg, out / "generated")
    for v in args.ablate_variant:
        check_variant(rules, v)
    return list(args.ablate_variant)


def _print(message: str) -> None:
    print(message, flush=True)


def _print_choice(cfg: SweepConfig, choice: Any) -> None:
    """The winner of the base tuning, and where it sits on an edge of what was tried."""
    best = choice.mean[choice.winner][choice.winner_col]
    print(f"{cfg.optimizer}: tuned at the base size {cfg.base_width} × {cfg.base_depth}: "
          f"{label(choice.chosen, choice.keys)} (seed-mean loss {best:.4f} at log2 η "
          f"{choice.winner_log2_lr}; {choice.rule}); transferring it", flush=True)
    if choice.moved:
        print(f"{cfg.optimizer}: the fitted optimum is not the grid's argmin ({choice.argmin_label()})", flush=True)
    for edge in choice.edges():
        print(f"warning: {cfg.optimizer}: {edge}", flush=True)


def _print_estimates(cfgs: list[SweepConfig], tune: list[tuple[str, tuple[float, ...]]], seeds: tuple[int, ...],
                     out_root: Path, corpus: Any, command: str, fit_keys: list[FitKey],
                     log2_factors: tuple[int, ...], sp_retune: bool = True,
                     ablate: list[Any] | None = None, jobs: int = 1, swaps: bool = True,
                     alongs: list[Any] | None = None) -> int:
    """``--estimate``: the plan of each optimizer (stage 1 and 2 as the sweep would run them;
    the first ``--tune`` candidate stands in for the winner, and with ``--ablate`` the grid's
    smallest η for the base optimum: a run's cost does not depend on its η) and its measured
    wall time."""
    total = 0.0
    for cfg in cfgs:
        cands = candidates(cfg.multiplier, tune) if tune else []
        stage1 = [sc for c in cands for sc in base_configs(cfg, c, seeds)]
        winner = cands[0] if cands else None
        stage2 = [replace(apply(cfg, winner) if cands else cfg, seed=s) for s in seeds]
        if cands and sp_retune:  # stage 3: SP with every other candidate at every size
            stage2 += retune_configs(cfg, cands, 0, seeds)
        if fit_keys:  # the grid's middle η stands in for the base optimum
            if not cands:
                stage1 = base_configs(cfg, {}, seeds)
            mid = sorted(cfg.log2_lrs)[len(cfg.log2_lrs) // 2]
            stage2 = [c for key in fit_keys
                      for _, _, c in fit_configs(apply(cfg, winner) if cands else cfg, key, log2_factors, seeds, mid)]
        if ablate is not None:  # the swaps at the target width, every seed (no-op swaps reuse μP's)
            stage1 = stage1 or base_configs(cfg, {}, seeds)
            stage2 = _ablation_plan(apply(cfg, winner) if cands else cfg, ablate, seeds, swaps=swaps)
        if alongs:  # every point's η grid and its rules arm (the grid's middle η stands in for the base's)
            stage1, stage2 = [], along_configs(cfg, alongs, seeds)
        pilot = out_root / cfg.optimizer / "exponents.json"
        if fit_keys and pilot.is_file():  # the power of each fit, from the pilot's seed noise
            _print_power(cfg, pilot, fit_keys, len(seeds))
        print(f"{cfg.optimizer}: timing each size on {resolve_device(cfg.device)} …", flush=True)
        est = estimate(stage1 + stage2, out_root / cfg.optimizer, corpus, log=lambda m: print("  " + m, flush=True),
                       jobs=jobs)
        total += est["seconds"]
        at_once = f" with --jobs {jobs}" if jobs > 1 else ""
        print(f"{cfg.optimizer}: {est['runs']} runs, {est['steps']} steps, estimated {_mmss(est['seconds'])} "
              f"on {est['device_name']}{at_once}", flush=True)
        print(json.dumps({"estimate": est, "command": command}, sort_keys=True), flush=True)
    if len(cfgs) > 1:
        print(f"all: estimated {_mmss(total)}")
    return 0


def _ablation_plan(cfg: SweepConfig, variants: list[Any], seeds: tuple[int, ...], *, swaps: bool = True) -> list[SweepConfig]:
    """``--ablate``'s runs at the target width for ``--estimate`` (the config modules go to a
    temporary folder: an estimate writes nothing)."""
    import tempfile

    from ..sweep.ablate import ablation_configs
    from ..sweep.ablate_report import ablations_for
    from ..sweep.recipe import derived_rules

    with tempfile.TemporaryDirectory(prefix="spectral-estimate-") as tmp:
        rules = derived_rules(cfg, tmp)  # once: deriving writes and loads a config module
        for v in variants:
            check_variant(rules, v)
        rows = ablations_for(cfg, variants, Path(tmp), swaps=swaps)
    return ablation_configs(cfg, rows, max(cfg.widths), min(cfg.log2_lrs), seeds, sp=swaps)


def _print_power(cfg: SweepConfig, pilot: Path, fit_keys: list[FitKey], n_seeds: int) -> None:
    """The expected half-width of this command's fits and the seeds each needs for ±0.25,
    from the seed-pair scatter of the fits already in ``pilot`` (a damaged one: a warning)."""
    try:
        fits = json.loads(pilot.read_text(encoding="utf-8"))["fits"]
        wanted = {k.text for k in fit_keys}
        fits = [f for f in fits if f["key"] in wanted]
        planned = {"width": ([n for n, _ in cfg.sizes("width")], n_seeds),
                   "depth": ([L for _, L in cfg.sizes("depth")], n_seeds)}
        rows = power_rows(fits, planned, {"width": [2 * max(cfg.widths), 4 * max(cfg.widths)],
                                          "depth": [2 * max(cfg.depths), 4 * max(cfg.depths)]})
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        print(f"warning: {pilot}: no power estimate ({type(exc).__name__})", flush=True)
        return
    print(render_power(cfg.optimizer, str(pilot), rows), flush=True)


def _mmss(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m} min {s:02d} s"


def main(argv: list[str] | None = None) -> int:
    """``python -m spectral.sweep``: the ``spectral sweep`` command on its own."""
    import sys

    p = argparse.ArgumentParser(prog="spectral sweep", description=sweep_package.__doc__.splitlines()[0])
    configure_sweep(p)
    argv = list(sys.argv[1:] if argv is None else argv)
    return run_sweep(p.parse_args(argv), argv)
