"""The arms of a transfer experiment, found in run records, and ``comparison.md`` rendered from them.

Three sources of arms (each a :class:`spectral.sweep.compare.Arm`):

* :func:`sweep_arms`: a transfer sweep with SP and μP (width axis; the target is the largest
  width): μP transferred (the base-optimal η and base values), SP transferred (the same, SP's
  rules), SP tuned at the target (its best over what it ran there: η, and with ``--sp-retune``
  every ``--tune`` candidate), μP re-tuned at the target (its best over η there);
* :func:`ablation_arms`: ``--ablate``'s μP and SP at μP's base-optimal η at the target (both
  transferred with the base tuning);
* :func:`spec_arms`: arms whose runs lie in several folders (coordinate steps each written by
  its own ``spectral sweep``), declared in a small JSON file (:func:`read_spec`) and rendered by
  ``python -m spectral.cli.compare_arms SPEC.json``.

:func:`render_comparison` fills ``templates/sweep_comparison.md.j2``. Pure but for
:func:`write_comparison` and :func:`main`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import SpecError
from ..io import write_atomic
from ..templating import environment
from .compare import Arm, Pair, arm, compare, config_label
from .records import META_FILE, RUNS_FILE, read_runs
from .report import read_meta
from .tune import apply, base_configs, freeze

__all__ = ["COMPARISON_FILE", "ablation_arms", "default_pairs", "read_spec", "render_comparison",
           "spec_arms", "sweep_arms", "variant_pairs", "write_ablation_comparison",
           "write_comparison", "write_sweep_comparison"]

COMPARISON_FILE = "comparison.md"

MUP_T, SP_T, SP_TUNED, MUP_RETUNED = ("μP transferred", "SP transferred (base values)", "SP tuned at the target",
                                      "μP re-tuned at the target (η)")


def _settings_of(cfg: Any, seeds: Sequence[int]) -> set[Any]:
    return {freeze(replace(cfg, seed=s).settings()) for s in seeds}


def _select(records: Iterable[dict[str, Any]], optimizer: str, settings: set[Any], *, width: int | None = None,
            depth: int | None = None, param: str | None = None, log2_lr: int | None = None) -> list[dict[str, Any]]:
    return [r for r in records
            if r.get("optimizer") == optimizer and freeze(r.get("settings")) in settings
            and (width is None or r.get("width") == width) and (depth is None or r.get("depth") == depth)
            and (param is None or r.get("parameterization") == param)
            and (log2_lr is None or r.get("log2_lr") == log2_lr)]


def _fields(r: dict[str, Any]) -> dict[str, Any]:
    s = r.get("settings") or {}
    out: dict[str, Any] = {"log2 η": r.get("log2_lr")}
    mult = s.get("multiplier", 1.0)
    for k, v in (mult.items() if isinstance(mult, dict) else [("default", mult)]):
        out[f"α {k}"] = v
    for k, v in (s.get("init_scale") or {}).items():
        out[f"σ {k}"] = v
    for k, v in (s.get("lr_scale") or {}).items():
        out[f"η {k}"] = v
    return out


def _with_edges(a: Arm, target: Sequence[dict[str, Any]], *, one_point: bool = False) -> Arm:
    """``a`` with, as bounds, each field of its best configuration on the edge of what it tried at
    the target (log2 η, each α / σ / η-factor key); with ``one_point``, also each field it tried
    at one value only (a one-point grid is an edge: that knob was not searched there)."""
    searched = {label for label, _ in a.search}  # configurations run with every seed
    target = [r for r in target if config_label(r) in searched]
    best = next(r for r in target if config_label(r) == a.label)
    fields = _fields(best)
    for r in target:  # a key absent from a record is its default 1
        for k in _fields(r):
            fields.setdefault(k, 1.0)
    norm = [{**{k: 1.0 for k in fields}, **_fields(r)} for r in target]
    tried: dict[str, set[Any]] = {}
    for f in norm:
        for k, v in f.items():
            tried.setdefault(k, set()).add(v)
    edges = []
    for k, values in sorted(tried.items()):
        mine = fields[k]
        if len(values) == 1 and one_point:
            edges.append(f"{k} not searched at the target (one value, {mine:g})")
        elif len(values) > 1 and mine in (min(values), max(values)):
            edges.append(f"{k} = {mine:g} is the {'smallest' if mine == min(values) else 'largest'} tried at the target")
    return replace(a, bounds=(*a.bounds, *edges))


def _base_lr(records: list[dict[str, Any]], seeds: Sequence[int]) -> int | None:
    """The log2 η of the lowest seed-mean loss among ``records`` (one configuration's η grid)."""
    by: dict[int, dict[int, float]] = {}
    for r in records:
        loss = math.inf if r.get("diverged") or r.get("val_loss") is None else float(r["val_loss"])
        by.setdefault(r["log2_lr"], {})[int(r["settings"]["seed"])] = loss
    means = [(sum(v[s] for s in seeds) / len(seeds), e) for e, v in by.items() if all(s in v for s in seeds)]
    return min(means)[1] if means else None


def sweep_arms(records: list[dict[str, Any]], before: Any, cfg: Any, choice: Any, seeds: Sequence[int]) -> list[Arm]:
    """The arms of a transfer sweep (width axis, target = the largest width at ``cfg.depth``).

    ``before``: the config before the base tuning's winner was applied; ``cfg``: after (the
    same without ``--tune``); ``choice``: the base tuning (``None`` without ``--tune``). An arm
    whose runs are incomplete is left out. Both parameterisations are needed for any pair.
    Without base runs in the folder, only the two target searches (SP tuned, μP re-tuned). μP's
    base η here is the base tuning's winner (the fitted one under ``--base-optimum fit``); the
    regret tables of ``summary.md`` read the base row's argmin, which may be one grid step away.
    """
    if not {"sp", "mup"} <= set(cfg.parameterizations) or max(cfg.widths) <= cfg.base_width:
        return []
    target, depth = max(cfg.widths), cfg.depth
    cands = list(choice.candidates) if choice is not None else []
    stage1: set[Any] = set()  # the base tuning's settings (every candidate, every seed)
    for c in cands:
        stage1 |= {freeze(sc.settings()) for sc in base_configs(before, c, seeds)}
    winner = _settings_of(cfg, seeds)
    if choice is None:  # the base row of the transfer sweep is the base tuning (η only)
        base_runs = _select(records, cfg.optimizer, winner, width=cfg.base_width, depth=depth)
        base_lr = _base_lr([r for r in base_runs if r.get("parameterization") == "mup"], seeds)
        base_edges = [] if base_lr is None else _lr_edges(cfg, base_lr)
    else:
        base_runs = _select(records, cfg.optimizer, stage1, width=before.base_width, depth=before.base_depth)
        base_lr = choice.winner_log2_lr
        base_edges = [f"base: {e}" for e in choice.edges()]
    out = []
    if base_lr is None:  # no base row here (a probe at the target only): the target searches alone
        note = ["the base tuning is not in this folder: μP's compute counts its target runs only"]
        for name, param, sel in ((SP_TUNED, "sp", winner), (MUP_RETUNED, "mup", winner)):
            tgt = _select(records, cfg.optimizer, sel, width=target, depth=depth, param=param)
            try:
                a = arm(name, [], tgt, seeds, note if param == "mup" else [])
            except ValueError:
                continue
            out.append(_with_edges(a, tgt, one_point=param == "sp"))
        return out
    candidates_settings = set().union(winner, *(_settings_of(apply(replace(before, parameterizations=("sp",)), c), seeds)
                                                for c in cands))
    specs = [
        (MUP_T, base_runs, _select(records, cfg.optimizer, winner, width=target, depth=depth, param="mup",
                                   log2_lr=base_lr), base_edges),
        (SP_T, base_runs, _select(records, cfg.optimizer, winner, width=target, depth=depth, param="sp",
                                  log2_lr=base_lr), base_edges),
        (SP_TUNED, [], _select(records, cfg.optimizer, candidates_settings, width=target, depth=depth,
                               param="sp"), []),
        (MUP_RETUNED, base_runs, _select(records, cfg.optimizer, winner, width=target, depth=depth, param="mup"),
         base_edges),
    ]
    for name, spent, tgt, extra in specs:
        try:
            a = arm(name, spent, tgt, seeds, extra)
        except ValueError:
            continue
        out.append(_with_edges(a, tgt, one_point=name == SP_TUNED) if name in (SP_TUNED, MUP_RETUNED) else a)
    return out


def _lr_edges(cfg: Any, log2_lr: int) -> list[str]:
    lrs = sorted(cfg.log2_lrs)
    if len(lrs) == 1:
        return [f"base: log2 η at one value ({log2_lr}): not searched"]
    if log2_lr in (lrs[0], lrs[-1]):
        return [f"base: log2 η = {log2_lr} is at the edge of the grid"]
    return []


def ablation_arms(records: list[dict[str, Any]], before: Any, cfg: Any, choice: Any, seeds: Sequence[int],
                  target: int, log2_lr: int, variants: Sequence[Any] = ()) -> list[Arm]:
    """``--ablate``'s μP and SP (every rule SP's) at the target at μP's base-optimal η, each
    with the base tuning's runs as its cost; then each named variant in ``variants`` (an
    :class:`~spectral.sweep.ablate.Ablation`: μP with that exponent, the same base and cost)."""
    one = replace(cfg, widths=(target,), depth=cfg.base_depth, depths=(cfg.base_depth,), width=target)
    stage1: set[Any] = set()
    for c in choice.candidates:
        stage1 |= {freeze(sc.settings()) for sc in base_configs(before, c, seeds)}
    base_runs = _select(records, cfg.optimizer, stage1, width=before.base_width, depth=before.base_depth)
    edges = [f"base: {e}" for e in choice.edges()]
    out = []
    for name, param in ((MUP_T, "mup"), (SP_T, "sp")):
        tgt = _select(records, cfg.optimizer, _settings_of(one, seeds), width=target, depth=cfg.base_depth,
                      param=param, log2_lr=log2_lr)
        try:
            out.append(arm(name, base_runs, tgt, seeds, edges))
        except ValueError:
            continue
    for v in variants:
        sel = _settings_of(replace(one, ablation=v.overrides, ablation_name=v.name), seeds)
        tgt = _select(records, cfg.optimizer, sel, width=target, depth=cfg.base_depth, param="mup", log2_lr=log2_lr)
        try:
            out.append(arm(f"variant {v.name}", base_runs, tgt, seeds, edges))
        except ValueError:
            continue
    return out


def variant_pairs(arms: Sequence[Arm]) -> list[Pair]:
    """Each named variant (an arm named ``variant …``) against μP transferred (the derived rules)."""
    by = {a.name: a for a in arms}
    if MUP_T not in by:
        return []
    return [compare(a, by[MUP_T]) for a in arms if a.name.startswith("variant ")]


def default_pairs(arms: Sequence[Arm]) -> list[Pair]:
    """μP transferred against SP tuned and SP transferred, and μP re-tuned against SP tuned
    (those present)."""
    by = {a.name: a for a in arms}
    out = []
    for x, y in ((MUP_T, SP_TUNED), (MUP_T, SP_T), (MUP_RETUNED, SP_TUNED)):
        if x in by and y in by:
            out.append(compare(by[x], by[y]))
    return out


def _num(v: float | None, signed: bool = False) -> str:
    if v is None:
        return "–"
    if math.isinf(v):
        return "div"
    return f"{v:+.3f}" if signed else f"{v:.3f}"


def _pt(x: float) -> str:
    """Parameters × tokens in scientific notation, 3 digits (``1.23e12``)."""
    return f"{x:.3g}"


def _secs(c: Any) -> str:
    if c.seconds is None:
        return "–"
    return f"{c.seconds:,.0f} s ({', '.join(c.devices)})"


def _verdict(p: Pair) -> str:
    iv = p.interval
    if iv is None:
        return "no interval (one seed, or a diverged seed)"
    if not p.excludes_zero:
        return "interval includes 0: no difference shown"
    return f"{p.a.name} {'lower' if p.mean < 0 else 'higher'}, interval excludes 0"


def render_comparison(title: str, arms: Sequence[Arm], pairs: Sequence[Pair], *, command: str | None = None,
                      notes: Sequence[str] = ()) -> str:
    """``comparison.md`` (``templates/sweep_comparison.md.j2``)."""
    rows = [{"name": a.name, "label": a.label, "size": a.size,
             "per_seed": " / ".join(_num(v) for _, v in a.per_seed), "mean": _num(a.mean),
             "configs": len(a.search), "runs": a.cost.runs, "pt": _pt(a.cost.param_tokens), "seconds": _secs(a.cost),
             "bounds": "; ".join(a.bounds) or "none"} for a in arms]
    prs = []
    for p in pairs:
        iv = p.interval
        prs.append({
            "a": p.a.name, "b": p.b.name, "seeds": ", ".join(str(s) for s, _ in p.diffs),
            "diffs": " / ".join(_num(d, True) for _, d in p.diffs), "mean": _num(p.mean, True),
            "interval": "–" if iv is None else f"[{_num(iv[0], True)}, {_num(iv[1], True)}]",
            "df": len(p.diffs) - 1, "verdict": _verdict(p),
            "ratio": "–" if math.isinf(p.ratio) else f"{p.ratio:.2f}", "k": p.k, "n_b": len(p.b.search),
            "matched": _num(p.matched), "matched_gap": _num(p.matched_gap, True),
        })
    return environment("text").get_template("sweep_comparison.md.j2").render(
        title=title, arms=rows, pairs=prs, command=command, notes=list(notes))


def write_comparison(out: Path, title: str, arms: Sequence[Arm], *, command: str | None = None,
                     pairs: Sequence[Pair] | None = None, notes: Sequence[str] = ()) -> list[Path]:
    """``out/comparison.md`` when at least one pair of ``arms`` is comparable (else nothing)."""
    pairs = default_pairs(arms) if pairs is None else pairs
    if not pairs:
        return []
    text = render_comparison(title, arms, pairs, command=command, notes=notes)
    return [write_atomic(Path(out) / COMPARISON_FILE, text, force=True)]


def write_sweep_comparison(out: Path, before: Any, cfg: Any, choice: Any, seeds: Sequence[int], *,
                           warn: Callable[[str], None] | None = None) -> list[Path]:
    """``out/comparison.md`` of a transfer sweep's arms (:func:`sweep_arms`), when two are comparable."""
    records = read_runs(Path(out) / RUNS_FILE, warn=warn)
    arms = sweep_arms(records, before, cfg, choice, seeds)
    command = read_meta(Path(out) / META_FILE, warn).get("command")
    title = f"{cfg.optimizer}: transferred against tuned at n = {max(cfg.widths)} (base {cfg.base_width} × {cfg.base_depth})"
    return write_comparison(Path(out), title, arms, command=command)


def write_ablation_comparison(out: Path, before: Any, cfg: Any, choice: Any, seeds: Sequence[int], target: int,
                              log2_lr: int, *, command: str | None = None,
                              warn: Callable[[str], None] | None = None, variants: Sequence[Any] = ()) -> list[Path]:
    """``out/comparison.md`` of ``--ablate``'s μP and SP transferred (:func:`ablation_arms`); with
    ``variants`` (``--variants-only``), each variant against μP (:func:`variant_pairs`)."""
    arms = ablation_arms(read_runs(Path(out) / RUNS_FILE, warn=warn), before, cfg, choice, seeds, target, log2_lr,
                         variants)
    if variants:
        title = (f"{cfg.optimizer}: declared variants against the derived rules, transferred from "
                 f"{cfg.base_width} × {cfg.base_depth} to n = {target}")
        return write_comparison(Path(out), title, arms, command=command, pairs=variant_pairs(arms))
    title = f"{cfg.optimizer}: μP and SP transferred from {cfg.base_width} × {cfg.base_depth} to n = {target}"
    return write_comparison(Path(out), title, arms, command=command)


# --- arms spread over several folders (docs/sweep/ablate's coordinate steps) ---------------------------------

_FILTERS = {"width", "depth", "parameterization", "log2_lr"}
_MORE = {"folder", "plain", "log2_lrs", "settings"}


def read_spec(path: Path) -> dict[str, Any]:
    """A comparison spec: ``{"title", "seeds", "arms": [{"name", "spent": [SEL…], "target": [SEL…],
    "bounds": [text…]}], "pairs": [[i, j]…], "notes": [text…]}``; a SEL is ``{"folder": PATH
    (relative to the spec's folder), "width"?, "depth"?, "parameterization"?, "log2_lr"?,
    "log2_lrs"?: [int…], "settings"?: {KEY: VALUE (null: absent)…}, "plain"?: true (no --ablate
    swap)}``. Refused with one line when malformed."""
    try:
        spec = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SpecError(f"{path}: cannot read the comparison spec ({getattr(exc, 'strerror', None) or exc})") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("arms"), list) or not isinstance(spec.get("seeds"), list):
        raise SpecError(f"{path}: expected an object with 'title', 'seeds' and 'arms'")
    for a in spec["arms"]:
        if not isinstance(a, dict) or not isinstance(a.get("name"), str) or not a.get("target"):
            raise SpecError(f"{path}: every arm needs a 'name' and a non-empty 'target'")
        for sel in [*a.get("spent", []), *a["target"]]:
            extra = set(sel) - _FILTERS - _MORE
            if not isinstance(sel.get("folder"), str) or extra:
                raise SpecError(f"{path}: a selector needs 'folder' and only {sorted(_FILTERS | _MORE - {'folder'})}, "
                                f"got {sorted(sel)}")
    n = len(spec["arms"])
    for p in spec.get("pairs", []):
        if not (isinstance(p, list) and len(p) == 2 and all(isinstance(i, int) and 0 <= i < n for i in p)):
            raise SpecError(f"{path}: a pair is two arm indices below {n}, got {p!r}")
    return spec


