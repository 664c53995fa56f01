"""Decoder cells: which share of the support each token's cell takes, and the entropy H of those shares.

Greedy decoding emits :math:`\\arg\\max_v \\langle w_v, h\\rangle + b_v`, so the hidden states that emit
token v form its **argmax cell**, a polyhedral cone (a power diagram of the unembedding rows
:math:`w_v`). The published pipeline uses **Euclidean Voronoi** cells of the rows instead,
:math:`\\arg\\min_v \\|h - w_v\\|`; the two differ whenever row norms differ. Both are offered, argmax by
default.

Token v's share :math:`p_v` is the probability that a point drawn from a region (a centred ball, the
box of measured widths, or the empirical hidden states) falls in its cell, estimated by Monte Carlo
in chunks. Non-uniform cells refine Corollary 4.6: replacing :math:`\\ln|V|` by

.. math:: H = -\\frac{1}{|V'|}\\sum_{v \\in V'} \\ln p_v \\ \\ge\\ \\ln|V'| \\qquad (V' = \\{v : p_v > 0\\})

gives the slope :math:`C_{\\text{cells}} = d\\ln(1 + 2r/\\varepsilon)/H`
(:func:`accessibility.bounds.cell_entropy`).
With N samples the smallest nonzero share is 1/N and unseen tokens drop out of V', which biases H
down: every estimate reports the zero-count fraction, :math:`\\ln N` (H of a single sample can never
exceed it) and H at N/2, N/4, ... to show the trend.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from accessibility import bounds
from accessibility.checks import InputError, at_least, finite_tensor, in_range, one_of, seed

REGIONS = ("ball", "box", "hidden")
ASSIGNMENTS = ("argmax", "voronoi")
#: Points per matrix multiply: the score block is (BATCH, |V|) float32, 100 MB for |V| = 49152.
DEFAULT_BATCH = 512
#: Fewest Monte-Carlo points: one point falls in one cell, whose share 1 gives H = 0 and no slope.
MIN_SAMPLES = 2
#: Bootstrap replicates for the confidence band of H, and its level.
BOOTSTRAP_REPLICATES = 200
BAND_LEVEL = 0.95
#: The trend of H with N is recorded at N, N/2, N/4, ... down to this many samples.
MIN_CHECKPOINT = 1000
#: k-fold log-convolution cross-check: histogram bin (nats) and the folds k = 1 .. CONV_MAX_FOLD.
CONV_BIN = 0.01
CONV_MAX_FOLD = 16


@dataclass(frozen=True)
class CellsConfig:
    """Monte-Carlo estimate of cell shares: N samples, region, cell type, chunk size, seed."""

    samples: int = 100_000
    region: str = "box"
    assign: str = "argmax"
    batch_size: int = DEFAULT_BATCH
    seed: int = 0

    def __post_init__(self):
        at_least("samples", self.samples, MIN_SAMPLES, integer=True)
        at_least("batch_size", self.batch_size, 1, integer=True)
        seed("seed", self.seed)
        one_of("region", self.region, REGIONS)
        one_of("assign", self.assign, ASSIGNMENTS)

    @classmethod
    def paper(cls) -> CellsConfig:
        """The published pipeline's cell type (Euclidean Voronoi) over the box of measured widths."""
        return cls(samples=10_000_000, region="box", assign="voronoi", batch_size=4096)

    @classmethod
    def quick(cls) -> CellsConfig:
        return cls(samples=20_000)


@dataclass(frozen=True)
class Region:
    """Where points are drawn: a ball of radius ``radius`` centred at 0, a box, or given points.

    Build with :meth:`ball`, :meth:`box` or :meth:`hidden`.
    """

    kind: str
    d_model: int
    radius: float | None = None
    lows: torch.Tensor | None = field(default=None, repr=False)
    highs: torch.Tensor | None = field(default=None, repr=False)
    points: torch.Tensor | None = field(default=None, repr=False)  # (n, d_model)

    @classmethod
    def ball(cls, d_model: int, radius: float) -> Region:
        """Uniform in the Euclidean ball of ``radius`` around the origin."""
        return cls("ball", int(at_least("d_model", d_model, 1, integer=True)), radius=float(radius))

    @classmethod
    def box(cls, lows, highs) -> Region:
        """Uniform in the box [lows, highs] (per coordinate, e.g. measured by
        :mod:`accessibility.geometry`)."""
        lows, highs = torch.as_tensor(lows, dtype=torch.float32), torch.as_tensor(highs, dtype=torch.float32)
        if lows.shape != highs.shape or lows.ndim != 1 or (lows > highs).any():
            raise InputError("box needs lows <= highs, two vectors of length d_model")
        return cls("box", lows.numel(), lows=lows, highs=highs)

    @classmethod
    def hidden(cls, points: torch.Tensor) -> Region:
        """The empirical distribution of sampled hidden states, shape (n, d_model), each used once."""
        points = finite_tensor("points", torch.as_tensor(points, dtype=torch.float32))
        return cls("hidden", points.shape[1], points=points)

    def sample(self, count: int, generator: torch.Generator, start: int = 0) -> torch.Tensor:
        """``count`` points, shape (count, d_model); ``start`` indexes the points of a hidden region."""
        d = self.d_model
        if self.kind == "ball":  # direction uniform on the sphere, radius r·U^(1/d)
            x = torch.randn(count, d, generator=generator)
            radii = self.radius * torch.rand(count, 1, generator=generator) ** (1.0 / d)
            return x * (radii / x.norm(dim=1, keepdim=True))
        if self.kind == "box":
            return self.lows + (self.highs - self.lows) * torch.rand(count, d, generator=generator)
        return self.points[start:start + count]

    def max_samples(self) -> int | None:
        return None if self.points is None else self.points.shape[0]


