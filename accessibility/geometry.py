"""The support of the final hidden states: radii, box, angles and principal axes, measured live.

Theorem 4.5 counts the distinguishable vectors of the region where the vector that the unembedding
multiplies can lie. This module samples that vector, the **final-layer, post-final-norm,
last-position hidden state** h of random prompts, and measures the region:

* radii :math:`r_\\infty \\le r_2 \\le r_1` (largest L∞, L2, L1 norm over the samples);
* the box: per-coordinate lows, highs and widths :math:`w_i = \\max_j h_{ji} - \\min_j h_{ji}`;
* the mean and minimum cosine over all pairs of samples, exact, in chunks (memory linear in the
  number of samples, unlike one giant Gram matrix);
* the half-angle of the enclosing cone around the mean direction (a true containment) and the
  published convention arccos(min cos)/2 (:func:`accessibility.bounds.cone_half_angle`);
* principal axes and the semi-axes of the enclosing ellipsoid of covariance shape, and its
  half-widths along the coordinates (its bounding box);

for each prompt length ℓ, and for all lengths pooled. :func:`refined_slopes` turns them into the
slopes C of Corollary 4.6 for the ball, box, cone and ellipsoid supports through
:mod:`accessibility.bounds`, for any precision convention of :mod:`accessibility.precision`.

Every statistic is a sample estimate: the support of the model is at least as large, so radii, widths
and angles are lower bounds that grow with the number of samples and with ℓ.
:func:`sample_size_trend` recomputes the refined slopes on nested halves of the samples, to show which
of them still move with the sample count.

:meth:`SupportStats.norm_fingerprint` flags the signature of an untrained final norm: an RMSNorm (or a
LayerNorm without bias) whose gains all equal c maps every vector to L2 norm c·√d, whatever the
prompt; :func:`measure_geometry` warns (:class:`UntrainedNormWarning`) when a loaded checkpoint shows it.

Compared with the published pipeline: only real token ids are drawn (no untrained padding rows), the
BOS token is placed where the model's tokenizer puts it, ℓ never exceeds the context window, every
batch is checked for non-finite values (fp16 overflow) and h is checked to be what the unembedding
multiplies (logits = h W_U^T + b).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import torch

from accessibility import bounds
from accessibility.checks import InputError, at_least, finite_tensor, positive, seed
from accessibility.precision import EXACT

#: Default prompt lengths ℓ of the command line: ``--samples 256`` on SmolLM2-135M takes about a
#: minute on two CPU cores.
DEFAULT_LENGTHS = (4, 16, 64)
#: The published protocol: ℓ = 4, 8, ..., 4096 with 10 000 prompts per length (in fp16).
PAPER_LENGTHS = tuple(4 * 2 ** k for k in range(11))
PAPER_SAMPLES = 10_000
#: Rows per block of the pairwise-cosine loop: the Gram block is (COSINE_CHUNK, samples), 4 bytes
#: per entry, so 10^5 samples need 0.4 GB at most.
COSINE_CHUNK = 1024
#: Relative tolerance of the check logits == h W_U^T + b (fp32 summation order differs; 1e-6 seen).
UNEMBEDDING_RTOL = 1e-4
#: Singular values below this fraction of the largest count as zero (ellipsoid rank).
RANK_RTOL = 1e-6
#: Largest relative spread (max - min) / max of the post-norm L2 norms that counts as "every norm is
#: c·√d" (:meth:`SupportStats.norm_fingerprint`). A uniform gain c leaves two sources of spread: the
#: norm's ε, which scales ‖h‖ by (1 + ε/ms)^(-1/2) for an input of mean square ms, a relative
#: ε/(2·ms) that matters only where ms comes near ε (1e-6 to 1e-5; residual streams are far
#: larger), and rounding of h, at most the unit roundoff (2^-24 fp32, 2^-11 fp16, 2^-9 ≈ 2e-3
#: bf16). 1e-2 covers both with a margin of 5 in bf16; trained final norms spread the L2 norms far
#: more (measured over random prompts: see the geometry chapter).
FINGERPRINT_RTOL = 1e-2
#: The smallest number of samples per length at which :func:`sample_size_trend` still evaluates.
TREND_MIN_PER_LENGTH = 8
#: A refined slope that changed by less than this fraction over the last doubling of the sample
#: count is called settled (a heuristic: sample statistics only grow, and may grow again later).
SETTLED_RTOL = 0.02
#: The columns of :meth:`SupportStats.summary` after ``length``, in the order of :func:`growth_table`.
STATS_COLUMNS = ("samples", "r_inf", "r_2", "r_1", "r_2_min", "mean_cos", "min_cos", "cone_angle",
                 "published_cone_angle", "mean_width", "max_width", "ellipsoid_rank")
#: The per-coordinate arrays of :class:`SupportStats` that a saved run keeps, with their dtypes (the
#: box of the float32 hidden states; the ellipsoid, computed in float64): JSON holds both exactly.
SUPPORT_ARRAYS = {"lows": np.float32, "highs": np.float32, "semi_axes": np.float64,
                  "ellipsoid_half_widths": np.float64}


class UntrainedNormWarning(UserWarning):
    """Every sampled post-norm L2 norm is c·√d for one c: the final norm looks untrained."""


@dataclass(frozen=True)
class GeometryConfig:
    """What to sample: prompt lengths, prompts per length, batch size, seed, BOS placement.

    ``lengths`` are numbers of random tokens ℓ; the BOS token, when the model expects one, comes in
    front and the total must fit the context window.
    """

    lengths: tuple[int, ...] = DEFAULT_LENGTHS
    samples: int = 256
    batch_size: int = 32
    seed: int = 0
    add_bos: bool = True

    def __post_init__(self):
        object.__setattr__(self, "lengths", tuple(int(x) for x in self.lengths))
        if not self.lengths:
            raise InputError("lengths must list at least one prompt length", "lengths")
        at_least("lengths", np.array(self.lengths), 1, integer=True)
        at_least("samples", self.samples, 2, integer=True)
        at_least("batch_size", self.batch_size, 1, integer=True)
        seed("seed", self.seed)

    @classmethod
    def paper(cls) -> GeometryConfig:
        """The published protocol: ℓ = 4 ... 4096, 10 000 prompts each (a GPU job)."""
        return cls(lengths=PAPER_LENGTHS, samples=PAPER_SAMPLES, batch_size=64)

    @classmethod
    def quick(cls) -> GeometryConfig:
        """Seconds on a CPU: two short lengths, 64 prompts each."""
        return cls(lengths=(4, 16), samples=64)


def fits_context(info, lengths, add_bos: bool = True) -> tuple[int, ...]:
    """The lengths ℓ that fit the model's context window (with the BOS token, when it has one)."""
    extra = int(add_bos and info.bos_token_id is not None)
    return tuple(ell for ell in lengths if ell + extra <= info.context_length)


