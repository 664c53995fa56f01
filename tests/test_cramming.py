"""The cramming engine: the search finds the capacity a fixed-length run defines, batched = one at a
time, exact per-row AdamW, frozen weights, certified successes, the published protocol, resumable and
sharded sweeps, target kinds and the prefix token (toy model and stub models, seconds)."""

import json
import signal
import warnings
from dataclasses import replace

import numpy as np
import pytest
import torch

from accessibility import cramming as cr
from accessibility.checks import InputError
from accessibility.models import describe, load_model, torch_threads
from accessibility.results import Inflight, RecordLog
from accessibility.targets import make_targets, random_targets, text_targets, word_targets

#: Small search: a handful of probes, every way to end reachable, about a second per run.
SMALL = cr.CramConfig.quick(n_max=12, max_steps=50, patience=15)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """The toy model is too small to gain from threads; on a busy machine they cost 20x."""
    with torch_threads(1):
        yield


@pytest.fixture(scope="module")
def toy():
    return load_model("toy")


@pytest.fixture(scope="module")
def toy64():
    return load_model("toy", dtype=torch.float64)


def _outcome(results):
    return [(r.index, r.capacity, r.capacity_teacher, r.steps, r.stop, r.probes) for r in results]


def test_adamw_step_matches_torch_per_row():
    """Two rows that start at different times follow torch.optim.AdamW each, step for step."""
    gen = torch.Generator().manual_seed(0)
    start = torch.randn(2, 3, 5, generator=gen, dtype=torch.float64)
    grads = torch.randn(6, 2, 3, 5, generator=gen, dtype=torch.float64)
    hp = dict(lr=0.1, betas=(0.9, 0.9), weight_decay=0.01, eps=1e-8)
    p, ea, eas = start.clone(), torch.zeros_like(start), torch.zeros_like(start)
    steps = torch.zeros(2, dtype=torch.long)
    refs = [torch.nn.Parameter(start[i].clone()) for i in range(2)]
    opts = [torch.optim.AdamW([q], lr=hp["lr"], betas=hp["betas"], weight_decay=hp["weight_decay"],
                              eps=hp["eps"]) for q in refs]
    for k in range(6):
        rows = [0, 1] if k >= 2 else [0]            # row 1 joins two steps late
        idx = torch.tensor(rows)
        steps[idx] += 1
        q, a, b = p[idx], ea[idx], eas[idx]
        cr.adamw_step(q, grads[k, idx], a, b, steps[idx], **hp)
        p[idx], ea[idx], eas[idx] = q, a, b
        for i in rows:
            refs[i].grad = grads[k, i].clone()
            opts[i].step()
    for i in range(2):
        torch.testing.assert_close(p[i], refs[i].detach(), rtol=1e-12, atol=1e-14)


# --- the search finds what a fixed-length run defines -----------------------------------------


class _Oracle:
    """A stub of :func:`cramming.teacher_forced`: target i (its first token names it) is solved at
    length L after ``cost`` steps exactly when L <= capacity[i]; longer probes stall at capacity[i]
    correct tokens (so they fail by patience). Success is monotone in L, as bisection assumes."""

    def __init__(self, capacity, cost=3):
        self.capacity, self.cost, self.calls = capacity, cost, {}

    def __call__(self, lm, mem, targets, lengths, prefix, given, dtype="float32", pad_to=None,
                 position="before"):
        loss = (mem ** 2).sum((1, 2))                          # any differentiable function of [mem]
        plen, correct = torch.zeros_like(lengths), torch.zeros_like(lengths)
        for j, (t, L) in enumerate(zip(targets[:, 0].tolist(), lengths.tolist())):
            key = (t, L)
            self.calls[key] = self.calls.get(key, 0) + 1
            cap = self.capacity[t]
            solved = L <= cap and self.calls[key] > self.cost
            plen[j] = L if solved else min(L - 1, cap)
            correct[j] = plen[j] - given
        return loss, correct, plen


def _stub(capacities, n_max):
    """Targets whose first token is their index (the oracle's key) and a toy-sized fake model."""
    toy = load_model("toy", vocab_size=max(len(capacities), 2))
    targets = torch.zeros(len(capacities), n_max, dtype=torch.long)
    targets[:, 0] = torch.arange(len(capacities))
    return toy, targets


def test_bisection_finds_the_known_capacity_of_a_monotone_oracle(monkeypatch):
    """Growth then bisection lands exactly on each target's capacity, wherever it lies: no pile-up
    on the growth lengths (the old growth-only search reported 4, 6, 9, 14, 21, ... only)."""
    caps = list(range(2, 60, 3)) + [60, 7, 13, 41]                  # spread over the whole range
    cfg = cr.CramConfig.quick(n_start=4, growth=1.5, n_max=60, patience=5, max_steps=40)
    toy, targets = _stub(caps, cfg.n_max)
    monkeypatch.setattr(cr, "teacher_forced", _Oracle(dict(enumerate(caps))))
    monkeypatch.setattr(cr, "certify", lambda lm, mem, target, capacity, *a, **k: {"matched": capacity - 1})
    results = cr.cram(toy, targets, 1, cfg, batch_size=5)
    assert [r.capacity for r in results] == caps
    growth = {4, 6, 9, 14, 21, 32, 48, 60}
    assert sum(c in growth for c in caps) < len(caps) // 2            # most capacities off the stage grid
    for r, c in zip(results, caps):
        assert r.stop == ("full" if c == cfg.n_max else "patience")
        lengths = [p[0] for p in r.probes]
        assert len(lengths) <= 8 + int(np.ceil(np.log2(max(c, 2))))  # growth, then log2 of the bracket
        assert all(p[1] == (p[0] <= c) for p in r.probes)             # each probe ends as the oracle says