def cell_scores(W_U: torch.Tensor, bias: torch.Tensor | None = None, assign: str = "argmax"):
    """(matrix, offset) such that each point's cell is argmax_v (x @ matrix.T + offset)_v.

    argmax cells: offset = b (the logit bias, usually None). Voronoi cells: argmin_v ||x - w_v||^2
    = argmax_v (x·w_v - ||w_v||^2 / 2), so offset = -||w_v||^2/2 (any logit bias is ignored).
    """
    one_of("assign", assign, ASSIGNMENTS)
    W = W_U.detach().float()
    if assign == "voronoi":
        return W, -0.5 * W.square().sum(1)
    return W, None if bias is None else bias.detach().float()


def assign_cells(x: torch.Tensor, W_U: torch.Tensor, bias: torch.Tensor | None = None,
                 assign: str = "argmax") -> torch.Tensor:
    """Token whose cell holds each row of x (shape (n, d)), a LongTensor of shape (n,).

    >>> W = torch.tensor([[1.0, 0.0], [3.0, 0.0]])
    >>> x = torch.tensor([[1.0, 0.0]])
    >>> assign_cells(x, W, assign="argmax").item(), assign_cells(x, W, assign="voronoi").item()
    (1, 0)
    """
    return _cell_of(x, *cell_scores(W_U, bias, assign))


def _cell_of(x: torch.Tensor, W: torch.Tensor, offset: torch.Tensor | None) -> torch.Tensor:
    """argmax_v (x @ W.T + offset)_v for each row of x (the scores of :func:`cell_scores`)."""
    scores = x @ W.T  # (n, V)
    return (scores if offset is None else scores + offset).argmax(1)


@dataclass
class CellShares:
    """A Monte-Carlo estimate of the decoder-cell shares and of H.

    Attributes
    ----------
    counts : hits per token, shape (vocab_size,), summing to ``samples``.
    samples : N.
    region, assign : where points were drawn and which cells.
    entropy : H = -mean ln p_v over tokens with p_v > 0 (nats).
    zero_count_fraction : tokens with no hit / vocab_size.
    band : Ĥ ± z·sd over bootstrap resamples: the sampling noise at this N (:func:`bootstrap_band`).
    resample_bias : mean H of the resamples minus Ĥ; strongly negative when H is unresolved.
    history : H and zero-count fraction at N, N/2, N/4, ... (ascending N), how H moves with N.
    """

    counts: np.ndarray = field(repr=False)
    samples: int
    region: str
    assign: str
    entropy: float
    zero_count_fraction: float
    band: tuple[float, float]
    resample_bias: float
    history: list[dict] = field(repr=False)

    @property
    def vocab_size(self) -> int:
        return int(self.counts.size)

    @property
    def log_samples(self) -> float:
        """ln N, the resolution floor: the smallest nonzero share is 1/N."""
        return math.log(self.samples)

    @property
    def shares(self) -> np.ndarray:
        return self.counts / self.samples

    def summary(self) -> dict:
        return {"samples": self.samples, "region": self.region, "assign": self.assign,
                "vocab_size": self.vocab_size, "entropy_H": self.entropy, "entropy_band": list(self.band),
                "resample_bias": self.resample_bias,
                "log_vocab": math.log(self.vocab_size), "zero_count_fraction": self.zero_count_fraction,
                "log_samples": self.log_samples, "history": self.history}


