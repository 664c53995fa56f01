"""The copy task: exact data format, model invariants, training, evaluation and the cache."""

import math
import re

import numpy as np
import pytest
import torch
from scipy.stats import binomtest

from accessibility.checks import InputError
from accessibility.copy_models import (ARCHITECTURES, CopyModelConfig, alibi_bias, alibi_slopes,
                                       build_model, state_size)
from accessibility.copy_task import (BOS_ID, EOS_ID, IGNORE, PAD_ID, SEP_ID, SYMBOLS, decode, encode,
                                     eval_batch, packed_batch)
from accessibility.copying import (CopyConfig, CopyEval, clopper_pearson, copy_n50, evaluate, greedy_copy,
                                   load_record, run_copy, saved_summary, teacher_forced, train)
from accessibility.models import torch_threads

TINY = dict(d_model=32, n_layers=1, n_heads=2)
EXAMPLE = re.compile(r"\$([a-z]+)\|\1\.")


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models: one torch thread is many times faster than two on a shared CPU."""
    with torch_threads(1):
        yield


def test_symbols_match_the_spec():
    assert SYMBOLS[:26] == "abcdefghijklmnopqrstuvwxyz" and len(SYMBOLS) == 30
    assert [SYMBOLS[i] for i in (BOS_ID, SEP_ID, EOS_ID, PAD_ID)] == ["$", "|", ".", "*"]
    assert decode(encode("$hello|hello.*")) == "$hello|hello.*"
    with pytest.raises(InputError, match="only use"):
        encode("$Hello")


def _expected_targets(text: str) -> list[int]:
    """Reference mask built from the text alone: after each '|', the copy and the '.' are targets."""
    targets = [IGNORE] * len(text)
    for match in EXAMPLE.finditer(text):
        sep = match.start() + 1 + len(match.group(1))  # index of '|'
        for t in range(sep, match.end() - 1):
            targets[t] = SYMBOLS.index(text[t + 1])
    return targets


def test_eval_examples_are_exact():
    g = torch.Generator().manual_seed(1)
    batch = eval_batch(7, 50, g)
    assert batch.ids.shape == batch.targets.shape == (50, 2 * 7 + 3)
    for ids, targets in zip(batch.ids, batch.targets):
        text = decode(ids)
        assert EXAMPLE.fullmatch(text), text
        assert targets.tolist() == _expected_targets(text)
    assert int((batch.targets != IGNORE).sum()) == 50 * (7 + 1)  # the copy and the EOS, nothing else


def test_packed_rows_are_exact():
    g = torch.Generator().manual_seed(2)
    batch = packed_batch(20, 64, (3, 9), g)
    lengths = []
    for ids, targets in zip(batch.ids, batch.targets):
        text = decode(ids)
        assert re.fullmatch(r"(\$([a-z]+)\|\2\.)+\**", text), text
        assert targets.tolist() == _expected_targets(text)
        lengths += [len(m.group(1)) for m in EXAMPLE.finditer(text)]
        assert text.count("*") < 2 * 9 + 3  # a row is closed only when the next example does not fit
    assert min(lengths) >= 3 and max(lengths) <= 9 and len(set(lengths)) > 4


def test_data_is_reproducible_from_the_generator():
    a = packed_batch(4, 64, (3, 9), torch.Generator().manual_seed(5))
    b = packed_batch(4, 64, (3, 9), torch.Generator().manual_seed(5))
    c = packed_batch(4, 64, (3, 9), torch.Generator().manual_seed(6))
    assert torch.equal(a.ids, b.ids) and not torch.equal(a.ids, c.ids)


def test_alibi_bias_is_the_published_formula():
    H, T = 4, 6
    bias = alibi_bias(H, T)[0]
    for h, m in enumerate(alibi_slopes(H).tolist()):
        assert m == 2.0 ** (-8 * (h + 1) / H)
        for i in range(T):
            for j in range(T):
                assert bias[h, i, j] == (-m * (i - j) if j <= i else -math.inf)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_every_model_is_causal(arch):
    model = build_model(CopyModelConfig(arch=arch, **TINY), seed=0).eval()
    ids = torch.randint(30, (2, 12), generator=torch.Generator().manual_seed(0))
    changed = ids.clone()
    changed[:, 8] = (ids[:, 8] + 1) % 30
    with torch.no_grad():
        a, b = model(ids), model(changed)
    assert torch.allclose(a[:, :8], b[:, :8], atol=1e-6)
    assert not torch.allclose(a[:, 8:], b[:, 8:], atol=1e-4)


@pytest.mark.parametrize("arch, blind", [("nope", True), ("rope", False), ("alibi", False)])
def test_only_nope_ignores_the_order_of_the_prefix(arch, blind):
    """Without positions, one causal layer is permutation invariant over earlier keys: the last logits
    cannot see their order (with more layers causality itself leaks positions)."""
    model = build_model(CopyModelConfig(arch=arch, **TINY), seed=0).eval()
    ids = torch.tensor([[26, 0, 1, 2, 3, 4, 5, 27]])
    shuffled = torch.tensor([[26, 3, 5, 0, 2, 1, 4, 27]])
    with torch.no_grad():
        same = torch.allclose(model(ids)[0, -1], model(shuffled)[0, -1], atol=1e-5)
    assert same == blind


def test_models_are_reproducible_and_sizes_are_right():
    a, b = build_model(CopyModelConfig(**TINY), seed=3), build_model(CopyModelConfig(**TINY), seed=3)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert state_size(CopyModelConfig(arch="lstm", d_model=32, n_layers=1), 1000) == 64


def test_config_validation_names_the_parameter():
    with pytest.raises(InputError, match="arch"):
        CopyModelConfig(arch="mamba")
    with pytest.raises(InputError, match="row_tokens"):
        CopyConfig(train_lengths=(5, 80), row_tokens=128)
    with pytest.raises(InputError, match="train_lengths"):
        CopyConfig(train_lengths=(9, 5))
    assert CopyConfig(eval_lengths=(30, 10, 10)).eval_lengths == (10, 30)
    assert CopyConfig.paper().train_lengths == (5, 50) and CopyConfig.paper().model.pretrained


@pytest.mark.parametrize("arch", ["rope", "lstm"])
def test_a_tiny_model_overfits_one_fixed_batch(arch):
    torch.manual_seed(0)
    batch = eval_batch(4, 8, torch.Generator().manual_seed(0))
    config = CopyConfig(model=CopyModelConfig(arch=arch, **TINY))
    model = build_model(config.model, seed=0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    from accessibility.copying import copy_loss
    for _ in range(150):
        loss = copy_loss(model, batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    assert loss.item() < 0.05
    assert bool(teacher_forced(model, batch).all())


@pytest.fixture(scope="module")
def trained():
    """A tiny RoPE model trained for a second or two on ℓ = 4 only: right there, wrong at other lengths."""
    config = CopyConfig(model=CopyModelConfig(**TINY), train_lengths=(4, 4), rows=16, row_tokens=32,
                        lr=1e-2, warmup_steps=10, max_steps=150, check_every=50, stop_strings=32)
    model, log = train(config)
    return model, log


def test_teacher_forced_exact_match_equals_greedy_decoding(trained):
    model, _ = trained
    exact_tf, exact_greedy = [], []
    for length in (2, 4, 6, 8):
        batch = eval_batch(length, 64, torch.Generator().manual_seed(length))
        exact_tf.append(teacher_forced(model, batch).all(1))
        strings = batch.ids[:, 1:length + 1]
        target = torch.cat([strings, torch.full((64, 1), EOS_ID)], 1)
        exact_greedy.append((greedy_copy(model, strings) == target).all(1))
    exact_tf, exact_greedy = torch.cat(exact_tf), torch.cat(exact_greedy)
    assert 0 < exact_tf.float().mean() < 1  # both outcomes occur, so the comparison means something
    assert torch.equal(exact_tf, exact_greedy)


def test_training_learns_and_logs(trained):
    model, log = trained
    assert log.converged and log.steps <= 150 and len(log.losses) == log.steps
    assert log.checks[-1] == (log.steps, 1.0)  # stopped at the first check where the held-out batch is exact
    assert np.mean(log.losses[-10:]) < 0.5 * np.mean(log.losses[:10])
    result = evaluate(model, [4, 10], 64)
    assert result.accuracy[0] > 0.9 and result.accuracy[1] < 0.1
    assert np.all(result.ci_low <= result.accuracy) and np.all(result.accuracy <= result.ci_high)
    assert result.position_accuracy[1].shape == (11,)
    # character accuracy is the mean over the copied characters of the per-position accuracy
    assert result.char_accuracy[1] == pytest.approx(result.position_accuracy[1][:-1].mean())


def test_clopper_pearson_matches_scipy():
    k, n = np.array([0, 1, 37, 199, 200]), 200
    lo, hi = clopper_pearson(k, n, 0.05)
    for i, ki in enumerate(k):
        ci = binomtest(int(ki), n).proportion_ci(0.95, method="exact")
        assert lo[i] == pytest.approx(ci.low, abs=1e-12) and hi[i] == pytest.approx(ci.high, abs=1e-12)


def _eval(lengths, correct, n=100):
    lo, hi = clopper_pearson(np.asarray(correct), n)
    return CopyEval(np.asarray(lengths), n, np.asarray(correct), np.asarray(correct) / n, lo, hi, None, None)


def test_copy_n50_brackets_a_cliff():
    cliff = copy_n50(_eval([5, 10, 20, 25, 30], [100, 100, 98, 0, 0]))
    assert cliff.low == 20 and cliff.high == 25 and 20 < cliff.n50 < 25
    assert cliff.n50 == pytest.approx(20 + 0.48 / 0.98 * 5)
    assert copy_n50(_eval([5, 10], [100, 90])).n50 == math.inf
    assert copy_n50(_eval([5, 10], [100, 90])).high == math.inf
    assert math.isnan(copy_n50(_eval([5, 10], [10, 0])).n50)
    # a noisy point near 1/2 widens the bracket
    noisy = copy_n50(_eval([5, 10, 15, 20], [100, 55, 45, 0]))
    assert noisy.low == 5 and noisy.high == 20


def test_the_model_key_covers_every_training_setting():
    from dataclasses import fields, replace

    from accessibility.results import config_hash

    base = CopyConfig()
    key = config_hash(base.training_part())
    changed = {"train_lengths": (4, 20), "rows": 8, "row_tokens": 100, "lr": 1e-3, "weight_decay": 0.1,
               "betas": (0.8, 0.9), "warmup_steps": 5, "min_lr_ratio": 0.5, "max_steps": 10, "clip_norm": 2.0,
               "check_every": 5, "stop_strings": 3, "seed": 1, "model": CopyModelConfig(arch="nope")}
    assert set(changed) == {f.name for f in fields(CopyConfig)} - {"eval_lengths", "eval_strings", "alpha"}
    for name, value in changed.items():
        assert config_hash(replace(base, **{name: value}).training_part()) != key, name
    shapes = {"d_model": 64, "n_layers": 3, "n_heads": 8, "mlp_ratio": 4, "pretrained": "x"}
    for name, value in shapes.items():
        model = (replace(base.model, **{name: value}) if name != "pretrained"
                 else CopyModelConfig(pretrained="x"))
        assert config_hash(replace(base, model=model).training_part()) != key, name
    same = replace(base, eval_lengths=(5, 7), eval_strings=3, alpha=0.1,
                   model=replace(base.model, allow_download=True))
    assert config_hash(same.training_part()) == key


def test_run_copy_caches_models_and_results(tmp_path):
    config = CopyConfig(model=CopyModelConfig(**TINY), train_lengths=(2, 3), rows=4, row_tokens=16,
                        max_steps=3, check_every=3, eval_lengths=(2, 4), eval_strings=8)
    first = run_copy(config, out=tmp_path)
    again = run_copy(config, out=tmp_path)
    assert not first.cached and again.cached and again.folder == first.folder
    assert np.array_equal(first.eval.correct, again.eval.correct)
    assert (first.folder / "config.json").exists() and (first.folder / "model.pt").exists()
    more = run_copy(CopyConfig(**{**config.__dict__, "eval_lengths": (2, 4, 6)}), out=tmp_path)
    assert more.cached and more.folder == first.folder and list(more.eval.lengths) == [2, 4, 6]
    other = run_copy(CopyConfig(**{**config.__dict__, "lr": 2e-3}), out=tmp_path)
    assert other.folder != first.folder
    summary = again.summary()
    assert summary["train_lengths"] == [2, 3] and set(summary["accuracy"]) == {2, 4}
    from accessibility.results import save_run

    saved = save_run(tmp_path / "run", {"kind": "copy", "config": config, "command": "accessibility copy"},
                     summary=saved_summary(again))
    record = load_record(saved)
    assert record.config == config and record.command == "accessibility copy" and record.n50 == again.n50
    assert np.array_equal(record.eval.correct, again.eval.correct) and record.log.steps == again.log.steps


def test_alibi_mask_is_cut_from_one_cached_mask():
    """A longer input first: the mask of a shorter one is a block of the cached mask, equal to a fresh one,
    and the logits equal those with the mask rebuilt."""
    model = build_model(CopyModelConfig(arch="alibi", **TINY)).eval()
    model(torch.zeros(1, 12, dtype=torch.long))
    cached = model._alibi
    ids = torch.randint(0, 30, (2, 7))
    with torch.no_grad():
        logits = model(ids)
        fresh = model.net(ids, attention_mask=alibi_bias(TINY["n_heads"], 7)).logits
    assert model._alibi is cached
    assert torch.equal(model.alibi_mask(7, ids.device), alibi_bias(TINY["n_heads"], 7))
    assert torch.equal(logits, fresh)