def test_bisection_without_growth_and_the_fixed_run(monkeypatch):
    cfg = cr.CramConfig.quick(n_start=16, growth=1.0, n_max=16, patience=4, max_steps=30)
    toy, targets = _stub([5, 16, 11], 16)
    monkeypatch.setattr(cr, "teacher_forced", _Oracle({0: 5, 1: 16, 2: 11}))
    monkeypatch.setattr(cr, "certify", lambda lm, mem, target, capacity, *a, **k: {"matched": capacity - 1})
    assert [r.capacity for r in cr.cram(toy, targets, 1, cfg)] == [5, 16, 11]   # bisect (1, 16)
    fixed = cr.cram(toy, targets, 1, cfg.fixed(11))
    assert [r.capacity >= 11 for r in fixed] == [False, True, True]
    assert all(len(r.probes) == 1 for r in fixed)


def test_probe_ends_on_budget_when_still_improving(monkeypatch):
    """A probe that keeps finding better accuracy until max_steps ends on 'budget', and the target's
    stop says so (its capacity is then a lower bound)."""

    def creeping(lm, mem, targets, lengths, prefix, given, dtype="float32", pad_to=None, position="before"):
        creeping.t += 1
        correct = torch.full_like(lengths, creeping.t)                # a new best every step
        return (mem ** 2).sum((1, 2)), correct, torch.where(lengths <= 3, lengths, 2 + 0 * lengths)

    creeping.t = 0
    toy, targets = _stub([3], 12)
    monkeypatch.setattr(cr, "teacher_forced", creeping)
    monkeypatch.setattr(cr, "certify", lambda lm, mem, target, capacity, *a, **k: {"matched": capacity - 1})
    (r,) = cr.cram(toy, targets, 1, cr.CramConfig.quick(n_start=3, n_max=12, max_steps=7, patience=5))
    assert r.capacity == 3 and r.stop == "budget" and r.probes[-1][3] == "budget"


class _SlowOracle(_Oracle):
    """Target i solves lengths up to fast[i] after ``cost`` steps and lengths up to slow[i] only after
    ``slow`` steps (counted over every probe at that length), with no better accuracy meanwhile: a
    probe cut by patience fails there where a full budget succeeds."""

    def __init__(self, fast, slow, cost=3, slow_cost=8):
        super().__init__(fast, cost)
        self.slow, self.slow_cost = slow, slow_cost

    def __call__(self, lm, mem, targets, lengths, prefix, given, *args, **kwargs):
        loss, correct, plen = super().__call__(lm, mem, targets, lengths, prefix, given, *args, **kwargs)
        for j, (t, L) in enumerate(zip(targets[:, 0].tolist(), lengths.tolist())):
            if self.capacity[t] < L <= self.slow[t] and self.calls[(t, L)] > self.slow_cost:
                plen[j], correct[j] = L, L - given
        return loss, correct, plen


def test_capacities_are_decided_by_failures_with_the_full_budget(monkeypatch):
    """A probe at capacity + 1 that stalled on patience does not decide: the confirming probe runs
    max_steps from the solution at capacity, and where it succeeds the search goes on upward; each
    capacity below n_max ends on a failure that ran max_steps after the solution at capacity. Without
    confirmations (the search before them) the capacities stay at the lengths patience could reach."""
    fast, slow = [6, 10, 13, 3, 40], [9, 10, 20, 5, 40]
    cfg = cr.CramConfig.quick(n_start=4, growth=1.5, n_max=40, patience=5, max_steps=30)
    toy, targets = _stub(fast, cfg.n_max)
    monkeypatch.setattr(cr, "certify", lambda lm, mem, target, capacity, *a, **k: {"matched": capacity - 1})
    monkeypatch.setattr(cr, "teacher_forced", _SlowOracle(dict(enumerate(fast)), dict(enumerate(slow))))
    results = cr.cram(toy, targets, 1, cfg, batch_size=3)
    assert [r.capacity for r in results] == slow
    for r in results:
        assert r.steps == sum(p[2] for p in r.probes) and r.replays == [] and r.nonfinite == 0
        assert {p[4] for p in r.probes} <= set(cr.PROBE_STARTS)
        if r.stop == "full":
            continue
        solved_at = max(i for i, p in enumerate(r.probes) if p[1] and p[0] == r.capacity)
        deciding = [p for p in r.probes[solved_at:] if p[0] == r.capacity + 1 and not p[1]]
        assert deciding and deciding[-1][2] == cfg.max_steps and deciding[-1][4] == "confirm"
        assert r.stop == deciding[-1][3] == "patience"                # stalled, not still improving
    moved = [r for r, f in zip(results, fast) if r.capacity > f]
    assert moved and all(any(p[4] == "confirm" and p[1] for p in r.probes) for r in moved)
    monkeypatch.setattr(cr, "teacher_forced", _SlowOracle(dict(enumerate(fast)), dict(enumerate(slow))))
    monkeypatch.setattr(cr, "decided", lambda *a: True)
    assert [r.capacity for r in cr.cram(toy, targets, 1, cfg, batch_size=3)] == fast