def bootstrap_band(counts, *, replicates: int = BOOTSTRAP_REPLICATES, level: float = BAND_LEVEL,
                   seed: int = 0) -> tuple[float, float, float]:
    """Sampling band of H and the resampling bias: (low, high, bias).

    H is recomputed on ``replicates`` resamples of N points (multinomial with the observed shares).
    The band is :math:`\\hat H \\pm z\\,\\mathrm{sd}(H^*)`, centred on the estimate: the sampling noise
    at this N. ``bias`` = mean(H*) - Ĥ shows what resampling alone does to H. A percentile interval
    would mix the two: when most tokens are unseen, resampling drops the tokens seen once and the
    whole percentile interval falls below Ĥ. A large negative bias means H is far from resolved
    (see :attr:`CellShares.history`). Resampling equal counts can only raise H (Jensen):

    >>> lo, hi, bias = bootstrap_band(np.full(100, 50))
    >>> lo < math.log(100) < hi and bias > 0
    True
    """
    from scipy import stats

    counts = np.asarray(counts, dtype=np.int64)
    in_range("level", level, 0, 1)
    rng = np.random.default_rng(seed)
    n = int(counts.sum())
    draws = rng.multinomial(n, counts / n, size=replicates)  # (replicates, V)
    values = np.array([bounds.cell_entropy(c).entropy for c in draws])
    estimate = bounds.cell_entropy(counts).entropy
    half = float(stats.norm.ppf(0.5 + level / 2) * values.std(ddof=1))
    return estimate - half, estimate + half, float(values.mean() - estimate)


def _checkpoints(samples: int) -> list[int]:
    """N, N/2, N/4, ... down to MIN_CHECKPOINT (ascending)."""
    points, n = [], samples
    while n >= MIN_CHECKPOINT or not points:
        points.append(n)
        n //= 2
    return sorted(points)


def _entry(counts: np.ndarray, n: int) -> dict:
    e = bounds.cell_entropy(counts)
    return {"samples": n, "entropy_H": e.entropy, "zero_count_fraction": e.zero_fraction,
            "log_samples": math.log(n)}


def estimate_cells(W_U: torch.Tensor, region: Region, config: CellsConfig | None = None, *,
                   bias: torch.Tensor | None = None, progress: bool = False) -> CellShares:
    """Monte-Carlo cell shares of the rows of W_U (shape (V, d)) inside ``region``.

    Points are drawn in chunks of ``config.batch_size`` from ``torch.Generator().manual_seed(seed)``,
    so memory stays at one (batch, V) score block whatever N is. A hidden region uses each of its
    points once (N = min(samples, number of points)).
    """
    from tqdm import tqdm

    config = config or CellsConfig(region=region.kind)
    if W_U.shape[1] != region.d_model:
        raise InputError(f"region has d_model={region.d_model}, W_U has {W_U.shape[1]} columns")
    n_total = config.samples if region.max_samples() is None else min(config.samples, region.max_samples())
    W, offset = cell_scores(W_U, bias, config.assign)
    generator = torch.Generator().manual_seed(config.seed)
    counts = torch.zeros(W.shape[0], dtype=torch.int64)
    buffer = torch.empty(min(config.batch_size, n_total), W.shape[0], device=W.device)  # (batch, V), reused
    history, done = [], 0
    with tqdm(total=n_total, disable=not progress, desc=f"{config.assign} cells", unit="pt") as bar:
        for checkpoint in _checkpoints(n_total):
            while done < checkpoint:
                count = min(config.batch_size, checkpoint - done)
                x = region.sample(count, generator, start=done).to(W.device)  # (count, d)
                scores = torch.mm(x, W.T, out=buffer[:count])  # (count, V), no new allocation
                if offset is not None:
                    scores += offset
                counts += torch.bincount(scores.argmax(1).cpu(), minlength=W.shape[0])
                done += count
                bar.update(count)
            history.append(_entry(counts.numpy(), done))
    counts = counts.numpy()
    e = bounds.cell_entropy(counts)
    low, high, bias = bootstrap_band(counts, seed=config.seed)
    return CellShares(counts=counts, samples=n_total, region=region.kind, assign=config.assign,
                      entropy=e.entropy, zero_count_fraction=e.zero_fraction,
                      band=(low, high), resample_bias=bias, history=history)


@dataclass(frozen=True)
class ConvolutionEstimate:
    """The published estimate of H: slope of the median of k-fold sums of ln p_v against k."""

    entropy: float
    folds: np.ndarray
    medians: np.ndarray