def random_prompts(info, length: int, samples: int, *, generator: torch.Generator,
                   add_bos: bool = True) -> torch.Tensor:
    """Prompts of ``length`` token ids drawn uniformly from the real tokens, BOS in front if expected.

    Returns a LongTensor of shape (samples, length) or (samples, length + 1) with BOS.
    """
    at_least("length", length, 1, integer=True)
    if not fits_context(info, [length], add_bos):
        raise InputError(f"length {length} (+ BOS) exceeds the context window of {info.name}: "
                         f"{info.context_length} positions")
    real = torch.as_tensor(info.real_token_ids)
    ids = real[torch.randint(len(real), (samples, length), generator=generator)]  # (samples, length)
    if add_bos and info.bos_token_id is not None:
        ids = torch.cat([torch.full((samples, 1), info.bos_token_id), ids], dim=1)
    return ids


def last_hidden(loaded, ids: torch.Tensor) -> torch.Tensor:
    """Final-layer, post-final-norm hidden state at the last position, shape (batch, d_model).

    Runs the model's base (transformer blocks and final norm), not the unembedding.
    """
    with torch.inference_mode():
        out = loaded.model.base_model(input_ids=ids.to(loaded.device))
    return out.last_hidden_state[:, -1]  # (batch, d_model)


def unembedding_error(loaded, ids: torch.Tensor) -> float:
    """Largest relative gap between the model's last logits and h W_U^T + b (0 when h is the right vector).

    .. math:: \\max |\\text{logits} - (h W_U^\\top + b)| \\,/\\, \\max |\\text{logits}|
    """
    with torch.inference_mode():
        try:  # logits of the last position only (a (batch, ℓ, V) tensor can take gigabytes)
            out = loaded.model(input_ids=ids.to(loaded.device), logits_to_keep=1)
        except TypeError:  # models without logits_to_keep
            out = loaded.model(input_ids=ids.to(loaded.device))
        logits = out.logits[:, -1].float()  # (batch, V)
        h = last_hidden(loaded, ids).float()
        mine = h @ loaded.unembedding().float().T
        bias = loaded.unembedding_bias()
        mine = mine if bias is None else mine + bias.float()
    return float((logits - mine).abs().max() / logits.abs().max().clamp_min(1e-30))