def _before_confirmations(monkeypatch, run):
    """``run()`` under the search before confirmations, its records as they were written then
    (probes of four fields, no [mem])."""
    with monkeypatch.context() as patch:
        patch.setattr(cr, "decided", lambda *a: True)
        results = run()
    return results, {r.index: {**r.record(with_mem=False), "probes": [p[:4] for p in r.probes]}
                     for r in results}


def test_an_old_record_is_extended_as_a_fresh_search_ends_bitwise(toy, monkeypatch):
    """A record saved without [mem] before confirmations existed is extended by replaying its solved
    probes (each reproduces its step count exactly on one thread in float32) and then confirming: the
    extended search has the probes, capacity and [mem] of a fresh search, plus the replays' steps."""
    cfg = replace(SMALL, n_start=2, growth=2.0, n_max=16)
    targets = random_targets(toy.info.real_token_ids, 6, cfg.n_max, seed=7)
    fresh = cr.cram(toy, targets, 2, cfg, seed=7, batch_size=3)
    old, records = _before_confirmations(monkeypatch,
                                         lambda: cr.cram(toy, targets, 2, cfg, seed=7, batch_size=3))
    todo = [i for i, rec in records.items() if not cr.search_decided(rec, cfg)]
    assert todo and all(cr.search_decided(r.record(), cfg) for r in fresh)
    ext = cr.cram(toy, targets[todo], 2, cfg, seed=7, indices=todo, batch_size=2,
                  reopen={i: records[i] for i in todo})
    for e, i in zip(ext, todo):
        f = fresh[i]
        outcome = lambda r: (r.capacity, r.capacity_teacher, r.stop, r.probes)
        assert outcome(e) == outcome(f)
        assert np.array_equal(e.mem, fresh[i].mem)
        assert [r[:3] for r in e.replays] == [p[:3] for p in old[i].probes if p[1]]
        assert e.steps == fresh[i].steps + sum(r[2] for r in e.replays)


def test_init_seed_keeps_the_targets_and_draws_other_starts(toy64):
    """A sweep with ``init_seed`` runs the targets of its ``seed`` from the starts of ``init_seed``
    (as :func:`cram` given that seed), and differs from the default run, which equals init_seed = seed."""
    cfg = replace(SMALL, max_steps=20)
    targets = make_targets(toy64, "random-tokens", 3, cfg.n_max, seed=5)
    outcome = lambda recs: [(r["index"], r["capacity"], r["steps"], r["probes"]) for r in recs]
    default = outcome(cr.sweep(toy64, "random-tokens", [1], 3, cfg, seed=5))
    other = outcome(cr.sweep(toy64, "random-tokens", [1], 3, cfg, seed=5, init_seed=9))
    direct = [(r.index, r.capacity, r.steps, r.probes) for r in cr.cram(toy64, targets, 1, cfg, seed=9)]
    assert other == [(i, c, s, [list(p) for p in probes]) for i, c, s, probes in direct]
    assert other != default
    assert outcome(cr.sweep(toy64, "random-tokens", [1], 3, cfg, seed=5, init_seed=5)) == default


def test_a_sweep_extends_old_records_and_keeps_them(toy64, tmp_path, monkeypatch):
    """Resuming a sweep whose records predate confirmations extends each undecided record in place:
    the log keeps the first line, the extended record replaces it on reading, and its seconds include
    the first record's."""
    cfg = replace(SMALL, max_steps=20)
    path = tmp_path / "records.jsonl"
    _, records = _before_confirmations(monkeypatch, lambda: cr.cram(
        toy64, make_targets(toy64, "random-tokens", 3, cfg.n_max, seed=5), 1, cfg, seed=5))
    log = RecordLog(path)
    for i, rec in records.items():
        log.append({"key": cr.record_key("random-tokens", 1, i), "kind": "random-tokens", "model": "toy",
                    **rec, "seconds": 100.0})
    out = cr.sweep(toy64, "random-tokens", [1], 3, cfg, seed=5, log=RecordLog(path, timed=True))
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    extended = [r for r in out if r["steps"] > records[r["index"]]["steps"]]
    assert extended and len(lines) == 3 + len(extended)
    assert all(cr.search_decided(r, cfg) and r["seconds"] >= 100.0 for r in out)
    assert sorted(r["key"] for r in RecordLog(path)) == sorted(r["key"] for r in out)


