"""Decoder cells: shares, scale (in)variance, entropy bounds, the convolution cross-check, the 2-D picture."""

import math

import numpy as np
import pytest
import torch

from accessibility import bounds, cells

GEN = torch.Generator().manual_seed(0)
# Rows of very different norms: argmax and Voronoi cells differ.
W_UNEQUAL = torch.tensor([[3.0, 0.0, 0.0], [0.0, 1.0, 0.0], [-0.5, -0.5, 0.2], [0.1, 0.1, 2.0],
                          [0.0, -2.0, -1.0]])


def _estimate(W, region, assign="argmax", samples=20_000, seed=0):
    config = cells.CellsConfig(samples=samples, region=region.kind, assign=assign, seed=seed, batch_size=4096)
    return cells.estimate_cells(W, region, config)


def test_assignment_matches_brute_force():
    x = torch.randn(300, 3, generator=GEN)
    assert torch.equal(cells.assign_cells(x, W_UNEQUAL), (x @ W_UNEQUAL.T).argmax(1))
    voronoi = cells.assign_cells(x, W_UNEQUAL, assign="voronoi")
    assert torch.equal(voronoi, torch.cdist(x, W_UNEQUAL).argmin(1))
    bias = torch.tensor([0.0, 5.0, 0.0, 0.0, 0.0])
    assert torch.equal(cells.assign_cells(x, W_UNEQUAL, bias), (x @ W_UNEQUAL.T + bias).argmax(1))


@pytest.mark.parametrize("region", [cells.Region.ball(3, 2.0), cells.Region.box([-1, -2, 0], [1, 1, 3])])
def test_shares_sum_to_one_and_history_ends_at_n(region):
    est = _estimate(W_UNEQUAL, region, samples=5000)
    assert est.counts.sum() == est.samples == 5000 and est.shares.sum() == pytest.approx(1.0)
    assert [h["samples"] for h in est.history] == sorted(h["samples"] for h in est.history)
    assert est.history[-1]["entropy_H"] == est.entropy and est.log_samples == math.log(5000)


def test_argmax_shares_are_scale_invariant_in_a_centred_ball_voronoi_are_not():
    small, large = cells.Region.ball(3, 2.0 ** -6), cells.Region.ball(3, 8.0)  # powers of two: exact scaling
    assert np.array_equal(_estimate(W_UNEQUAL, small).counts, _estimate(W_UNEQUAL, large).counts)
    near, far = _estimate(W_UNEQUAL, small, "voronoi"), _estimate(W_UNEQUAL, large, "voronoi")
    assert np.abs(near.shares - far.shares).max() > 0.2
    # near the origin the row of smallest norm (index 2) owns almost everything
    assert near.shares.argmax() == int(W_UNEQUAL.norm(dim=1).argmin()) and near.shares.max() > 0.9


def test_entropy_at_least_log_seen_tokens_with_equality_for_equal_cells():
    W = torch.cat([torch.eye(4), -torch.eye(4)])  # cross-polytope: 8 congruent argmax cells
    est = _estimate(W, cells.Region.ball(4, 1.0), samples=50_000)
    assert est.zero_count_fraction == 0
    assert math.log(8) <= est.entropy < math.log(8) + 0.005
    assert bounds.cell_entropy(np.full(8, 0.125)).entropy == pytest.approx(math.log(8), rel=1e-15)
    skewed = _estimate(W_UNEQUAL, cells.Region.box([-1, -2, 0], [1, 1, 3]))
    seen = int((skewed.counts > 0).sum())
    assert skewed.entropy > math.log(seen) + 0.05  # unequal cells: strictly above
    lo, hi = skewed.band
    assert lo < skewed.entropy < hi and hi - lo < 0.2


def test_hidden_region_uses_each_point_once():
    points = torch.randn(700, 3, generator=GEN)
    est = _estimate(W_UNEQUAL, cells.Region.hidden(points), samples=10_000)
    assert est.samples == 700
    assert np.array_equal(est.counts, np.bincount((points @ W_UNEQUAL.T).argmax(1).numpy(), minlength=5))


def test_ball_samples_are_uniform_in_the_ball():
    x = cells.Region.ball(3, 2.0).sample(40_000, torch.Generator().manual_seed(3))
    norms = x.norm(dim=1)
    assert float(norms.max()) <= 2.0 + 1e-6
    assert float((norms < 1.0).float().mean()) == pytest.approx(1 / 8, abs=0.01)  # volume ratio (1/2)^3


def test_convolution_estimate_equals_the_closed_form():
    rng = np.random.default_rng(0)
    shares = np.exp(rng.normal(0.0, 2.0, size=5000))
    conv = cells.convolution_entropy(shares)
    assert conv.entropy == pytest.approx(bounds.cell_entropy(shares).entropy, abs=0.02)
    assert np.all(np.diff(conv.medians) < 0)  # sums of ln p < 0 decrease with k


def test_partition_2d_matches_pointwise_assignment():
    center, axes = torch.zeros(3), torch.eye(3)[:2]
    for assign in cells.ASSIGNMENTS:
        part = cells.partition_2d(W_UNEQUAL, center, axes, 2.0, assign=assign, resolution=21)
        i, j = 5, 17
        x = center + part.a[j] * axes[0] + part.b[i] * axes[1]
        assert part.tokens[i, j] == cells.assign_cells(x[None], W_UNEQUAL, assign=assign).item()
    argmax = cells.partition_2d(W_UNEQUAL, center, axes, 2.0, resolution=21).tokens
    voronoi = cells.partition_2d(W_UNEQUAL, center, axes, 2.0, assign="voronoi", resolution=21).tokens
    assert (argmax != voronoi).any()


def test_top_cells_are_sorted():
    top = cells.top_cells(np.array([0.1, 0.5, 0.0, 0.4]), k=2)
    assert top["token_id"].tolist() == [1, 3] and top["times_uniform"].tolist() == [2.0, 1.6]


def test_config_validation():
    from accessibility.checks import InputError

    with pytest.raises(InputError, match="region"):
        cells.CellsConfig(region="sphere")
    with pytest.raises(InputError, match="d_model"):
        cells.estimate_cells(W_UNEQUAL, cells.Region.ball(4, 1.0))


def test_principal_plane_is_the_leading_svd_plane():
    h = torch.randn(50, 6, generator=torch.Generator().manual_seed(0)) * torch.tensor([5.0, 3, 1, 1, 1, 1])
    center, axes, extent = cells.principal_plane(h)
    x = h.double().numpy() - h.double().numpy().mean(0)
    vt = np.linalg.svd(x, full_matrices=False)[2][:2]
    assert np.allclose(np.abs(axes.double().numpy() @ vt.T), np.eye(2), atol=1e-5)    # same axes, up to sign
    assert np.allclose(center.numpy(), h.mean(0).numpy(), atol=1e-6)
    assert extent == pytest.approx(np.abs(x @ axes.double().numpy().T).max(), rel=1e-6)
