"""The fp16 autocast emulation against torch's own CPU float16 autocast: the same losses and gradients
on forward and backward passes of real models, overflow to inf and gradient underflow where real
fp16 has them, and a non-finite loss followed through the cramming loop."""

import pytest
import torch

from accessibility import cramming as cr
from accessibility.autocast import fp16_autocast
from accessibility import models
from accessibility.models import load_model, torch_threads
from accessibility.targets import make_targets

#: Loss and gradient agreement of the emulation with CPU fp16 autocast. Measured on [mem] at 1x and
#: 30x the init scale: loss within 1.4e-3 relative and gradient cosine >= 0.994 (Gemma-3-270m, whose
#: fp32 gradient is at cosine 0.9965 from the fp16 one), >= 0.9999 on SmolLM2-135M and the toy.
LOSS_RTOL, GRAD_COS = 3e-3, 0.99


@pytest.fixture(scope="module", autouse=True)
def two_threads():
    with torch_threads(2):
        yield


def _cpu_fp16(dtype, device):
    return torch.autocast("cpu", dtype=torch.float16)


def _pass(lm, mem, targets, dtype, monkeypatch=None, scale=1.0):
    """Per-row loss and the gradient of ``scale`` times their sum, of one teacher-forced pass."""
    mem = mem.clone().requires_grad_(True)
    n = targets.shape[1]
    loss, _, _ = cr.teacher_forced(lm, mem, targets, torch.full((len(mem),), n), None, 1, dtype)
    (loss.sum() * scale).backward()
    return loss.detach(), mem.grad


def _both(lm, mem, targets, monkeypatch, scale=1.0):
    emulated = _pass(lm, mem, targets, "float16", scale=scale)
    with monkeypatch.context() as patch:
        patch.setattr(cr, "autocast", _cpu_fp16)
        real = _pass(lm, mem, targets, "float16", scale=scale)
    return emulated, real


def _cos(a, b):
    return float((a * b).sum() / (a.norm() * b.norm()))


MODELS = [
    "toy",
    pytest.param("smollm2-135m", marks=pytest.mark.smollm2),
    pytest.param("gemma-3-270m", marks=pytest.mark.skipif(not models.gemma_wheel_installed(),
                                                          reason="needs the Gemma-3-270m extra")),
]


@pytest.mark.parametrize("name", MODELS)
def test_emulation_matches_cpu_fp16_autocast(name, monkeypatch):
    """Rows of [mem] at 1x and 30x the init scale, one forward+backward pass each way."""
    lm = load_model(name)
    targets = make_targets(lm, "random-tokens", 2, 14, seed=3)
    std = cr.embedding_std(lm)
    mem = torch.randn(2, 1, lm.info.d_model, generator=torch.Generator().manual_seed(1)) * std
    mem[1] *= 30
    (loss_e, grad_e), (loss_r, grad_r) = _both(lm, mem, targets, monkeypatch)
    assert torch.isfinite(loss_e).all() and torch.isfinite(loss_r).all()
    torch.testing.assert_close(loss_e, loss_r, rtol=LOSS_RTOL, atol=0)
    for row in range(2):
        assert _cos(grad_e[row], grad_r[row]) >= GRAD_COS


def test_overflow_and_gradient_underflow_as_in_fp16(monkeypatch):
    """Where real fp16 overflows (a linear output beyond 65504) the emulated loss is not finite
    either; where its gradients underflow to 0 (a loss scaled by 2^-30, no gradient scaler), the
    emulated ones do in the same proportion; fp32 does neither."""
    lm = load_model("toy")
    targets = make_targets(lm, "random-tokens", 2, 10, seed=4)
    mem = torch.randn(2, 1, lm.info.d_model, generator=torch.Generator().manual_seed(2))
    (_, grad_e), (_, grad_r) = _both(lm, mem, targets, monkeypatch, scale=2.0 ** -30)
    _, grad_32 = _pass(lm, mem, targets, "float32", scale=2.0 ** -30)
    zeros = [float((g == 0).float().mean()) for g in (grad_e, grad_r, grad_32)]
    assert zeros[1] > 0.5 and abs(zeros[0] - zeros[1]) < 0.05 and zeros[2] == 0
    big = load_model("toy")
    with torch.no_grad():
        big.model.gpt_neox.layers[0].mlp.dense_4h_to_h.weight.mul_(1e5)
    (loss_e, _), (loss_r, _) = _both(big, mem, targets, monkeypatch)
    assert not torch.isfinite(loss_r).any() and not torch.isfinite(loss_e).any()
    assert torch.isfinite(_pass(big, mem, targets, "float32")[0]).all()


def test_a_nonfinite_loss_goes_on_through_the_loop_and_is_counted():
    """As in the published loop (no scaler, no skipped step): a non-finite loss reaches AdamW, the
    [mem] turns NaN, the probe ends on patience, and the record counts the non-finite steps."""
    big = load_model("toy")
    with torch.no_grad():
        big.model.gpt_neox.layers[0].mlp.dense_4h_to_h.weight.mul_(1e5)
    targets = make_targets(big, "random-tokens", 2, 6, seed=5)
    cfg = cr.CramConfig.quick(autocast_dtype="float16", max_steps=30, patience=10).fixed(6)
    with torch_threads(1):
        results = cr.cram(big, targets, 1, cfg)
    for r in results:
        assert r.nonfinite > 0 and r.capacity < 6 and r.probes[0][3] == "patience"
        assert r.nonfinite == r.steps + 1                           # every pass, the last one included
    with torch_threads(1):
        fine = cr.cram(load_model("toy"), targets, 1, cfg)
    assert all(r.nonfinite == 0 for r in fine)


def test_the_emulation_leaves_regions_without_autocast_in_fp32():
    x, w = torch.tensor([[300.0, 300.0]]), torch.tensor([[200.0, 200.0]])
    with fp16_autocast():
        assert torch.isinf(x @ w.T).all()
        with torch.autocast("cpu", enabled=False):
            assert (x @ w.T).item() == 120000.0