def sample_hidden(loaded, length: int, samples: int, *, generator: torch.Generator,
                  batch_size: int = 32, add_bos: bool = True, verify: bool = True,
                  progress: bool = False) -> torch.Tensor:
    """Final hidden states of ``samples`` random prompts of ``length`` tokens, shape (samples, d_model).

    Batched; every batch is checked for NaN/inf; with ``verify`` the first batch is also checked to
    be what the unembedding multiplies (:func:`unembedding_error`), which fails for models that
    post-process logits (soft-capping). Returned in float32 on the CPU.
    """
    from tqdm import tqdm

    ids = random_prompts(loaded.info, length, samples, generator=generator, add_bos=add_bos)
    if verify:
        error = unembedding_error(loaded, ids[:min(4, samples)])
        if error > UNEMBEDDING_RTOL:
            raise InputError(f"{loaded.info.name}: logits differ from h @ W_U.T by {error:.2e} "
                             "(relative): its final hidden state is not what the unembedding multiplies")
    out = []
    for start in tqdm(range(0, samples, batch_size), disable=not progress, desc=f"ℓ={length}", leave=False):
        h = last_hidden(loaded, ids[start:start + batch_size])
        out.append(finite_tensor(f"hidden states of {loaded.info.name} at length {length}", h).float().cpu())
    return torch.cat(out)


@dataclass(frozen=True)
class Cosines:
    """Mean and minimum cosine over the n(n-1)/2 pairs of distinct samples (None: not computed)."""

    mean: float | None
    min: float | None


def pairwise_cosines(h: torch.Tensor, chunk: int = COSINE_CHUNK) -> Cosines:
    """Exact mean and minimum pairwise cosine of the rows of h (shape (n, d)), memory O(chunk · n).

    The mean needs no pairs at all: with unit rows :math:`u_j`,

    .. math:: \\sum_{i<j} u_i\\cdot u_j = \\tfrac12\\Big(\\big\\|\\textstyle\\sum_j u_j\\big\\|^2 - n\\Big);

    the minimum scans the upper triangle of the Gram matrix one block of rows at a time.

    >>> c = pairwise_cosines(torch.tensor([[1.0, 0.0], [0.0, 2.0], [-1.0, 0.0]]))
    >>> round(c.mean, 6), c.min
    (-0.333333, -1.0)
    """
    n = h.shape[0]
    at_least("number of samples", n, 2, integer=True)
    u = torch.nn.functional.normalize(h.double(), dim=1)  # (n, d)
    mean = float((u.sum(0).square().sum() - n) / (n * (n - 1)))
    u = u.float()
    low = math.inf
    for start in range(0, n - 1, chunk):
        block = u[start:start + chunk] @ u[start:].T  # (chunk, n - start)
        rows = torch.arange(block.shape[0])[:, None]
        block = block.masked_fill(torch.arange(block.shape[1])[None, :] <= rows, math.inf)
        low = min(low, float(block.min()))
    return Cosines(mean=mean, min=max(-1.0, min(1.0, low)))


def enclosing_cone_angle(h: torch.Tensor) -> float:
    """Half-angle (radians) of the cone around the mean direction that holds every row of h.

    .. math:: \\varphi = \\max_j \\arccos\\big(u_j \\cdot c\\big),\\qquad
              c = \\frac{\\sum_j u_j}{\\|\\sum_j u_j\\|}

    A true containment (unlike arccos(min cos)/2, which is a lower bound for any enclosing cone).
    """
    u = torch.nn.functional.normalize(h.double(), dim=1)
    c = torch.nn.functional.normalize(u.sum(0), dim=0)
    return float(torch.arccos((u @ c).clamp(-1, 1)).max())