def _spec_records(root: Path, sels: Sequence[dict[str, Any]], cache: dict[Path, list[dict[str, Any]]],
                  warn: Callable[[str], None] | None) -> list[dict[str, Any]]:
    out = []
    for sel in sels:
        path = (root / sel["folder"] / RUNS_FILE).resolve()
        if path not in cache:
            if not path.is_file():
                raise SpecError(f"{path}: no runs (named by the comparison spec)")
            cache[path] = read_runs(path, warn=warn)
        for r in cache[path]:
            if any(k in sel and r.get(k) != sel[k] for k in _FILTERS):
                continue
            s = r.get("settings") or {}
            if sel.get("plain") and s.get("ablation"):
                continue
            if "log2_lrs" in sel and r.get("log2_lr") not in sel["log2_lrs"]:
                continue
            if any(s.get(k) != v for k, v in (sel.get("settings") or {}).items()):
                continue
            out.append(r)
    return out


def spec_arms(spec: dict[str, Any], root: Path, warn: Callable[[str], None] | None = None) -> tuple[list[Arm], list[Pair]]:
    """The arms and pairs a spec declares, from the runs of its folders (relative to ``root``)."""
    cache: dict[Path, list[dict[str, Any]]] = {}
    seeds = [int(s) for s in spec["seeds"]]
    arms = []
    for a in spec["arms"]:
        spent = _spec_records(root, a.get("spent", []), cache, warn)
        tgt = _spec_records(root, a["target"], cache, warn)
        try:
            one = arm(a["name"], spent, tgt, seeds, a.get("bounds", []))
        except ValueError as exc:
            raise SpecError(f"comparison spec: {exc}") from None
        # a knob at one value is a bound only for an arm tuned wholly at the target (no base runs)
        arms.append(_with_edges(one, tgt, one_point=not spent) if len(one.search) > 1 else one)
    pairs = [compare(arms[i], arms[j]) for i, j in spec.get("pairs", [])]
    return arms, pairs