def convolution_entropy(shares, *, max_fold: int = CONV_MAX_FOLD,
                        bin_width: float = CONV_BIN) -> ConvolutionEstimate:
    """The published pipeline's H: fit the median of the k-fold log-convolution linearly in k.

    For a sequence of k tokens drawn uniformly from V', :math:`\\ln P = \\sum_{i\\le k} \\ln p_{v_i}` has
    the k-fold convolution of the distribution of :math:`\\ln p_v` (histogram with ``bin_width``
    nats, convolved by FFT). Its median grows like :math:`k\\,\\mathbb{E}[\\ln p_v]` plus a constant,
    so minus the fitted slope estimates H; it equals the closed form
    :func:`accessibility.bounds.cell_entropy` up to the binning (about 1e-2 nats), which makes it a
    cross-check, not a better estimator.

    >>> p = np.array([0.5, 0.25, 0.125, 0.125])
    >>> abs(convolution_entropy(p).entropy - bounds.cell_entropy(p).entropy) < 0.02
    True
    """
    p = np.asarray(shares, dtype=float)
    logp = np.log(p[p > 0] / p.sum())
    at_least("max_fold", max_fold, 2, integer=True)
    low = logp.min()
    hist = np.bincount(np.round((logp - low) / bin_width).astype(int)) / logp.size  # pmf on a grid
    size = 1 << int(np.ceil(np.log2(max_fold * hist.size)))
    spectrum = np.fft.rfft(hist, size)
    folds = np.arange(1, max_fold + 1)
    medians = []
    for k in folds:
        pmf = np.clip(np.fft.irfft(spectrum ** k, size), 0, None)
        cdf = np.cumsum(pmf) / pmf.sum()
        medians.append(k * low + bin_width * float(np.searchsorted(cdf, 0.5)))
    slope = np.polyfit(folds, medians, 1)[0]
    return ConvolutionEstimate(entropy=float(-slope), folds=folds, medians=np.array(medians))


#: Marks that byte-level and SentencePiece tokenizers put in a token's text for a space or a newline.
SPACE_MARKS = ("Ġ", "Ċ", "▁")


def is_punctuation(token: str) -> bool:
    """Whether a token's text is made only of whitespace and punctuation (no letter or digit), its
    tokenizer's space and newline marks (:data:`SPACE_MARKS`) read as whitespace.

    >>> [is_punctuation(t) for t in ("Ġ", "Ġ(", "Ċ", ",", "▁...")]
    [True, True, True, True, True]
    >>> [is_punctuation(t) for t in ("Ġand", "Ġsetattr", "7", "Ġé")]
    [False, False, False, False]
    """
    for mark in SPACE_MARKS:
        token = token.replace(mark, " ")
    return not any(ch.isalnum() for ch in token)


def top_cells(shares, tokenizer=None, k: int = 10):
    """The k tokens with the largest shares: id, text (when a tokenizer is given), share, share·|V|."""
    import pandas as pd

    p = np.asarray(shares, dtype=float)
    ids = np.argsort(-p, kind="stable")[:k]
    text = [tokenizer.convert_ids_to_tokens(int(i)) if tokenizer is not None else str(i) for i in ids]
    return pd.DataFrame({"token_id": ids, "token": text, "share": p[ids], "times_uniform": p[ids] * p.size})


@dataclass(frozen=True)
class Partition2D:
    """Cells on a plane through ``center`` spanned by two orthonormal ``axes``: a (res, res) token grid."""

    tokens: np.ndarray  # (resolution, resolution), tokens[i, j] at (a[j], b[i])
    a: np.ndarray
    b: np.ndarray
    assign: str


def principal_plane(h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Mean, two leading principal axes (shape (2, d)) and the largest |projection| of the samples h.

    The axes are those of :func:`accessibility.geometry.ellipsoid_axes` (one SVD of the centred samples).
    """
    from accessibility.geometry import ellipsoid_axes

    h = h.double()
    center = h.mean(0)
    axes = torch.from_numpy(ellipsoid_axes(h)[0][:2])
    extent = float(((h - center) @ axes.T).abs().max())
    return center.float(), axes.float(), extent


def partition_2d(W_U: torch.Tensor, center: torch.Tensor, axes: torch.Tensor, extent: float, *,
                 bias: torch.Tensor | None = None, assign: str = "argmax",
                 resolution: int = 200) -> Partition2D:
    """Token of every point of a ``resolution``² grid on the plane center + a·axes[0] + b·axes[1],
    |a|, |b| <= extent."""
    grid = torch.linspace(-extent, extent, resolution)
    B, A = torch.meshgrid(grid, grid, indexing="ij")
    x = center + A.reshape(-1, 1) * axes[0] + B.reshape(-1, 1) * axes[1]  # (res², d)
    W, offset = cell_scores(W_U, bias, assign)                             # once, not per chunk
    tokens = torch.cat([_cell_of(chunk, W, offset) for chunk in x.split(DEFAULT_BATCH)])
    return Partition2D(tokens=tokens.reshape(resolution, resolution).numpy(), a=grid.numpy(), b=grid.numpy(),
                       assign=assign)