def ellipsoid_axes(h: torch.Tensor) -> tuple[np.ndarray, np.ndarray, int]:
    """Principal axes and semi-axes of the smallest ellipsoid of covariance shape holding every row.

    With the centred samples :math:`X = H - \\bar h = U S V^\\top`, the ellipsoid centred at the mean
    with axes V and semi-axes :math:`a_i = S_i \\max_j \\|U_j\\|` holds every sample (its Mahalanobis
    norm is :math:`\\|U_j\\|\\sqrt{n-1}`). Returns (axes (k, d), semi_axes (k,), rank); the
    ellipsoid is flat (rank < d) whenever there are no more samples than dimensions.
    """
    x = h.double() - h.double().mean(0)
    U, S, Vt = torch.linalg.svd(x, full_matrices=False)  # U (n, k), S (k,), Vt (k, d)
    rank = int((S > RANK_RTOL * S[0]).sum()) if S.numel() else 0
    semi = S * U[:, :rank].norm(dim=1).max() if rank else torch.zeros_like(S)
    semi[rank:] = 0.0
    return Vt.numpy(), semi.numpy(), rank


@dataclass(frozen=True)
class SupportStats:
    """Sample statistics of the support at one prompt length (``length`` None: all lengths pooled).

    Radii are maxima of norms over the samples; ``cone_angle`` is the enclosing half-angle around the
    mean direction; ``published_cone_angle`` = arccos(min_cos)/2; ``ellipsoid_rank`` < d_model means
    the ellipsoid is flat (too few samples). ``mean_cos`` and ``min_cos`` are None when the pairwise
    cosines were not computed (``support_stats(..., cosines=False)``). ``r_2_min`` is the smallest L2
    norm of a sample (:meth:`norm_fingerprint`).
    """

    length: int | None
    samples: int
    d_model: int
    r_inf: float
    r_2: float
    r_1: float
    r_2_min: float  # the smallest L2 norm of a sample
    mean_cos: float | None
    min_cos: float | None
    cone_angle: float
    lows: np.ndarray = field(repr=False)
    highs: np.ndarray = field(repr=False)
    semi_axes: np.ndarray = field(repr=False)
    ellipsoid_half_widths: np.ndarray = field(repr=False)  # (d_model,), :func:`bounds.ellipsoid_half_widths`
    ellipsoid_rank: int

    @property
    def widths(self) -> np.ndarray:
        """Per-coordinate box widths w_i = high_i - low_i, shape (d_model,)."""
        return self.highs - self.lows

    @property
    def published_cone_angle(self) -> float | None:
        return None if self.min_cos is None else float(bounds.cone_half_angle(self.min_cos))

    def norm_fingerprint(self, rtol: float = FINGERPRINT_RTOL) -> NormFingerprint:
        """Whether every L2 norm is c·√d for one c, within the relative spread ``rtol``."""
        spread = (self.r_2 - self.r_2_min) / self.r_2 if self.r_2 > 0 else 0.0
        return NormFingerprint(detected=spread <= rtol, gain=self.r_2 / math.sqrt(self.d_model),
                               spread=spread, rtol=rtol, d_model=self.d_model)

    def summary(self) -> dict:
        """Scalar statistics (for tables and JSON): ``length`` and :data:`STATS_COLUMNS`."""
        w = self.widths
        return {"length": self.length, "samples": self.samples, "r_inf": self.r_inf, "r_2": self.r_2,
                "r_1": self.r_1, "r_2_min": self.r_2_min, "mean_cos": self.mean_cos, "min_cos": self.min_cos,
                "cone_angle": self.cone_angle, "published_cone_angle": self.published_cone_angle,
                "mean_width": float(w.mean()), "max_width": float(w.max()),
                "ellipsoid_rank": self.ellipsoid_rank}

    def arrays(self) -> dict:
        """The per-coordinate statistics, each of shape (d_model,) (for JSON: a saved run's ``support``)."""
        return {name: getattr(self, name) for name in SUPPORT_ARRAYS}

    @classmethod
    def from_summary(cls, summary: Mapping) -> SupportStats:
        """The pooled statistics of a saved ``accessibility geometry`` run, from its summary
        (``load_run(...).summary``): its scalars and its ``support`` arrays, stored exactly, so that
        :func:`refined_slopes` gives the run's slopes again, for any precision convention.

        A run saved before the arrays were kept raises :class:`InputError` (its command makes it again).
        """
        support = summary.get("support")
        if support is None:
            raise InputError(f"this geometry run of {summary.get('model')} keeps no per-coordinate arrays "
                             "(saved before they were kept): run its command again")
        arrays = {name: np.asarray(support[name], dtype=dtype) for name, dtype in SUPPORT_ARRAYS.items()}
        scalars = {k: summary[k] for k in ("d_model", "r_inf", "r_2", "r_1", "r_2_min", "mean_cos", "min_cos",
                                           "cone_angle", "ellipsoid_rank")}
        return cls(length=None, samples=sum(s["samples"] for s in summary["per_length"]), **scalars, **arrays)