def test_a_record_whose_solution_is_not_rebuilt_is_searched_again(toy64, tmp_path, monkeypatch):
    """An old record claims a solution (here forged at n_max - 1) that its replays cannot rebuild in
    max_steps: the extended record keeps the claimed capacity and its certificate and counts as
    undecided (its confirming probe started from a shorter solution). The next sweep searches the
    target again: the new record is the record of a new sweep of it (decided), keeps the old one
    under ``redone`` and counts its steps; a third sweep changes nothing."""
    cfg = replace(SMALL, max_steps=20)
    targets = make_targets(toy64, "random-tokens", 1, cfg.n_max, seed=5)
    _, records = _before_confirmations(monkeypatch, lambda: cr.cram(toy64, targets, 1, cfg, seed=5))
    rec, claimed = records[0], cfg.n_max - 1
    cert = {"generated": targets[0, 1:claimed].tolist(), "matched": claimed - 1, "ok": True}
    rec.update(probes=[p for p in rec["probes"] if p[1]] + [[claimed, True, 19, "solved"],
                                                           [cfg.n_max, False, 15, "patience"]],
               capacity=claimed, capacity_teacher=claimed, certificate=cert, stop="patience")
    path = tmp_path / "records.jsonl"
    RecordLog(path).append({"key": cr.record_key("random-tokens", 1, 0), "kind": "random-tokens",
                            "model": "toy", **rec, "seconds": 1.0})
    run = lambda: cr.sweep(toy64, "random-tokens", [1], 1, cfg, seed=5, log=RecordLog(path, timed=True))
    [out] = run()
    assert cr.chain_broken(out) and out["replays"][-1][:2] == [claimed, False]
    assert (out["capacity"], out["certificate"]) == (claimed, cert)
    assert out["probes"][-1][4] == "confirm" and not cr.search_decided(out, cfg)
    [new] = run()
    [fresh] = cr.sweep(toy64, "random-tokens", [1], 1, cfg, seed=5, log=RecordLog(tmp_path / "new.jsonl"))
    outcome = lambda r: (r["capacity"], r["capacity_teacher"], r["stop"], r["probes"], r["certificate"])
    assert outcome(new) == outcome(fresh) and new["capacity"] < claimed and not new["replays"]
    assert new["redone"] == {k: out[k] for k in cr.REDONE} and new["steps"] == fresh["steps"] + out["steps"]
    assert cr.search_decided(new, cfg) and not cr.chain_broken(new) and new["seconds"] >= out["seconds"]
    assert cr.unconfirmed_capacity(new) == cr.unconfirmed_capacity(out)
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and run() == [new] and path.read_text().splitlines() == lines


# --- batching, certification, layout -----------------------------------------------------------


def _pass(lm, mem0, targets, lengths, rows, pad):
    """Loss, gradient, correct count and prefix of ``rows`` in one teacher-forced pass padded to ``pad``."""
    mem = mem0[rows].clone().requires_grad_(True)
    loss, correct, plen = cr.teacher_forced(lm, mem, targets[rows], lengths[rows], None, 1, pad_to=pad)
    loss.sum().backward()
    return loss.detach(), mem.grad, correct, plen


def test_one_padded_pass_gives_each_row_its_own_loss_and_gradient(toy, toy64):
    """Rows of different lengths in one pass get the loss and gradient of their one-row pass: equal
    up to rounding in float32, to 1e-12 in float64 (the equivalence the batched engine keeps)."""
    for lm, tol in ((toy, 1e-5), (toy64, 1e-12)):
        targets = random_targets(lm.info.real_token_ids, 5, 48, seed=1)
        lengths = torch.tensor([5, 17, 40, 9, 33])
        mem0 = torch.randn(5, 2, lm.info.d_model, generator=torch.Generator().manual_seed(0),
                           dtype=lm.info.dtype)
        loss, grad, correct, plen = _pass(lm, mem0, targets, lengths, torch.arange(5), 48)
        for i in range(5):
            pad = int(cr.padded_length(lengths[i]))
            l1, g1, c1, p1 = _pass(lm, mem0, targets, lengths, torch.tensor([i]), pad)
            torch.testing.assert_close(l1[0], loss[i], rtol=tol, atol=tol)
            torch.testing.assert_close(g1[0], grad[i], rtol=tol, atol=tol)
            assert (c1[0], p1[0]) == (correct[i], plen[i])


def test_a_row_gets_bitwise_its_one_row_pass_in_float32(toy):
    """At the padded length the engine gives it, a row's loss, gradient and counts in a batch are
    bitwise those of its one-row pass (CPU, float32), also when a row predicts fewer tokens than
    MIN_GEMM_ROWS (the case where CPU BLAS switches kernels for a one-row pass)."""
    targets = random_targets(toy.info.real_token_ids, 6, 32, seed=2)
    lengths = torch.tensor([2, 3, 4, 5, 9, 14])
    assert int(cr.padded_length(lengths).max()) == cr.PAD_MULTIPLE
    mem0 = torch.randn(6, 3, toy.info.d_model, generator=torch.Generator().manual_seed(1))
    batch = _pass(toy, mem0, targets, lengths, torch.arange(6), cr.PAD_MULTIPLE)
    for i in range(6):
        alone = _pass(toy, mem0, targets, lengths, torch.tensor([i]), cr.PAD_MULTIPLE)
        assert all(torch.equal(a[0], b[i]) for a, b in zip(alone, batch)), f"row {i}"


def test_teacher_forced_logits_are_the_models_own(toy):
    """Only valid positions reach the unembedding; their logits equal the model's full forward."""
    targets = random_targets(toy.info.real_token_ids, 2, 9, seed=4)
    mem = torch.randn(2, 1, toy.info.d_model)
    x = cr.build_inputs(toy, mem, targets[:, :8], 3)
    hidden = toy.model.base_model(inputs_embeds=x).last_hidden_state
    torch.testing.assert_close(cr._head(toy, hidden), toy.model(inputs_embeds=x).logits)


