"""The measuring toolkit (spectral.measure.fit): its values, and that it is the package's only one.

The values: the least-squares line and its interval on points whose answer is known in
closed form, the log–log slope, the verdict, the RMS. The scan: every function under
``spectral/`` (and ``optimizers/``) is read with ``ast``; one that computes a least-squares
slope itself (a sum of products of two deviations, or numpy/scipy/statistics' fitters), or
an RMS (``sqrt`` of a ``mean`` of squares), or is named like the fitters and the verdicts
this toolkit replaced, must be the toolkit's own. The scanner is first shown to find the
four slope fitters the package had before (their sources are kept below, as they were).
"""

from __future__ import annotations

import ast
import math
import re
import statistics
from pathlib import Path

import pytest

from spectral.measure.fit import (
    SLOPE_TOLERANCE_COORD,
    SLOPE_TOLERANCE_PROBE,
    SLOPE_TOLERANCE_WIDTHS,
    Line,
    fit_line,
    log_slope,
    loggable,
    rms,
    t_quantile,
    within,
)

ROOT = Path(__file__).resolve().parents[2]
T_975_2 = 4.302652729749464
"""Student t's 0.975 quantile at 2 degrees of freedom (the tables' 4.303)."""

# --------------------------------------------------------------------------------------
# values
# --------------------------------------------------------------------------------------


def test_a_noise_free_line_is_recovered_exactly_with_a_zero_interval():
    line = fit_line([0.0, 1.0, 2.0, 3.0], [1.0, 3.0, 5.0, 7.0])
    assert line == Line(slope=2.0, intercept=1.0, stderr=0.0, points=4)
    assert line.half_width == 0.0


def test_known_noise_gives_the_closed_form_standard_error_and_interval():
    # y = 2x + 1 + e with e = (+d, −d, −d, +d): e is orthogonal to 1 and to x, so the line is
    # exact and the residuals are e: stderr = sqrt(Σe² / (n − 2) / Σ(x − x̄)²) = sqrt(4d²/2/5)
    d = 0.1
    xs = [0.0, 1.0, 2.0, 3.0]
    ys = [2 * x + 1 + e for x, e in zip(xs, (d, -d, -d, d), strict=True)]
    line = fit_line(xs, ys)
    assert line.slope == pytest.approx(2.0, abs=1e-12)
    assert line.intercept == pytest.approx(1.0, abs=1e-12)
    assert line.stderr == pytest.approx(d * math.sqrt(0.4), rel=1e-12)
    assert line.half_width == pytest.approx(T_975_2 * d * math.sqrt(0.4), rel=1e-9)
    assert line.half_width == pytest.approx(0.272123652, abs=1e-9)
    ref = statistics.linear_regression(xs, ys)
    assert (line.slope, line.intercept) == pytest.approx((ref.slope, ref.intercept))


def test_two_points_have_a_slope_but_no_interval_and_one_size_has_no_slope():
    line = fit_line([1.0, 3.0], [2.0, 1.0])
    assert (line.slope, line.intercept, line.stderr, line.half_width) == (-0.5, 2.5, None, None)
    with pytest.raises(ValueError, match="two distinct sizes"):
        fit_line([2.0, 2.0, 2.0], [0.0, 1.0, 2.0])


def test_t_quantile_is_students():
    assert t_quantile(2) == pytest.approx(T_975_2, abs=1e-9)
    assert t_quantile(1) == pytest.approx(12.706204736, abs=1e-6)
    with pytest.raises(ValueError, match="df must be >= 1"):
        t_quantile(0)


def test_log_slope_reads_a_power_laws_exponent_and_refuses_what_has_no_logarithm():
    assert log_slope([1, 2, 4], [3.0, 6.0, 12.0]) == 1.0  # exact: float noise rounded out
    assert log_slope([16, 64, 256], [1.0, 0.5, 0.25]) == -0.5
    flat = log_slope([64, 128], [5.0, 5.0])
    assert flat == 0.0 and str(flat) == "0.0"  # not -0.0
    assert log_slope([64, 128, 256], [1.0, 0.0, 1.0]) is None  # a dead module
    assert log_slope([64, 128, 256], [1.0, math.inf, 1.0]) is None  # a diverged run
    assert log_slope([64], [1.0]) is None
    assert log_slope([64, 64], [1.0, 2.0]) is None


def test_loggable_keeps_the_points_a_log_log_fit_can_take():
    assert loggable([1, 2, 4, 8], [1.0, None, -1.0, 8.0]) == ([1, 8], [1.0, 8.0])
    assert loggable([0, 2], [1.0, math.nan]) == ([], [])


def test_within_is_the_closed_interval_and_nan_fails():
    assert within(0.3, 0.5, 0.2) and within(0.7, 0.5, 0.2)
    assert not within(0.71, 0.5, 0.2)
    assert not within(math.nan, 0.0, 1.0) and not within(math.inf, 0.0, 1.0)