@dataclass(frozen=True)
class NormFingerprint:
    """The L2 norms of the samples against the untrained-norm fingerprint ‖h‖ = c·√d.

    A final RMSNorm with every gain equal to c gives :math:`\\|h\\|_2 = c\\sqrt d` for every input (a
    LayerNorm without bias too), so its samples all have one L2 norm; trained gains differ per
    coordinate and the norm varies with the prompt. ``detected`` when the relative spread
    (max - min) / max of the norms is at most ``rtol`` (:data:`FINGERPRINT_RTOL`); ``gain`` = c =
    max ‖h‖ / √d.

    >>> found = support_stats(torch.tensor([[2.0, 2.0], [2.0, -2.0], [-2.0, 2.0]])).norm_fingerprint()
    >>> found.detected, round(found.gain, 12)
    (True, 2.0)
    """

    detected: bool
    gain: float
    spread: float
    rtol: float
    d_model: int

    def message(self, name: str) -> str:
        """One line for the user (meaningful when ``detected``)."""
        return (f"{name}: every post-norm L2 norm is {self.gain:.3f}·√{self.d_model} to within "
                f"{self.spread:.1e} (relative; tolerance {self.rtol:g}): the final norm applies one gain "
                f"{self.gain:.3f} to every coordinate, the fingerprint of an untrained norm (random "
                "weights by design, or a checkpoint that did not load)")


def support_stats(h: torch.Tensor, length: int | None = None, chunk: int = COSINE_CHUNK, *,
                  cosines: bool = True) -> SupportStats:
    """Every statistic of :class:`SupportStats` for the samples h, shape (samples, d_model).

    ``cosines=False`` skips the pairwise cosines, O(n²·d) (mean_cos and min_cos are then None); every
    other statistic is O(n·d) or one SVD.

    >>> s = support_stats(torch.tensor([[3.0, -4.0], [1.0, 1.0], [0.0, 2.0]]))
    >>> s.r_inf, s.r_2, s.r_1, s.widths.tolist()
    (4.0, 5.0, 7.0, [3.0, 6.0])
    """
    finite_tensor("hidden states", h)
    h = h.float()
    axes, semi, rank = ellipsoid_axes(h)
    cos = pairwise_cosines(h, chunk) if cosines else Cosines(mean=None, min=None)
    l2 = h.double().norm(dim=1)
    return SupportStats(
        length=length, samples=h.shape[0], d_model=h.shape[1],
        r_inf=float(h.abs().max()), r_2=float(l2.max()), r_1=float(h.abs().sum(1).max()),
        r_2_min=float(l2.min()),
        mean_cos=cos.mean, min_cos=cos.min, cone_angle=enclosing_cone_angle(h),
        lows=h.min(0).values.numpy(), highs=h.max(0).values.numpy(), semi_axes=semi,
        ellipsoid_half_widths=bounds.ellipsoid_half_widths(semi, axes), ellipsoid_rank=rank,
    )


