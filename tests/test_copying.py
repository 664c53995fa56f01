"""The copy task: exact data format, model invariants, training, evaluation and the cache."""

import math
import re
import signal
from dataclasses import fields, replace

import numpy as np
import pytest
import torch
from scipy.stats import binomtest

from accessibility import copying
from accessibility.checks import InputError
from accessibility.copy_models import (ARCHITECTURES, CopyModelConfig, alibi_bias, alibi_slopes,
                                       build_model, state_size)
from accessibility.copy_task import (BOS_ID, EOS_ID, IGNORE, PAD_ID, SEP_ID, SYMBOLS, decode, encode,
                                     eval_batch, packed_batch)
from accessibility.copying import (PAPER_DIFFERENCES, STOP_STREAM, CopyConfig, CopyEval, clopper_pearson,
                                   copy_n50, evaluate, evaluate_config, exact_match, greedy_copy,
                                   learning_rate, load_record, run_copy, saved_summary, teacher_forced, train)
from accessibility.models import torch_threads
from accessibility.results import torch_generator

TINY = dict(d_model=32, n_layers=1, n_heads=2)
TWELVE_STEPS = CopyConfig(model=CopyModelConfig(**TINY), train_lengths=(2, 4), rows=4, row_tokens=32,
                          warmup_steps=2, max_steps=12, check_every=4, stop_strings=64, eval_lengths=(2, 4),
                          eval_strings=16)     # 3 checks in 12 steps, none meeting the stopping rule
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
    with pytest.raises(InputError, match="count_eos"):
        CopyConfig(count_eos="yes")


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


@pytest.mark.parametrize("count_eos", [False, True])
def test_teacher_forced_exact_match_equals_greedy_decoding(trained, count_eos):
    model, _ = trained
    exact_tf, exact_greedy = [], []
    for length in (2, 4, 6, 8):
        batch = eval_batch(length, 64, torch.Generator().manual_seed(length))
        exact_tf.append(exact_match(teacher_forced(model, batch), count_eos))
        strings = batch.ids[:, 1:length + 1]
        target = torch.cat([strings, torch.full((64, 1), EOS_ID)], 1)
        emitted = greedy_copy(model, strings)
        columns = length + 1 if count_eos else length  # the greedy string, with or without its EOS
        exact_greedy.append((emitted[:, :columns] == target[:, :columns]).all(1))
    exact_tf, exact_greedy = torch.cat(exact_tf), torch.cat(exact_greedy)
    assert 0 < exact_tf.float().mean() < 1  # both outcomes occur, so the comparison means something
    assert torch.equal(exact_tf, exact_greedy)


class WrongEOS(torch.nn.Module):
    """Reads the answer off the input: predicts every next symbol of a copy example, except a letter
    ('a') where the EOS comes. One (zero) parameter, so that it can be 'trained'."""

    def __init__(self):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.zeros(30))

    def forward(self, ids):
        following = torch.cat([ids[:, 1:], ids[:, :1]], 1)
        following = torch.where(following == EOS_ID, 0, following)
        return 10 * torch.nn.functional.one_hot(following, 30).float() + self.bias


def test_only_the_eos_wrong_is_exact_by_default_and_not_with_count_eos():
    model = WrongEOS()
    letters = evaluate(model, [3, 9], 16)
    with_eos = evaluate(model, [3, 9], 16, count_eos=True)
    assert letters.accuracy.tolist() == [1.0, 1.0] and with_eos.accuracy.tolist() == [0.0, 0.0]
    assert not letters.count_eos and with_eos.count_eos
    for e in (letters, with_eos):  # the per-position verdicts do not depend on the metric
        assert e.char_accuracy.tolist() == [1.0, 1.0]
        assert [p[-1] for p in e.position_accuracy] == [0.0, 0.0]
        assert all(p[:-1].all() for p in e.position_accuracy)
    # the stopping rule uses the same metric: met at the second check by default, never with the EOS
    config = CopyConfig(model=CopyModelConfig(**TINY), train_lengths=(2, 4), rows=2, row_tokens=16,
                        max_steps=6, check_every=2, stop_strings=16)
    _, log = train(config, model=WrongEOS())
    assert log.steps == 4 and log.rule_met and log.checks == [(2, 1.0), (4, 1.0)]
    _, log = train(replace(config, count_eos=True), model=WrongEOS())
    assert log.steps == 6 and not log.rule_met and log.checks == [(2, 0.0), (4, 0.0), (6, 0.0)]