def test_batched_equals_one_at_a_time_in_float64(toy64):
    """In float64, rounding differences between a batch and single runs stay far below what moves an
    argmax over a few hundred steps: every probe, capacity and [mem] agrees ([mem] entries of order 1
    to 1e-8 after the confirming probes' full budgets; measured 2.3e-9)."""
    cfg = replace(SMALL, n_start=6, growth=2.0, n_max=24)   # probes of 6, 12, 24 and bisection
    targets = random_targets(toy64.info.real_token_ids, 4, cfg.n_max, seed=4)
    batched = cr.cram(toy64, targets, 3, cfg, seed=4, batch_size=3)     # continuous batching: slots refill
    single = [cr.cram(toy64, targets[i:i + 1], 3, cfg, seed=4, indices=[i], batch_size=1)[0]
              for i in range(4)]
    assert _outcome(batched) == _outcome(single)
    assert len({len(r.probes) for r in batched}) >= 2, "the check should cover several search paths"
    for a, b in zip(batched, single):
        np.testing.assert_allclose(a.mem, b.mem, rtol=0, atol=1e-8)


def test_batched_equals_one_at_a_time_bitwise_in_float32(toy):
    """On a CPU in float32 a batch changes nothing: probes, capacities and [mem] are identical to
    one-at-a-time runs, bit for bit (probes start at 2 tokens, one predicted position)."""
    cfg = replace(SMALL, n_start=2, growth=2.0, n_max=16)
    targets = random_targets(toy.info.real_token_ids, 5, cfg.n_max, seed=6)
    batched = cr.cram(toy, targets, 2, cfg, seed=6, batch_size=3)
    single = [cr.cram(toy, targets[i:i + 1], 2, cfg, seed=6, indices=[i], batch_size=1)[0] for i in range(5)]
    assert _outcome(batched) == _outcome(single)
    assert all(np.array_equal(a.mem, b.mem) for a, b in zip(batched, single))


def test_weights_frozen_bit_identical(toy):
    before = {k: v.clone() for k, v in toy.model.state_dict().items()}
    cr.cram(toy, random_targets(toy.info.real_token_ids, 2, SMALL.n_max), 1, SMALL, batch_size=2)
    after = toy.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert all(p.grad is None and not p.requires_grad for p in toy.model.parameters())


def _greedy(lm, mem, lead, n_new, prefix=None, position="before"):
    """Reference greedy decoding without a KV cache: one full forward per token."""
    seq = list(lead)
    for _ in range(n_new):
        ids = torch.tensor([seq], dtype=torch.long)
        x = cr.build_inputs(lm, torch.as_tensor(mem, dtype=torch.float32)[None], ids, prefix, position)
        seq.append(int(lm.model(inputs_embeds=x).logits[0, -1].argmax()))
    return seq


def test_successes_reproduce_under_greedy_decoding(toy):
    targets = random_targets(toy.info.real_token_ids, 4, SMALL.n_max, seed=1)
    results = cr.cram(toy, targets, 2, SMALL, seed=1, batch_size=4)
    for r, t in zip(results, targets):
        assert r.certificate["ok"] and r.capacity == r.capacity_teacher >= 3
        assert _greedy(toy, r.mem, [int(t[0])], r.capacity - 1) == t[:r.capacity].tolist()


@pytest.mark.parametrize("position", cr.PREFIX_POSITIONS)
def test_first_token_predicted_with_prefix_token(toy, position):
    cfg = replace(SMALL, first_token_given=False, prefix=3, n_start=2, prefix_position=position)
    targets = random_targets(toy.info.real_token_ids, 2, cfg.n_max, seed=2)
    for r, t in zip(cr.cram(toy, targets, 2, cfg, seed=2), targets):
        assert r.certificate["ok"] and r.capacity >= 1
        assert r.certificate["generated"] == t[:r.capacity].tolist()
        assert _greedy(toy, r.mem, [], r.capacity, prefix=3, position=position) == t[:r.capacity].tolist()


def test_prefix_layouts():
    toy = load_model("toy")
    mem = torch.zeros(1, 2, toy.info.d_model)
    tokens = torch.tensor([[5, 6]])
    before, after = (cr.build_inputs(toy, mem, tokens, 3, p) for p in cr.PREFIX_POSITIONS)
    bos = toy.embed(torch.tensor([3]))[0]
    assert torch.equal(before[0, 0], bos) and torch.equal(after[0, 2], bos) and not after[0, :2].any()