@dataclass
class GeometryResult:
    """Statistics per prompt length and pooled over all lengths, with the hidden states sampled."""

    model: str
    d_model: int
    vocab_size: int
    config: GeometryConfig
    per_length: list[SupportStats]
    pooled: SupportStats
    hidden: dict[int, torch.Tensor] = field(repr=False)  # length -> (samples, d_model)

    def table(self):
        """One row per prompt length (and a last row ``all``): how each statistic grows with ℓ."""
        return growth_table([s.summary() for s in self.per_length], self.pooled.summary())


def growth_table(per_length, pooled: Mapping):
    """One row per prompt length and a last row ``all`` (the pooled statistics), indexed by ℓ: the table
    of :meth:`GeometryResult.table`, also from a saved run (``growth_table(s["per_length"], s)`` for
    its summary s, whose pooled statistics are its top-level ones)."""
    import pandas as pd

    rows = [dict(s) for s in per_length]
    rows.append({**{k: pooled.get(k) for k in STATS_COLUMNS}, "length": "all",
                 "samples": sum(s["samples"] for s in rows)})
    return pd.DataFrame(rows, columns=["length", *STATS_COLUMNS]).set_index("length")


def measure_geometry(loaded, config: GeometryConfig | None = None, *, progress: bool = False,
                     cosines: bool = True) -> GeometryResult:
    """Sample final hidden states at every length of ``config`` and measure their support.

    Lengths beyond the context window raise :class:`InputError` (use :func:`fits_context` first).
    The random prompts come from ``torch.Generator().manual_seed(config.seed)``. ``cosines=False``
    skips the pairwise cosines (see :func:`support_stats`). Warns (:class:`UntrainedNormWarning`) when
    the pooled samples show the untrained-norm fingerprint (:meth:`SupportStats.norm_fingerprint`) and
    the model was loaded from weights; a model built from a config (the toy, ``gemma-3-270m-random``)
    is untrained by construction, so it is not warned about.
    """
    config = config or GeometryConfig()
    generator = torch.Generator().manual_seed(config.seed)
    hidden = {}
    for i, ell in enumerate(config.lengths):
        hidden[ell] = sample_hidden(loaded, ell, config.samples, generator=generator,
                                    batch_size=config.batch_size, add_bos=config.add_bos, verify=i == 0,
                                    progress=progress)
    per_length = [support_stats(h, ell, cosines=cosines) for ell, h in hidden.items()]
    pooled = support_stats(torch.cat(list(hidden.values())), cosines=cosines)
    fingerprint = pooled.norm_fingerprint()
    if fingerprint.detected and loaded.info.source != "config":
        warnings.warn(fingerprint.message(loaded.info.name), UntrainedNormWarning, stacklevel=2)
    return GeometryResult(model=loaded.info.name, d_model=loaded.info.d_model,
                          vocab_size=loaded.info.vocab_size, config=config, per_length=per_length,
                          pooled=pooled, hidden=hidden)


@dataclass(frozen=True)
class RefinedSlopes:
    """Slopes C of Corollary 4.6 for each support (tokens per prompt vector) and their numerators (nats).

    Every numerator counts points pairwise at least ε apart in L∞ (ε the step per coordinate), so they
    compare term by term. ``ellipsoid`` is None when there are too few samples to see its shape
    (samples <= d) or the precision is an exact float count (the ellipsoid bound is a volume argument);
    ``cone_published`` is None when the minimum cosine was not measured.
    """

    precision: str
    denominator: float
    numerators: dict
    ball: float
    box: float
    cone: float
    cone_published: float | None
    ellipsoid: float | None