class Lookup(torch.nn.Module):
    """Reads the answer off the input (as WrongEOS, EOS included) in the rows that ``copies`` accepts
    (given the row's string as a tuple of ids) and predicts the pad symbol everywhere in the others.
    One (zero) parameter, so that it can be 'trained'."""

    def __init__(self, copies):
        super().__init__()
        self.copies = copies
        self.bias = torch.nn.Parameter(torch.zeros(30))

    def forward(self, ids):
        following = torch.cat([ids[:, 1:], ids[:, :1]], 1)
        length = (ids.shape[1] - 3) // 2  # one example per row in the rows that are scored
        copied = torch.tensor([self.copies(tuple(row[1:length + 1])) for row in ids.tolist()])
        return 10 * torch.nn.functional.one_hot(torch.where(copied[:, None], following, PAD_ID), 30).float() \
            + self.bias


def test_a_model_that_copies_only_one_batch_does_not_meet_the_rule():
    """A model that copies exactly the strings of the first check, and no others, would pass every
    check of a fixed batch: the rule draws fresh strings at each check and needs two in a row."""
    config = CopyConfig(model=CopyModelConfig(**TINY), train_lengths=(2, 6), rows=2, row_tokens=16,
                        max_steps=8, check_every=2, stop_strings=32)
    seen = eval_batch(6, 32, torch_generator(config.seed, STOP_STREAM, 2)).ids[:, 1:7]  # check 1's strings
    memoriser = Lookup({tuple(s) for s in seen.tolist()}.__contains__)
    _, log = train(config, model=memoriser)
    assert log.checks == [(2, 1.0), (4, 0.0), (6, 0.0), (8, 0.0)] and not log.rule_met and log.steps == 8
    _, once = train(replace(config, stop_checks=1), model=memoriser)
    assert once.rule_met and once.steps == 2  # one check is fooled; fresh strings after training are not:
    assert evaluate(memoriser, [6], 64, seed=config.seed).accuracy.tolist() == [0.0]
    _, every = train(config, model=Lookup(lambda s: True))
    assert every.rule_met and every.steps == 4 and copying.passed_in_a_row(every.checks) == 2


def test_the_fall_is_evaluated_at_every_length():
    """A model that copies every string up to 13 letters and none longer: the coarse grid brackets
    the fall by 10 and 20; every length between is evaluated, so copy_n50 is 13.5 in [13, 14]."""
    config = CopyConfig(eval_lengths=(5, 10, 20, 30), eval_strings=16)
    step = Lookup(lambda s: len(s) <= 13)
    result = evaluate_config(step, config)
    assert result.lengths.tolist() == [5, *range(10, 21), 30]
    assert result.accuracy.tolist() == [1.0] * 5 + [0.0] * 8
    assert copy_n50(result) == copying.CopyN50(13.5, 13.0, 14.0)
    coarse = evaluate_config(step, replace(config, eval_cliff=False))
    assert coarse.lengths.tolist() == [5, 10, 20, 30]
    assert copy_n50(coarse) == copying.CopyN50(15.0, 10.0, 20.0)
    # the training maximum is always evaluated: fresh strings of the length the stopping rule checks
    assert 20 in evaluate_config(step, replace(config, eval_lengths=(5, 30), eval_cliff=False)).lengths


