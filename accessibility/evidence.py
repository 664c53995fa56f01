"""Brute-force instances of the steps SymPy cannot check: the numbers each prose step speaks about.

Every prose step of :mod:`accessibility.derivations` (a triangle inequality between points of a
normed space, a volume comparison, the quantisation hypothesis, a union bound, a Wasserstein
distance, a stars-and-bars count, a cone sector) is a claim about concrete objects. Each function
here builds such objects at random and by brute force (points, greedy packings, grid quantisers,
distributions over short sequences, rounded measures) and returns one record per instance: a dict
of the quantities the prose relation names (field names are documented per function). The
derivation checker evaluates the relation, and every relation derived from it, at these records
when a chain is built; a record that falls outside a claim refuses the chain.

>>> rng = np.random.default_rng(0)
>>> all(rec["count"] <= (1 + 2 * rec["r"] / rec["separation"]) ** (rec["d"] * rec["m"])
...     for rec in packings(rng))
True
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy import stats

#: Records per sampler (each a brute-force instance of one prose step).
RECORDS = 8
#: Norms of the point clouds (numpy ``ord``): L1, L2, L∞; and the volume of each unit ball of R^2.
NORMS = (1, 2, np.inf)
UNIT_AREA = {1: 2.0, 2: math.pi, np.inf: 4.0}
#: Candidate points of a brute-force packing (random points plus a fine grid), and the grid's step
#: as a fraction of the separation.
CANDIDATES = 400
GRID_FRACTION = 0.5


def _direction(rng, dim, order):
    """A random vector of norm 1 in the norm ``order``."""
    v = rng.normal(size=dim)
    return v / np.linalg.norm(v, ord=order)


def triangle(rng) -> list[dict]:
    """Containment: c, x, y in R^k with ‖x - c‖ <= r and ‖y - x‖ < ε/2.

    Fields: ``dist`` = ‖y - c‖, ``s`` = ε/2 - ‖y - x‖ (> 0), ``u`` = r - ‖x - c‖ (>= 0), ``r``, ``eps``.
    """
    out = []
    for dim, order in itertools.product((1, 2, 3), NORMS):
        r, eps = rng.uniform(0.1, 5.0), rng.uniform(0.01, 5.0)
        c = rng.normal(size=dim)
        x = c + r * rng.uniform(0, 1) * _direction(rng, dim, order)
        y = x + eps / 2 * rng.uniform(0, 1) * _direction(rng, dim, order)
        out.append({"dist": np.linalg.norm(y - c, ord=order), "s": eps / 2 - np.linalg.norm(y - x, ord=order),
                    "u": r - np.linalg.norm(x - c, ord=order), "r": r, "eps": eps})
    return out


def common_point(rng) -> list[dict]:
    """Disjointness: x, x' and a point y with ‖x - y‖ < ε/2 and ‖y - x'‖ < ε/2.

    Fields: ``dist`` = ‖x - x'‖, ``s`` = ε/2 - ‖x - y‖, ``u`` = ε/2 - ‖y - x'‖, ``eps``.
    """
    out = []
    for dim, order in itertools.product((1, 2, 3), NORMS):
        eps, y = rng.uniform(0.01, 5.0), rng.normal(size=dim)
        x, x2 = (y + eps / 2 * rng.uniform(0, 1) * _direction(rng, dim, order) for _ in range(2))
        out.append({"dist": np.linalg.norm(x - x2, ord=order),
                    "s": eps / 2 - np.linalg.norm(x - y, ord=order),
                    "u": eps / 2 - np.linalg.norm(y - x2, ord=order), "eps": eps})
    return out


def greedy_packing(points, separation, order) -> int:
    """Size of a maximal subset of ``points`` (shape (count, dim)) pairwise at least ``separation``
    apart in the norm ``order``, chosen greedily in the given order."""
    kept = np.empty((0, points.shape[1]))
    for p in points:
        if not len(kept) or np.linalg.norm(kept - p, ord=order, axis=1).min() >= separation:
            kept = np.vstack([kept, p])
    return len(kept)


def _ball_candidates(rng, dim, r, separation, order):
    """Random points and a grid (step half the separation) inside the ball of radius r."""
    ticks = np.arange(-r, r + 1e-12, GRID_FRACTION * separation)
    grid = np.stack(np.meshgrid(*[ticks] * dim), -1).reshape(-1, dim)
    cloud = np.vstack([rng.uniform(-r, r, (CANDIDATES, dim)), rng.permutation(grid)])
    return cloud[np.linalg.norm(cloud, ord=order, axis=1) <= r]


def packings(rng) -> list[dict]:
    """Packing lemma: greedy ε-separated subsets of a ball of radius r, by brute force.

    Three kinds of space: R^1 (d = m = 1), R^2 with the L1, L2 or L∞ norm (d = 2, m = 1), and two or
    three vectors of R^1 under :math:`\\max_j |x_j|` (d = 1, m = 2 or 3, the norm of Theorem 4.5). Fields:
    ``count`` (points kept), ``d``, ``m``, ``r``, ``separation`` (ε), ``unit_volume`` (κ_d, the volume
    of the unit ball of one vector's norm; the product norm's is κ_d^m).
    """
    spaces = [(1, 1, np.inf, 2.0), (1, 2, np.inf, 2.0), (1, 3, np.inf, 2.0)]
    spaces += [(2, 1, order, UNIT_AREA[order]) for order in NORMS]
    out = []
    for d, m, order, unit in spaces:
        r = rng.uniform(0.5, 2.0)
        separation = r * rng.uniform(0.15 * d * m, 1.5)  # coarser in three dimensions: fewer candidates
        points = _ball_candidates(rng, d * m, r, separation, order)
        out.append({"count": greedy_packing(points, separation, order), "d": d, "m": m, "r": r,
                    "separation": separation, "unit_volume": unit})
    return out


def _grid_size(r, eps, d, m):
    """Points of the grid -r + ε{0, 1, ...} inside [-r, r]^{dm}: (⌊2r/ε⌋ + 1)^{dm}."""
    return (math.floor(2 * r / eps) + 1) ** (d * m)


def quantised_outputs(rng) -> list[dict]:
    """Quantisation: prompts of m vectors of R^d drawn in [-r, r]^{dm} are rounded down (floor) onto the
    grid Z = -r + ε{0, ..., ⌊2r/ε⌋} per coordinate, which stays inside [-r, r], and a random table
    F: Z -> V^n gives each output. Fields: ``accessible`` (distinct outputs), ``grid`` = |Z|, ``d``,
    ``m``, ``r``, ``eps``."""
    out = []
    for _ in range(RECORDS):
        d, m, r = int(rng.integers(1, 3)), int(rng.integers(1, 3)), rng.uniform(0.5, 2.0)
        eps = r * rng.uniform(0.3, 1.5)
        levels = math.floor(2 * r / eps) + 1
        prompts = rng.uniform(-r, r, (CANDIDATES, d * m))
        cells = np.floor((prompts + r) / eps).astype(int)  # Q(x), coordinate by coordinate
        table = rng.integers(0, 3 ** int(rng.integers(1, 5)), size=levels ** (d * m))  # F, ids of V^n
        outputs = table[np.ravel_multi_index(cells.T, (levels,) * (d * m))]
        out.append({"accessible": len(np.unique(outputs)), "grid": levels ** (d * m), "d": d, "m": m, "r": r,
                    "eps": eps})
    return out


def all_accessible(rng) -> list[dict]:
    """Every sequence of V^n accessible: the grid quantiser of :func:`quantised_outputs` with a map of Z
    onto V^n, which exists exactly when |V|^n <= |Z|. Fields: ``vocab``, ``n`` (the longest such n),
    ``accessible`` = |V|^n, ``d``, ``m``, ``r``, ``eps``."""
    out = []
    while len(out) < RECORDS:
        d, m, vocab = int(rng.integers(1, 4)), int(rng.integers(1, 4)), int(rng.integers(2, 20))
        r = rng.uniform(0.5, 2.0)
        eps = r * rng.uniform(0.02, 1.0)
        n = int(math.log(_grid_size(r, eps, d, m)) / math.log(vocab) + 1e-9)
        if n >= 1:
            out.append({"vocab": vocab, "n": n, "accessible": vocab**n, "d": d, "m": m, "r": r, "eps": eps})
    return out


def union_bound(rng) -> list[dict]:
    """n_50 with targets from Q: a random distribution Q over V^n (|V| = 2 or 3, n <= 6), the grid
    quantiser's |A| <= (⌊2r/ε⌋ + 1)^{dm} outputs taken as the |A| most probable targets (the worst case),
    kept when they carry at least half of Q. Fields: ``rate`` h = -ln(max Q)/n, ``n``, ``d``, ``m``,
    ``r``, ``eps``."""
    out = []
    while len(out) < RECORDS:
        vocab, n, d, m = (int(rng.integers(lo, hi)) for lo, hi in ((2, 4), (1, 7), (1, 3), (1, 3)))
        q = np.sort(rng.dirichlet(np.full(vocab**n, rng.uniform(0.05, 1.0))))[::-1]
        r = rng.uniform(0.5, 2.0)
        eps = r * rng.uniform(0.5, 3.0)
        if q[:_grid_size(r, eps, d, m)].sum() >= 0.5:
            out.append({"rate": -math.log(q[0]) / n, "n": n, "d": d, "m": m, "r": r, "eps": eps})
    return out


def _round_weights(weights, q):
    """Weights rounded to multiples of 1/q, summing to 1, by largest remainders."""
    units = np.floor(weights * q)
    order = np.argsort(-(weights * q - units))
    units[order[:int(q - units.sum())]] += 1
    return units / q


def cover_moves(rng) -> list[dict]:
    """Cover radius of Corollary 4.10 on [-r, r]: random empirical measures moved to the nearest point
    of an ε/4-net, their weights rounded to multiples of 1/q, q = ⌈K/ε_w⌉, ε_w = ε/(4r). Fields:
    ``w1`` (scipy's Wasserstein-1 distance from the measure to its cover point), ``r``, ``eps``."""
    out = []
    for _ in range(RECORDS):
        r = rng.uniform(0.5, 2.0)
        eps = r * rng.uniform(0.1, 1.0)
        net = np.arange(-r, r + 1e-12, eps / 4)
        atoms = rng.uniform(-r, r, int(rng.integers(1, 40)))
        weights = np.bincount(np.abs(atoms[:, None] - net[None]).argmin(1), minlength=net.size) / atoms.size
        rounded = _round_weights(weights, math.ceil(net.size / (eps / (4 * r))))
        out.append({"w1": stats.wasserstein_distance(atoms, net, None, rounded), "r": r, "eps": eps})
    return out


def stars_and_bars(rng) -> list[dict]:
    """Weight vectors on K points in multiples of 1/Q, counted one by one (K <= 4, Q <= 6), with r and
    ε such that Q = ⌈4rK/ε⌉. Fields: ``count``, ``K``, ``Q``, ``r``, ``eps``."""
    out = []
    for _ in range(RECORDS):
        k, q = int(rng.integers(2, 5)), int(rng.integers(1, 7))
        count = sum(1 for w in itertools.product(range(q + 1), repeat=k) if sum(w) == q)
        ratio = q - rng.uniform(0, 1) if q > 1 else q * rng.uniform(0.01, 1)  # 4rK/ε in (Q - 1, Q]
        out.append({"count": count, "K": k, "Q": q, "r": 1.0, "eps": 4 * k / ratio})
    return out


def cone_sector_packings(rng) -> list[dict]:
    """Grid points (pairwise at least ε apart) inside a cone sector of R^2 and R^3: half-angle φ, radius
    r2, apex at the origin, randomly offset grids. Fields: ``count``, ``d``, ``r2``, ``eps``, ``phi``,
    ``fraction`` (of the ball inside the cone: φ/π in R^2, (1 - cos φ)/2 in R^3), ``unit_volume``."""
    out = []
    for dim, unit in ((2, math.pi), (3, 4 * math.pi / 3)):
        for _ in range(RECORDS // 2):
            phi, r2 = rng.uniform(0.1, math.pi / 2), rng.uniform(1.0, 4.0)
            eps = r2 * rng.uniform(0.08, 0.3)
            ticks = np.arange(-r2 - eps, r2 + eps, eps)
            grid = rng.uniform(0, eps, dim) + np.stack(np.meshgrid(*[ticks] * dim), -1).reshape(-1, dim)
            norms = np.linalg.norm(grid, axis=1)
            inside = (norms <= r2) & (grid[:, 0] >= np.cos(phi) * norms)
            fraction = phi / math.pi if dim == 2 else (1 - math.cos(phi)) / 2
            out.append({"count": int(inside.sum()), "d": dim, "r2": r2, "eps": eps, "phi": phi,
                        "fraction": fraction, "unit_volume": unit})
    return out