def _tokenizer(bos: str | None):
    """A word-level fast tokenizer that puts ``bos`` in front of every text (as Llama-3 and Gemma-3
    tokenizers do), or nothing (as Pythia, Qwen2.5 and SmolLM2 tokenizers)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {"<bos>": 0, "<|begin_of_text|>": 1, "<|endoftext|>": 2, "a": 3, "b": 4}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="a"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    if bos is not None:
        tok.post_processor = processors.TemplateProcessing(single=f"{bos} $A",
                                                           special_tokens=[(bos, vocab[bos])])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=bos)


@pytest.mark.parametrize(("bos", "documented", "expected"), [
    ("<|begin_of_text|>", None, 1),      # Llama-3: its BOS, before [mem]
    ("<bos>", None, 0),                  # Gemma-3
    ("<bos>", 2, 0),                     # a BOS and a documented token: the BOS wins
    (None, 2, 2),                        # SmolLM2: no BOS, the documented <|endoftext|>
    (None, None, None),                  # Pythia, Qwen2.5: nothing
])
def test_auto_prefix_is_the_tokenizers_bos_else_the_documented_token(bos, documented, expected):
    toy = load_model("toy", vocab_size=5)
    info = describe(toy.model, _tokenizer(bos), "stub", "config", prefix_token_id=documented)
    lm = replace(toy, info=info)
    assert cr.prefix_token(lm, cr.CramConfig.quick()) == expected
    none = cr.prefix_token(lm, cr.CramConfig.quick(prefix="none"))
    assert none is None                                       # neither the BOS nor the documented token
    mem, tokens = torch.zeros(1, 2, lm.info.d_model), torch.tensor([[3, 4]])
    assert cr.build_inputs(lm, mem, tokens, none).shape[1] == 2 + 2   # [mem] and the target, nothing else
    if expected is not None:
        x = cr.build_inputs(lm, torch.zeros(1, 1, lm.info.d_model), torch.tensor([[3]]), expected)
        assert torch.equal(x[0, 0], lm.embed(torch.tensor([expected]))[0])     # BOS before [mem]


def test_teacher_forced_prefix_is_leading_run(toy):
    """The prefix length is the run of correct predictions from the start, capped by each row's length."""
    targets = random_targets(toy.info.real_token_ids, 3, 10, seed=4)
    mem = torch.randn(3, 1, toy.info.d_model)
    lengths = torch.tensor([10, 6, 3])
    loss, correct, plen = cr.teacher_forced(toy, mem, targets, lengths, None, 1)
    for i in range(3):
        x = cr.build_inputs(toy, mem[i:i + 1], targets[i:i + 1, :9], None)
        pred = toy.model(inputs_embeds=x).logits[0, 1:].argmax(-1)[: lengths[i] - 1]
        ok = (pred == targets[i, 1:lengths[i]]).tolist() + [False]
        assert int(plen[i]) == 1 + ok.index(False) and int(correct[i]) == sum(ok)
    assert torch.isfinite(loss).all()


def test_autocast_dtype_resolution():
    assert cr.resolve_autocast("float32", "cpu") == "float32"
    assert cr.resolve_autocast("auto", "cpu") == "float32"
    if not cr.cpu_has_native_bf16():
        with pytest.raises(InputError, match="autocast_dtype bfloat16"):
            cr.resolve_autocast("bfloat16", "cpu")


# --- protocols, sweeps, shards ------------------------------------------------------------------


def test_adaptive_scan_follows_the_published_rule():
    seen = []

    def point(n):
        seen.append(n)
        return 1.0 if n < 235 else 0.0

    acc = cr.adaptive_scan(point)
    assert seen == [10, 110, 210, 310, 220, 230, 240]
    assert acc[240] == 0.0 and acc[230] == 1.0


def test_published_points_are_fixed_length_runs(toy):
    targets = random_targets(toy.info.real_token_ids, 3, 12, seed=6)
    points = cr.published_points(toy, targets, 1, SMALL, grid=[3, 12], seed=6, batch_size=3)
    direct = [np.mean([r.capacity >= n for r in cr.cram(toy, targets[:, :n], 1, SMALL.fixed(n), seed=6)])
              for n in (3, 12)]
    assert list(points.values()) == direct and points[3] >= points[12]


def test_fixed_runs_at_each_targets_own_length(toy):
    """``lengths`` runs one fixed-length run per target at its own n (capacity + 1 of a search), each
    the run a one-target fixed-length cram gives; targets it does not name are not run."""
    search = cr.sweep(toy, "random-tokens", [1], 4, SMALL, seed=8)
    lengths = cr.lengths_after(search, [1], 3)
    assert sorted(lengths[1]) == [0, 1, 2] and all(lengths[1][r["index"]] == r["capacity"] + 1
                                                   for r in search if r["index"] < 3)
    runs = cr.sweep(toy, "random-tokens", [1], 4, SMALL, protocol="published", seed=8, lengths=lengths)
    targets = random_targets(toy.info.real_token_ids, 4, SMALL.n_max, seed=8)
    assert sorted(r["index"] for r in runs) == [0, 1, 2]
    for r in runs:
        n = lengths[1][r["index"]]
        (alone,) = cr.cram(toy, targets[r["index"]:r["index"] + 1, :n], 1, SMALL.fixed(n), seed=8,
                           indices=[r["index"]])
        assert (r["n"], r["solved"], r["steps"]) == (n, alone.capacity >= n, alone.steps)


class _Interrupt(Exception):
    pass


class _DyingLog(RecordLog):
    """A log whose process 'dies' after a few appends (the record is written first)."""

    def __init__(self, path, after):
        super().__init__(path)
        self.after = after

    def append(self, record, replace=False):
        stored = super().append(record, replace)
        self.after -= 1
        if self.after == 0:
            raise _Interrupt
        return stored


def _interrupted(run, after: int):
    """Run ``run(on_checkpoint)`` until its ``after``-th checkpoint; the states saved then."""
    saved = []

    def checkpoint(states):
        saved.append(states)
        if len(saved) == after:
            raise _Interrupt

    with pytest.raises(_Interrupt):
        run(checkpoint)
    return saved[-1]