def test_the_paper_preset_is_the_published_run():
    """The published settings (Pythia-160m fine-tuned as in the paper's copying run): AdamW at 1e-5
    with weight decay 0.1 and a linear schedule, 2 x 2048 packed tokens of lengths 5..50, at most
    10k steps, every 500 steps a check whether 12 strings of length 50 are exact, without the EOS."""
    c = CopyConfig.paper()
    assert c.model.pretrained == "EleutherAI/pythia-160m" and c.model.arch == "rope"
    assert c.train_lengths == (5, 50) and (c.rows, c.row_tokens) == (2, 2048)
    assert (c.lr, c.weight_decay, c.max_steps) == (1e-5, 0.1, 10_000)
    assert (c.check_every, c.stop_strings, c.count_eos) == (500, 12, False)
    assert [learning_rate(s, c) for s in (0, 2500, 5000, 10_000)] == pytest.approx([1e-5, 7.5e-6, 5e-6, 0])
    assert (c.eval_lengths[0], c.eval_lengths[-1]) == (10, 1000)
    assert set(PAPER_DIFFERENCES) <= {f.name for f in fields(CopyConfig)}
    assert CopyConfig.quick().count_eos is False  # the CPU preset scores like the publication


def test_a_killed_run_resumes_to_the_same_result(tmp_path, monkeypatch):
    config = TWELVE_STEPS
    whole = run_copy(config, out=tmp_path / "whole")
    assert whole.log.steps == 12 and not whole.log.rule_met  # 12 steps, so the kill below is mid-run

    class Killed(Exception):
        pass

    real, calls = copying.packed_batch, []

    def batches(*args, kill_at=None):
        calls.append(1)
        if len(calls) == kill_at:
            raise Killed
        return real(*args)

    monkeypatch.setattr(copying, "packed_batch", lambda *a: batches(*a, kill_at=10))  # at step 10 of 12
    with pytest.raises(Killed):
        run_copy(config, out=tmp_path / "killed")
    folder = next((tmp_path / "killed").iterdir())
    assert (folder / "checkpoint.pt").exists() and not (folder / "model.pt").exists()
    calls.clear()
    monkeypatch.setattr(copying, "packed_batch", batches)
    resumed = run_copy(config, out=tmp_path / "killed")
    assert len(calls) == 12 - 8  # resumed from the checkpoint of step 8
    assert resumed.log.losses == whole.log.losses and resumed.log.checks == whole.log.checks
    assert resumed.log.steps == whole.log.steps and resumed.log.rule_met == whole.log.rule_met
    for a, b in zip(whole.model.state_dict().values(), resumed.model.state_dict().values()):
        assert torch.equal(a, b)
    assert np.array_equal(resumed.eval.correct, whole.eval.correct)
    assert not (folder / "checkpoint.pt").exists() and (folder / "model.pt").exists()


