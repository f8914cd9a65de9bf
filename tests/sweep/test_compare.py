"""spectral.sweep.compare: the t quantile, the exact expected best-of-k, paired intervals and
compute; spectral.sweep.compare_arms: the committed cross-folder comparisons re-render from
their runs byte for byte, and a malformed spec is one line."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spectral.errors import SpecError
from spectral.sweep.compare import arm, compare, cost, expected_min, t_cdf, t_quantile
from spectral.sweep.compare_arms import read_spec, render_comparison, spec_arms

ROOT = Path(__file__).resolve().parents[2]

# two-sided 95 % points of Student's t (Abramowitz & Stegun, Table 26.10; any statistics table)
T_TABLE = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 9: 2.262, 10: 2.228, 20: 2.086, 30: 2.042}


@pytest.mark.parametrize("df", sorted(T_TABLE))
def test_t_quantile_matches_the_table(df: int):
    assert t_quantile(df) == pytest.approx(T_TABLE[df], abs=5e-4)
    assert t_cdf(t_quantile(df), df) == pytest.approx(0.95, abs=1e-10)


def test_t_cdf_limits_and_normal_tail():
    assert t_cdf(0.0, 3) == 0.0
    assert t_cdf(1e9, 7) == pytest.approx(1.0)
    assert t_cdf(1.0, 1) == pytest.approx(0.5)  # Cauchy: P(|T| ≤ 1) = 1/2
    assert t_quantile(200) == pytest.approx(1.972, abs=1e-3)  # toward the normal's 1.960
    with pytest.raises(ValueError, match="positive integer"):
        t_cdf(1.0, 0)


def _brute(values: list[float], k: int) -> float:
    subsets = list(itertools.combinations(range(len(values)), min(k, len(values))))
    return sum(min(values[i] for i in s) for s in subsets) / len(subsets)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-10, 10, allow_nan=False), min_size=1, max_size=8), st.integers(1, 10))
@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_expected_min_equals_brute_force(values: list[float], k: int):
    assert expected_min(values, k) == pytest.approx(_brute(values, k), abs=1e-9)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=2, max_size=7), st.integers(1, 7))
def test_expected_min_with_ties(values: list[int], k: int):
    vals = [float(v) for v in values]
    assert expected_min(vals, k) == pytest.approx(_brute(vals, k), abs=1e-12)


def test_expected_min_edges():
    assert expected_min([3.0, 1.0, 2.0], 1) == pytest.approx(2.0)  # k = 1: the mean
    assert expected_min([3.0, 1.0, 2.0], 9) == 1.0  # k ≥ N: the minimum
    assert expected_min([1.0, math.inf], 2) == 1.0  # a diverged configuration never chosen
    assert expected_min([1.0, math.inf], 1) == math.inf
    with pytest.raises(ValueError, match="at least 1"):
        expected_min([1.0], 0)


def _rec(key: str, seed: int, loss: float | None, *, width: int = 64, lr: int = -5, params: int = 1000,
         fp: str | None = None, seconds: float = 1.0, **settings: object) -> dict[str, object]:
    return {"key": key, "fingerprint": fp or key, "optimizer": "adamw", "parameterization": "sp", "width": width,
            "depth": 2, "log2_lr": lr, "n_params": params, "steps_done": 10, "seconds": seconds,
            "val_loss": loss, "diverged": loss is None,
            "settings": {"seed": seed, "steps": 10, "batch_size": 2, "block_size": 5, **settings}}


def test_cost_counts_each_fingerprint_once():
    rs = [_rec("a", 0, 1.0), _rec("b", 0, 1.0, fp="a"), _rec("c", 1, 1.0, params=10)]
    c = cost(rs)
    assert c.runs == 2
    assert c.param_tokens == 1000 * 100 + 10 * 100  # steps 10 × batch 2 × context 5 = 100 tokens
    assert c.seconds == 2.0


def test_arm_and_pair_by_hand():
    base = [_rec(f"b{i}", i % 2, 3.0, width=16, params=100) for i in range(6)]  # 6 base runs
    a = arm("transferred", base, [_rec("t0", 0, 2.0), _rec("t1", 1, 2.2)], [0, 1])
    # b: three configurations at the target; the best (lr -6) is chosen by its seed-mean
    tgt = [_rec(f"s{lr}{s}", s, 2.0 + 0.1 * abs(lr + 6) + 0.05 * s, lr=lr) for lr in (-7, -6, -5) for s in (0, 1)]
    tgt.append(_rec("lone", 0, 0.5, lr=-4))  # one seed only: not a complete configuration
    b = arm("tuned", [], tgt, [0, 1])
    assert b.label == "log2 η -6" and b.per_seed == ((0, 2.0), (1, 2.05))
    assert [m for _, m in b.search] == pytest.approx([2.025, 2.125, 2.125])
    p = compare(a, b)
    assert [d for _, d in p.diffs] == pytest.approx([0.0, 0.15])
    assert p.mean == pytest.approx(0.075)
    sd = math.sqrt(2 * 0.075**2)
    assert p.half == pytest.approx(12.706204736 * sd / math.sqrt(2))
    # a spent 6 × 100 × 100 + 2 × 1000 × 100 = 260,000; one configuration of b costs 200,000: k = 1
    assert a.cost.param_tokens == 260_000 and b.config_cost == 200_000
    assert p.k == 1 and p.matched == pytest.approx((2.025 + 2.125 + 2.125) / 3)
    assert p.ratio == pytest.approx(7 * 200_000 / 2 / 260_000)


def test_arm_without_a_complete_configuration_is_refused():
    with pytest.raises(ValueError, match="every seed"):
        arm("x", [], [_rec("a", 0, 1.0)], [0, 1])


COMPARE = sorted((ROOT / "docs" / "sweep").glob("**/compare/*/spec.json"))


@pytest.mark.parametrize("spec", COMPARE, ids=lambda p: p.parent.name)
def test_committed_comparisons_come_from_the_raw_runs(spec: Path):
    """docs/sweep/ablate/compare: each comparison.md re-renders from its folders' runs byte for byte."""
    data = read_spec(spec)
    arms, pairs = spec_arms(data, spec.parent)
    rel = spec.relative_to(ROOT).as_posix()
    text = render_comparison(data["title"], arms, pairs, command=f"python -m spectral.cli.compare_arms {rel}",
                             notes=data.get("notes", []))
    assert text == (spec.parent / "comparison.md").read_text(encoding="utf-8")