def test_one_named_tolerance_per_quantity():
    assert (SLOPE_TOLERANCE_COORD, SLOPE_TOLERANCE_WIDTHS, SLOPE_TOLERANCE_PROBE) == (
        0.15,
        0.2,
        0.1,
    )
    docs = _constant_docstrings(ROOT / "spectral" / "measure" / "fit.py")
    for name in ("SLOPE_TOLERANCE_COORD", "SLOPE_TOLERANCE_WIDTHS", "SLOPE_TOLERANCE_PROBE"):
        assert "largest" in docs[name], name  # each says what it bounds, and why its value


def test_rms_is_the_entrywise_rms_in_float64():
    torch = pytest.importorskip("torch")
    t = torch.tensor([[3.0, 4.0], [0.0, 0.0]], requires_grad=True)
    assert rms(t) == 2.5
    big = torch.full((4,), 1e20, dtype=torch.float32)  # its square overflows float32
    assert rms(big) == pytest.approx(1e20, rel=1e-7)


# --------------------------------------------------------------------------------------
# one of each in the package
# --------------------------------------------------------------------------------------

FITTER_CALLS = {"polyfit", "lstsq", "linregress", "linear_regression", "curve_fit", "covariance"}
FITTER_NAMES = re.compile(r"^_?(slope|fit_slope|linear_fit|log_slope|fit_line|least_squares)$")
RMS_NAMES = re.compile(r"^_?(rms|.*_rms)$")
VERDICT_NAMES = re.compile(r"^_?judge$")
RMS_ELSEWHERE = {
    "spectral.coordcheck.jax._traced_rms": "the RMS of a traced jax array inside jax.jit (a jax "
    "value, not a float); the toolkit's takes a concrete torch tensor",
}
"""RMS computations outside the toolkit, each with why it cannot be the toolkit's."""

BEFORE = {
    "spectral.measure.common.fit_slope": """
def fit_slope(xs, ys):
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys, strict=False)
           if x > 0 and y is not None and math.isfinite(y) and y > 0]
    if len(pts) < 2:
        return math.nan, math.nan
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    if sxx == 0:
        return math.nan, math.nan
    sxy = sum((p[0] - mx) * (p[1] - my) for p in pts)
    slope = sxy / sxx
    slope = round(slope, 12) + 0.0
    return slope, my - slope * mx
""",
    "spectral.torch.width_verdict.slope": """
def slope(widths, values):
    if len(values) < 2 or any(not (v > 0 and math.isfinite(v)) for v in values):
        return None
    xs = [math.log(w) for w in widths]
    ys = [math.log(v) for v in values]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
""",
    "spectral.sweep.exponent.linear_fit": """
def linear_fit(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        raise ValueError("a fit needs at least two distinct sizes")
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    intercept = my - slope * mx
    if n < 3:
        return slope, intercept, None
    resid = sum((y - (slope * x + intercept)) ** 2 for x, y in zip(xs, ys, strict=True))
    se = math.sqrt(resid / (n - 2) / sxx)
    return slope, intercept, t_quantile(n - 2) * se
""",
    "spectral.infer.fit.log_slope": """
def log_slope(xs, ys):
    lx = [math.log(x) for x in xs]
    ly = [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    sxx = sum((x - mx) ** 2 for x in lx)
    return sum((x - mx) * (y - my) for x, y in zip(lx, ly, strict=True)) / sxx
""",
}
"""The package's slope fitters before the toolkit (issue 34), as they were."""


def _called(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _operand(node: ast.Call) -> ast.AST | None:
    """What a call works on: the receiver of a method, else its first argument."""
    if isinstance(node.func, ast.Attribute) and not isinstance(node.func.value, ast.Name):
        return node.func.value
    return node.args[0] if node.args else None


def _is_deviation_product(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Mult)
        and isinstance(node.left, ast.BinOp)
        and isinstance(node.left.op, ast.Sub)
        and isinstance(node.right, ast.BinOp)
        and isinstance(node.right.op, ast.Sub)
    )


def _fits_a_slope(fn: ast.AST) -> bool:
    """It computes a least-squares slope: calls a library fitter, or sums products of two
    deviations (``Σ (x − x̄)(y − ȳ)``, the normal equations' numerator)."""
    for node in ast.walk(fn):
        if not isinstance(node, ast.Call):
            continue
        if _called(node) in FITTER_CALLS:
            return True
        arg = node.args[0] if node.args else None
        if (
            _called(node) == "sum"
            and isinstance(arg, (ast.GeneratorExp, ast.ListComp))
            and _is_deviation_product(arg.elt)
        ):
            return True
    return False