def test_training_that_ends_between_two_checks_saves_its_last_step(tmp_path, monkeypatch):
    """A run whose budget ends between two checks (10 steps, checks every 4) leaves a checkpoint of
    its last step, so that a stop after training (while the model is saved or evaluated) redoes none."""
    config, path = replace(TWELVE_STEPS, max_steps=10), tmp_path / "checkpoint.pt"
    _, log = copying.train(config, checkpoint=path)
    assert log.steps == 10 and torch.load(path, weights_only=True)["log"]["steps"] == 10
    calls = []
    monkeypatch.setattr(copying, "packed_batch", lambda *a: calls.append(1))
    _, again = copying.train(config, checkpoint=path)
    assert not calls and again.losses == log.losses and again.steps == 10


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_stops_after_the_step_in_flight_and_loses_no_step(tmp_path, monkeypatch, sig):
    """A signal in mid-training (between two checks) is held until the step in flight ends; the
    checkpoint is written there and KeyboardInterrupt follows. Run again, training resumes at the
    next step (not at the last check) and ends exactly as an uninterrupted run."""
    config = TWELVE_STEPS
    whole = run_copy(config, out=tmp_path / "whole")
    real, calls = copying.packed_batch, []

    def batches(*args, signal_at=None):
        calls.append(1)
        if len(calls) == signal_at:
            signal.raise_signal(sig)       # as a user's Ctrl-C or a scheduler's SIGTERM would
        return real(*args)

    before = signal.getsignal(sig)
    monkeypatch.setattr(copying, "packed_batch", lambda *a: batches(*a, signal_at=10))  # in step 10 of 12
    with pytest.raises(KeyboardInterrupt, match=f"stopped by {sig.name} at a saved point"):
        run_copy(config, out=tmp_path / "stopped")
    assert len(calls) == 10 and signal.getsignal(sig) is before
    folder = next((tmp_path / "stopped").iterdir())
    assert torch.load(folder / "checkpoint.pt", weights_only=True)["log"]["steps"] == 10
    calls.clear()
    monkeypatch.setattr(copying, "packed_batch", batches)
    resumed = run_copy(config, out=tmp_path / "stopped")
    assert len(calls) == 12 - 10                # no step lost, none done twice
    assert resumed.log.losses == whole.log.losses and resumed.log.checks == whole.log.checks
    for a, b in zip(whole.model.state_dict().values(), resumed.model.state_dict().values()):
        assert torch.equal(a, b)


def test_training_learns_and_logs(trained):
    model, log = trained
    assert log.rule_met and log.steps <= 150 and len(log.losses) == log.steps
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
    from accessibility.results import config_hash

    base = CopyConfig()
    key = config_hash(base.training_part())
    changed = {"train_lengths": (4, 20), "rows": 8, "row_tokens": 100, "lr": 1e-3, "weight_decay": 0.01,
               "betas": (0.8, 0.9), "warmup_steps": 5, "max_steps": 10, "clip_norm": 2.0, "check_every": 5,
               "stop_strings": 3, "stop_checks": 1, "count_eos": True, "seed": 1,
               "model": CopyModelConfig(arch="nope")}
    assert set(changed) == {f.name for f in fields(CopyConfig)} - set(copying.EVAL_FIELDS)
    for name, value in changed.items():
        assert config_hash(replace(base, **{name: value}).training_part()) != key, name
    shapes = {"d_model": 64, "n_layers": 3, "n_heads": 8, "mlp_ratio": 4, "pretrained": "x"}
    for name, value in shapes.items():
        model = (replace(base.model, **{name: value}) if name != "pretrained"
                 else CopyModelConfig(pretrained="x"))
        assert config_hash(replace(base, model=model).training_part()) != key, name
    same = replace(base, eval_lengths=(5, 7), eval_strings=3, alpha=0.1, eval_cliff=False,
                   model=replace(base.model, allow_download=True))
    assert config_hash(same.training_part()) == key


def test_run_copy_caches_models_and_results(tmp_path):
    config = CopyConfig(model=CopyModelConfig(**TINY), train_lengths=(2, 3), rows=4, row_tokens=16,
                        max_steps=3, check_every=3, eval_lengths=(2, 4), eval_strings=8, eval_cliff=False)
    first = run_copy(config, out=tmp_path)
    again = run_copy(config, out=tmp_path)
    assert not first.cached and again.cached and again.folder == first.folder
    assert np.array_equal(first.eval.correct, again.eval.correct)
    assert (first.folder / "config.json").exists() and (first.folder / "model.pt").exists()
    more = run_copy(CopyConfig(**{**config.__dict__, "eval_lengths": (2, 4, 6)}), out=tmp_path)
    assert more.cached and more.folder == first.folder and list(more.eval.lengths) == [2, 3, 4, 6]
    other = run_copy(CopyConfig(**{**config.__dict__, "lr": 2e-3}), out=tmp_path)
    assert other.folder != first.folder
    summary = again.summary()
    assert summary["train_lengths"] == [2, 3] and set(summary["accuracy"]) == {2, 3, 4}
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