def test_an_interrupted_search_resumes_from_its_checkpoint_bitwise(toy, tmp_path, monkeypatch):
    """Killed in mid-search and resumed from its saved states (through the JSON file), the searches
    end exactly as uninterrupted ones (one CPU thread, float32), and the resumed target does only the
    passes that were left."""
    cfg = replace(SMALL, n_start=2, growth=2.0, n_max=16)
    targets = random_targets(toy.info.real_token_ids, 5, cfg.n_max, seed=6)
    kw = dict(seed=6, checkpoint_seconds=0)
    reference = cr.cram(toy, targets, 2, cfg, seed=6, batch_size=3)
    states = _interrupted(lambda cp: cr.cram(toy, targets, 2, cfg, batch_size=3, on_checkpoint=cp, **kw), 40)
    assert len(states) == 3 and any(s["probes"] for s in states.values()), "interrupt in mid-search"
    box = Inflight(tmp_path)
    box.save({str(i): s for i, s in states.items()})
    resume = {int(k): s for k, s in box.states().items()}
    resumed = cr.cram(toy, targets, 2, cfg, batch_size=2, resume=resume, **kw)
    assert _outcome(resumed) == _outcome(reference)
    assert all(np.array_equal(a.mem, b.mem) for a, b in zip(resumed, reference))

    passes = []
    real_step = cr._step
    monkeypatch.setattr(cr, "_step", lambda *a: passes.append(1) or real_step(*a))
    one = targets[:1]
    cr.cram(toy, one, 2, cfg, seed=6)
    total, passes[:] = len(passes), []
    state = _interrupted(lambda cp: cr.cram(toy, one, 2, cfg, on_checkpoint=cp, **kw), 25)
    passes[:] = []
    again = cr.cram(toy, one, 2, cfg, resume=state, **kw)
    assert len(passes) == total - 24 and _outcome(again) == _outcome(reference[:1])
    with pytest.raises(InputError, match="saved cramming state"):
        cr.cram(toy, one, 3, cfg, resume=state, **kw)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_stops_between_two_passes_and_saves_first(toy, sig):
    """A signal in mid-search is held until the pass in flight ends; the searches are saved there and
    then stop with KeyboardInterrupt. Resumed from that save, they end exactly as uninterrupted ones,
    and the handlers in place before are back."""
    cfg = replace(SMALL, n_start=2, growth=2.0, n_max=16)
    targets = random_targets(toy.info.real_token_ids, 3, cfg.n_max, seed=7)
    reference = cr.cram(toy, targets, 2, cfg, seed=7)
    before = signal.getsignal(sig)
    saved = []

    def checkpoint(states):
        saved.append(states)
        if len(saved) == 20:
            signal.raise_signal(sig)       # as a user's Ctrl-C or a scheduler's SIGTERM would

    with pytest.raises(KeyboardInterrupt, match=f"stopped by {sig.name} at a saved point"):
        cr.cram(toy, targets, 2, cfg, seed=7, on_checkpoint=checkpoint, checkpoint_seconds=0)
    assert len(saved) == 21                # the pass in flight ended, was saved, and nothing ran after
    assert signal.getsignal(sig) is before
    resumed = cr.cram(toy, targets, 2, cfg, seed=7, resume=saved[-1])
    assert _outcome(resumed) == _outcome(reference)
    assert all(np.array_equal(a.mem, b.mem) for a, b in zip(resumed, reference))


class _DyingInflight(Inflight):
    """An in-flight store whose process 'dies' after a few saves (the state is written first)."""

    def __init__(self, *args, after, **kwargs):
        super().__init__(*args, **kwargs)
        self.after = after

    def save(self, states):
        super().save(states)
        self.after -= 1
        if self.after == 0:
            raise _Interrupt


def test_sweep_resumes_the_targets_in_flight(toy64, tmp_path, monkeypatch):
    """A sweep killed with targets in flight resumes them from inflight.json: the same records as an
    uninterrupted sweep, none twice, the time before the kill kept in the records, the file removed
    at the end."""
    monkeypatch.setattr(cr, "CHECKPOINT_SECONDS", 0)
    cfg = replace(SMALL, max_steps=20)
    kw = dict(seed=5, batch_size=2)
    reference = cr.sweep(toy64, "random-tokens", [1, 2], 3, cfg, **kw)
    log = RecordLog(tmp_path / "records.jsonl", timed=True)
    with pytest.raises(_Interrupt):
        cr.sweep(toy64, "random-tokens", [1, 2], 3, cfg, log=log, inflight=_DyingInflight(tmp_path, after=120,
                                                                                              log=log), **kw)
    done = {r["key"] for r in RecordLog(log.path)}
    left = Inflight(tmp_path).states(done=done)
    assert left and 0 < len(done) < 6, "the kill should leave records and targets in flight"
    carried = json.loads((tmp_path / "inflight.json").read_text())["seconds"]
    Inflight(tmp_path, 1, 2).save({k: {"progress": 0} for k in done})     # a stale file of another rank
    resumed_log = RecordLog(log.path, timed=True)
    resumed = cr.sweep(toy64, "random-tokens", [1, 2], 3, cfg, log=resumed_log,
                       inflight=Inflight(tmp_path, log=resumed_log), **kw)
    keys = [r["key"] for r in RecordLog(log.path)]
    assert len(keys) == len(set(keys)) == 6 and _caps(resumed) == _caps(reference)
    first_new = next(r for r in RecordLog(log.path) if r["key"] not in done)
    assert carried > 0 and first_new["seconds"] >= carried
    assert not list(tmp_path.glob("inflight*.json")), "every in-flight file is removed at the end"