def _computes_rms(fn: ast.AST) -> bool:
    """It takes the square root of a mean of squares (``t.pow(2).mean().sqrt()``,
    ``sqrt(mean(square(a)))``, ``sqrt(mean(a ** 2))``)."""
    for node in ast.walk(fn):
        if not (isinstance(node, ast.Call) and _called(node) == "sqrt"):
            continue
        mean = _operand(node)
        if not (isinstance(mean, ast.Call) and _called(mean) == "mean"):
            continue
        sq = _operand(mean)
        if isinstance(sq, ast.Call) and _called(sq) in ("pow", "square"):
            return True
        if isinstance(sq, ast.BinOp) and isinstance(sq.op, ast.Pow):
            return True
    return False


def _functions(
    tree: ast.AST, module: str
) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function (nested ones too, methods under their class) as ``module.name``."""
    out = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((f"{prefix}.{child.name}", child))
                visit(child, f"{prefix}.{child.name}")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}.{child.name}")
            else:
                visit(child, prefix)

    visit(tree, module)
    return out


def _package_functions() -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    out = []
    for top, package in (("spectral", "spectral"), ("optimizers", "spectral.optimizers")):
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = [package, *path.relative_to(ROOT / top).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            out += _functions(ast.parse(path.read_text()), ".".join(parts))
    return out


def _constant_docstrings(path: Path) -> dict[str, str]:
    body = ast.parse(path.read_text()).body
    out = {}
    for node, after in zip(body, body[1:], strict=False):
        if (
            isinstance(node, ast.Assign)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = after.value.value
    return out


@pytest.mark.parametrize("name", sorted(BEFORE))
def test_the_scan_finds_each_slope_fitter_the_package_had(name):
    [(_, fn)] = _functions(ast.parse(BEFORE[name]), "before")
    assert _fits_a_slope(fn)


def test_the_scan_finds_each_rms_the_package_had():
    torch_rms = "def _rms(t):\n    return float(t.detach().double().pow(2).mean().sqrt())\n"
    jax_rms = "def rms(a):\n    return jnp.sqrt(jnp.mean(jnp.square(a)))\n"
    power_rms = "def f(a):\n    return math.sqrt(statistics.mean(a ** 2))\n"
    for source in (torch_rms, jax_rms, power_rms):
        [(_, fn)] = _functions(ast.parse(source), "before")
        assert _computes_rms(fn), source
    rms_norm = "def f(x):\n    return x / x.pow(2).mean(-1, keepdim=True).add(1e-6).sqrt()\n"
    [(_, fn)] = _functions(ast.parse(rms_norm), "before")
    assert not _computes_rms(fn)  # an RMSNorm's normalizer (eps inside the root) is not one


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_exactly_one_slope_fitter_in_the_package():
    functions = _package_functions()
    fitters = sorted(name for name, fn in functions if _fits_a_slope(fn))
    assert fitters == ["spectral.measure.fit.fit_line"]
    named = sorted(name for name, _ in functions if FITTER_NAMES.match(name.rsplit(".", 1)[1]))
    assert named == ["spectral.measure.fit.fit_line", "spectral.measure.fit.log_slope"]


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_rms_and_judge_are_defined_once():
    functions = _package_functions()
    computed = sorted(name for name, fn in functions if _computes_rms(fn))
    assert computed == sorted(["spectral.measure.fit.rms", *RMS_ELSEWHERE])
    named = sorted(name for name, _ in functions if RMS_NAMES.match(name.rsplit(".", 1)[1]))
    assert named == sorted(["spectral.measure.fit.rms", *RMS_ELSEWHERE])
    judges = [name for name, _ in functions if VERDICT_NAMES.match(name.rsplit(".", 1)[1])]
    assert judges == ["spectral.coordcheck.slopes.judge"]


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_slope_tolerances_live_in_the_toolkit_only():
    defined = []
    for path in sorted((ROOT / "spectral").rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                defined += [
                    (path.relative_to(ROOT).as_posix(), t.id)
                    for t in targets
                    if isinstance(t, ast.Name) and "SLOPE_TOLERANCE" in t.id
                ]
    assert sorted(defined) == [
        ("spectral/measure/fit.py", "SLOPE_TOLERANCE_COORD"),
        ("spectral/measure/fit.py", "SLOPE_TOLERANCE_PROBE"),
        ("spectral/measure/fit.py", "SLOPE_TOLERANCE_WIDTHS"),
    ]


@pytest.mark.parametrize(
    "package",
    [
        # seconds on the 2-core CPU (the largest package): out of pytest -m "not slow"
        pytest.param("spectral.torch", marks=pytest.mark.slow),
        "spectral.coordcheck",
        "spectral.infer",
        "spectral.sweep",
        "spectral.measure",
    ],
)
def test_each_measuring_package_uses_the_toolkit(package):
    folder = ROOT.joinpath(*package.split("."))
    users = []
    for path in sorted(folder.rglob("*.py")):
        home = path.parent.relative_to(ROOT).parts  # the package a relative import starts in
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = home[: len(home) - node.level + 1] if node.level else ()
            if ".".join([*base, node.module or ""]) == "spectral.measure.fit":
                users.append(path.name)
    assert users, f"{package} measures without spectral.measure.fit"