def test_committed_comparisons_exist():
    assert len(COMPARE) >= 3


@pytest.mark.parametrize("text, match", [
    ("[]", "expected an object"),
    ('{"seeds": [0], "arms": [{"name": "a"}]}', "non-empty 'target'"),
    ('{"seeds": [0], "arms": [{"name": "a", "target": [{"folder": "x", "colour": 1}]}]}', "only"),
    ('{"seeds": [0], "arms": [{"name": "a", "target": [{"folder": "x"}]}], "pairs": [[0, 3]]}', "two arm indices"),
    ("{", "cannot read"),
])
def test_bad_spec_is_one_line(tmp_path: Path, text: str, match: str):
    p = tmp_path / "spec.json"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError, match=match):
        read_spec(p)


def test_spec_naming_a_missing_folder(tmp_path: Path):
    p = tmp_path / "spec.json"
    p.write_text(json.dumps({"seeds": [0], "arms": [{"name": "a", "target": [{"folder": "nowhere"}]}]}),
                 encoding="utf-8")
    with pytest.raises(SpecError, match="no runs"):
        spec_arms(read_spec(p), tmp_path)


def test_doctests():
    import doctest

    import spectral.sweep.compare as mod
    import spectral.sweep.student as student

    failures, tried = doctest.testmod(mod)
    more_failures, more_tried = doctest.testmod(student)
    assert failures == more_failures == 0 and tried + more_tried >= 3


def _arms_beyond_the_base(runs: Path) -> bool:
    """Whether a sweep folder's records hold two arms (parameterisation, optimizer or ablation) at one size
    other than its base: a folder that compares arms."""
    sizes: dict[tuple[object, object], set[tuple[object, object, str]]] = {}
    for line in runs.read_text(encoding="utf-8").splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        s = r.get("settings") or {}
        if (r.get("width"), r.get("depth")) == (s.get("base_width"), s.get("base_depth")):
            continue
        arm = (r.get("optimizer"), r.get("parameterization"), json.dumps(s.get("ablation")))
        sizes.setdefault((r.get("width"), r.get("depth")), set()).add(arm)
    return any(len(arms) > 1 for arms in sizes.values())


def test_every_folder_that_compares_arms_has_its_comparison():
    """Issue 46: every committed sweep folder whose runs hold two arms at a target size has a comparison.md
    beside them (re-rendered by test_sweep_committed.py) or is named by a compare spec (re-rendered above)."""
    named = set()
    for spec in COMPARE:
        for a in json.loads(spec.read_text(encoding="utf-8"))["arms"]:
            for sel in [*a.get("spent", []), *a["target"]]:
                named.add((spec.parent / sel["folder"]).resolve())
    lacking = [str(runs.parent.relative_to(ROOT)) for runs in sorted((ROOT / "docs" / "sweep").glob("**/runs.jsonl"))
               if _arms_beyond_the_base(runs) and not (runs.parent / "comparison.md").is_file()
               and runs.parent.resolve() not in named]
    assert lacking == []
