"""Student's t, exactly: its two-sided CDF and quantile for an integer number of degrees of
freedom (scipy is not a dependency). The paired intervals of spectral.sweep.compare and the
fitted optimum's interval (spectral.sweep.optimum) read it."""

from __future__ import annotations

import math

__all__ = ["t_cdf", "t_quantile"]


def t_cdf(t: float, df: int) -> float:
    """P(|T| ≤ t) for Student's t with an integer ``df`` ≥ 1, exactly.

    The finite sums of Abramowitz & Stegun 26.7.3 (odd ``df``) and 26.7.4 (even), with
    θ = atan(t / √df): for odd df, 2/π (θ + sin θ cos θ (1 + 2/3 cos²θ + … + (2·4⋯(df−3)) /
    (1·3⋯(df−2)) cos^(df−3) θ)); for even df, sin θ (1 + 1/2 cos²θ + … + (1·3⋯(df−3)) /
    (2·4⋯(df−2)) cos^(df−2) θ).

    >>> round(t_cdf(12.706204736, 1), 6), round(t_cdf(4.30265273, 2), 6)
    (0.95, 0.95)
    """
    if df < 1 or int(df) != df:
        raise ValueError(f"t_cdf: df must be a positive integer, got {df}")
    t = abs(t)
    theta = math.atan(t / math.sqrt(df))
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    if df % 2:
        if df == 1:
            return 2 * theta / math.pi
        term, total = 1.0, 1.0
        for j in range(1, (df - 3) // 2 + 1):  # term_j = term_{j-1} * (2j) / (2j + 1) * cos²θ
            term *= (2 * j) / (2 * j + 1) * c2
            total += term
        return 2 / math.pi * (theta + s * math.cos(theta) * total)
    term, total = 1.0, 1.0
    for j in range(1, (df - 2) // 2 + 1):  # term_j = term_{j-1} * (2j - 1) / (2j) * cos²θ
        term *= (2 * j - 1) / (2 * j) * c2
        total += term
    return s * total


def t_quantile(df: int, level: float = 0.95) -> float:
    """The two-sided ``level`` quantile of Student's t with ``df`` degrees of freedom: the t
    with P(|T| ≤ t) = ``level``, by bisection on :func:`t_cdf` (exact to 1e-12; scipy is not
    a dependency). Tables give 12.706 (df 1), 4.303 (2), 3.182 (3), 2.776 (4), 2.571 (5).

    >>> round(t_quantile(2), 3), round(t_quantile(4), 3)
    (4.303, 2.776)
    """
    if not 0 < level < 1:
        raise ValueError(f"t_quantile: level must be in (0, 1), got {level}")
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < level:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_cdf(mid, df) < level:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return (lo + hi) / 2
