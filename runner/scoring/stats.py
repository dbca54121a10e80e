"""Telling signal from noise in success rates: intervals, flaky tasks, and run-to-run tests.

- Wilson score interval (95%) for a rate of k passes in n trials: honest at small n and at
  0 or 1, where the normal approximation collapses to a zero-width interval.
- Per-task differences between two runs: Fisher's exact test, two-sided. Exact for the
  2x2 table at any n; a z-test at three trials a task would be fiction.
- Overall difference: a paired bootstrap over tasks (tasks resampled with replacement,
  the mean per-task change recomputed 10,000 times, fixed seed). Tasks are the unit that
  varies; episodes of one task are not independent draws of the suite.
"""

from __future__ import annotations

import math
import random

Z95 = 1.959964
FLAKY_LOW, FLAKY_HIGH = 0.2, 0.8
ALPHA = 0.05


def wilson(passes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    if n == 0:
        return None
    p = passes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)


def is_flaky(rate: float | None, n: int) -> bool:
    """Between 0.2 and 0.8 (inclusive) over at least two trials: the task neither reliably
    passes nor reliably fails, so one episode of it says little."""
    return rate is not None and n >= 2 and FLAKY_LOW <= rate <= FLAKY_HIGH


def fisher_exact(a_pass: int, a_n: int, b_pass: int, b_n: int) -> float:
    """Two-sided p-value of Fisher's exact test on [[a_pass, a_fail], [b_pass, b_fail]]:
    the probability, with the margins fixed, of a table at most as likely as this one."""
    if a_n == 0 or b_n == 0:
        return 1.0
    passes, n = a_pass + b_pass, a_n + b_n

    def prob(k: int) -> float:  # P(first row has k passes) under the hypergeometric
        return math.comb(passes, k) * math.comb(n - passes, a_n - k) / math.comb(n, a_n)

    observed = prob(a_pass)
    lo, hi = max(0, a_n - (n - passes)), min(a_n, passes)
    total = sum(p for k in range(lo, hi + 1) if (p := prob(k)) <= observed * (1 + 1e-7))
    return min(1.0, total)


def bootstrap_mean_difference(pairs: list[tuple[float, float]], *, resamples: int = 10_000,
                              seed: int = 0) -> tuple[float, float, float]:
    """(mean of b - a, 2.5th percentile, 97.5th percentile) over tasks resampled with replacement."""
    if not pairs:
        return 0.0, 0.0, 0.0
    deltas = [b - a for a, b in pairs]
    mean = sum(deltas) / len(deltas)
    rng = random.Random(seed)
    means = sorted(sum(rng.choice(deltas) for _ in deltas) / len(deltas) for _ in range(resamples))
    return round(mean, 4), round(means[int(0.025 * resamples)], 4), round(means[int(0.975 * resamples) - 1], 4)