def refined_slopes(stats: SupportStats, *, vocab_size: int, precision: str = "fp16", eps: float | None = None,
                   entropy: float | None = None) -> RefinedSlopes:
    """Ball, box, cone and ellipsoid slopes from measured statistics, computed by :mod:`accessibility.bounds`.

    .. math:: C_{\\text{support}}
              = \\frac{\\ln P_{\\text{support}}(r, \\varepsilon)}{\\ln|V|\\ \\text{or}\\ H}

    r is the measured L∞ radius (it sets ε = r·u for a relative precision). ``cone`` is the
    norm-consistent bound (:func:`accessibility.bounds.log_cone_bound`: the smaller of the ball count
    and the Euclidean cone count of radius r_2 around the enclosing half-angle; None for an exact
    float count, which is not a metric grid); ``cone_published`` is the published heuristic, the ball
    count plus the log volume fraction of a cone of half-angle arccos(min cos)/2. The
    ellipsoid is the enclosing one of covariance shape (:func:`ellipsoid_axes`), counted with its
    half-widths (:func:`accessibility.bounds.log_ellipsoid_count`). ``entropy`` (the decoder-cell H of
    :mod:`accessibility.cells`) replaces ln|V| when given.
    """
    kw = dict(r=stats.r_inf, precision=precision, eps=eps)
    exact = precision in EXACT
    num = {
        "ball": bounds.log_ball_count(d_model=stats.d_model, **kw),
        "box": bounds.log_box_count(lows=stats.lows.astype(float), highs=stats.highs.astype(float), **kw),
        "cone": (None if exact else bounds.log_cone_bound(d_model=stats.d_model, r2=stats.r_2,
                                                          phi=stats.cone_angle, **kw)),
        "cone_published": (None if stats.min_cos is None
                           else bounds.log_cone_count(d_model=stats.d_model, min_cos=stats.min_cos, **kw)),
        "ellipsoid": (None if exact or stats.samples <= stats.d_model
                      else bounds.log_ellipsoid_count(semi_axes=stats.semi_axes,
                                                      half_widths=stats.ellipsoid_half_widths, **kw)),
    }
    num = {k: (None if v is None else float(v)) for k, v in num.items()}
    if entropy is None:
        denominator = math.log(at_least("vocab_size", vocab_size, 2, integer=True))
    else:
        denominator = float(positive("entropy", entropy))
    slopes = {k: (None if v is None else v / denominator) for k, v in num.items()}
    return RefinedSlopes(precision=precision, denominator=denominator, numerators=num, **slopes)


def sample_size_trend(result: GeometryResult, *, precision: str = "fp16", eps: float | None = None,
                      min_per_length: int = TREND_MIN_PER_LENGTH):
    """Pooled statistics and refined slopes on nested halves of the samples: how they move with the count.

    Row k uses the first ``samples / 2^k`` samples of every length (so the mix of lengths is kept and
    each subset holds the next), down to ``min_per_length`` per length; the last row is all samples.
    Columns: ``pooled_samples``, the slopes ``ball``, ``box``, ``cone``, ``cone_published``,
    ``ellipsoid`` (NaN while samples <= d) and ``r_inf``, ``mean_cos``, ``min_cos``. Radii, widths and
    the cone angle can only grow along the rows; a slope that stops moving is a sign, not a proof, of
    convergence (:func:`doubling_changes`).
    """
    import pandas as pd

    at_least("min_per_length", min_per_length, 2, integer=True)
    per_length = result.config.samples
    counts = []
    while per_length >= min_per_length:
        counts.append(per_length)
        if per_length % 2:
            break
        per_length //= 2
    keys = ("ball", "box", "cone", "cone_published", "ellipsoid")
    rows = []
    for k in sorted(counts):
        stats = support_stats(torch.cat([h[:k] for h in result.hidden.values()]))
        slopes = refined_slopes(stats, vocab_size=result.vocab_size, precision=precision, eps=eps)
        rows.append({"pooled_samples": stats.samples,
                     **{key: getattr(slopes, key) for key in keys},
                     "r_inf": stats.r_inf, "mean_cos": stats.mean_cos, "min_cos": stats.min_cos})
    return pd.DataFrame(rows).set_index("pooled_samples").astype(float)


def doubling_changes(trend):
    """Change of each column of :func:`sample_size_trend` from one row to the next (each a doubling).

    Relative for slopes and ``r_inf`` ((new - old) / old), absolute for the cosines; indexed by the
    larger sample count. A refinement whose last relative change is below :data:`SETTLED_RTOL` in
    absolute value is called settled.
    """
    relative = trend.drop(columns=["mean_cos", "min_cos"])
    out = (relative / relative.shift(1) - 1).join(trend[["mean_cos", "min_cos"]].diff())
    return out.iloc[1:]