def _caps(records):
    return sorted((r["key"], r["capacity"]) for r in records)


@pytest.mark.parametrize("protocol", cr.PROTOCOLS)
def test_sweep_resumes_without_loss_or_duplicates(toy64, tmp_path, protocol):
    cfg = replace(SMALL, max_steps=20)
    grid = [4, 8] if protocol == "published" else None
    kw = dict(protocol=protocol, grid=grid, seed=5)
    reference = cr.sweep(toy64, "random-tokens", [1, 2], 3, cfg, log=RecordLog(tmp_path / "ref.jsonl"), **kw)
    path = tmp_path / "runs.jsonl"
    with pytest.raises(_Interrupt):
        cr.sweep(toy64, "random-tokens", [1, 2], 3, cfg, log=_DyingLog(path, after=4), **kw)
    assert len(RecordLog(path).records()) == 4
    resumed = cr.sweep(toy64, "random-tokens", [1, 2], 3, cfg, log=RecordLog(path), batch_size=2, **kw)
    keys = [json.loads(line)["key"] for line in path.read_text().splitlines()]   # every line, none merged
    assert len(keys) == len(set(keys)) == (6 if protocol == "search" else 12)
    assert _caps(resumed) == _caps(reference)


def test_shards_split_the_targets_and_merge_to_the_whole(toy64, tmp_path):
    cfg = replace(SMALL, max_steps=20)
    whole = cr.sweep(toy64, "random-tokens", [1], 5, cfg, seed=2)
    parts = [cr.sweep(toy64, "random-tokens", [1], 5, cfg, seed=2, shard=(r, 2),
                      log=RecordLog(tmp_path / f"r{r}.jsonl")) for r in (0, 1)]
    assert [r["index"] for r in parts[0]] == [0, 2, 4] and [r["index"] for r in parts[1]] == [1, 3]
    merged = cr.sweep(toy64, "random-tokens", [1], 5, cfg, seed=2, known=parts[0] + parts[1])
    assert _caps(merged) == _caps(whole)
    with pytest.raises(InputError, match="n-grid"):
        cr.sweep(toy64, "random-tokens", [1], 5, cfg, protocol="published", shard=(0, 2))


# --- targets ------------------------------------------------------------------------------------


def test_targets_fixed_by_seed_not_order():
    all_ = random_targets(range(50, 70), 6, 9, seed=7)
    assert torch.equal(random_targets(range(50, 70), 2, 9, seed=7, start=4), all_[4:])
    assert set(all_.unique().tolist()) <= set(range(50, 70))
    assert not torch.equal(random_targets(range(50, 70), 6, 9, seed=8), all_)


def _word_tokenizer(words):
    vocab = {w: i for i, w in enumerate(words)}
    return lambda text, add_special_tokens=False: {"input_ids": [vocab[w] for w in text.split()]}


def test_text_targets_are_chunks_of_the_text():
    words = "one two three four five six seven eight nine ten eleven twelve".split()
    tok = _word_tokenizer(words)
    t = text_targets(tok, 3, 4, seed=0, text=" ".join(words))
    assert sorted(t[:, 0].tolist()) == [0, 4, 8] and all((row.diff() == 1).all() for row in t)
    assert torch.equal(text_targets(tok, 1, 4, seed=0, start=2, text=" ".join(words)), t[2:])
    with pytest.raises(InputError, match="chunks"):
        text_targets(tok, 4, 4, text=" ".join(words))


def test_random_word_targets_are_uniform_whole_words():
    words = tuple(f"w{i}" for i in range(50))
    tok = _word_tokenizer(words)
    t = word_targets(tok, 40, 30, seed=3, words=words)
    assert t.shape == (40, 30) and torch.equal(word_targets(tok, 2, 30, seed=3, start=5, words=words), t[5:7])
    counts = np.bincount(t.flatten().numpy(), minlength=50)
    assert counts.min() > 0 and counts.max() < 3 * counts.mean()          # all words, none dominating
    shipped = word_targets(tok, 1, 5, words=words)
    assert shipped.shape == (1, 5)


def test_kinds_and_the_deprecated_alias(toy):
    with pytest.raises(InputError, match="tokenizer"):
        make_targets(toy, "text", 2, 8)
    with pytest.raises(InputError, match="tokenizer"):
        make_targets(toy, "random-words", 2, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = make_targets(toy, "random", 2, 8, seed=1)
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)
    assert torch.equal(old, make_targets(toy, "random-tokens", 2, 8, seed=1))


def test_presets_and_validation():
    paper = cr.CramConfig.paper()
    published = (1e-2, (0.9, 0.9), 0.01, 3000, 500)
    assert (paper.lr, paper.betas, paper.weight_decay, paper.max_steps, paper.patience) == published
    assert paper.n_max >= 1024 and paper.first_token_given and paper.bisect
    assert cr.CramConfig.quick().lr == 0.1 and cr.CramConfig.quick().max_steps <= 300
    fixed = paper.fixed(40)
    assert (fixed.n_start, fixed.n_max, fixed.bisect, fixed.lr) == (40, 40, False, paper.lr)
    for bad in (dict(lr=0), dict(autocast_dtype="float8"), dict(n_start=1), dict(n_max=4, n_start=8),
                dict(prefix="bos"), dict(prefix_position="middle")):
        with pytest.raises(InputError):
            cr.CramConfig(**bad)
