"""accessibility.rates on the toy model: per-token log-probabilities against a direct forward pass,
and greedy rates against a step-by-step greedy loop."""

import pytest
import torch

from accessibility import rates
from accessibility.checks import InputError
from accessibility.models import load_model
from accessibility.targets import random_targets

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def toy():
    return load_model("toy")


def test_token_log_probs_match_a_direct_forward_pass(toy):
    targets = random_targets(range(16), 4, 9, seed=1)
    ours = rates.token_log_probs(toy, targets)
    with torch.no_grad():
        logp = toy.model(input_ids=targets).logits.float().log_softmax(-1)  # the toy has no BOS
    expected = torch.stack([logp[i, j, targets[i, j + 1]] for i in range(4) for j in range(8)]).reshape(4, 8)
    torch.testing.assert_close(ours, expected)


def test_greedy_rate_is_the_greedy_loop(toy):
    targets = random_targets(range(16), 3, 7, seed=2)
    ours = rates.greedy_log_probs(toy, targets, 6)
    ids, steps = targets[:, :1], []
    with torch.no_grad():
        for _ in range(6):
            best = toy.model(input_ids=ids).logits[:, -1].float().log_softmax(-1).max(-1)
            steps.append(best.values)
            ids = torch.cat([ids, best.indices[:, None]], dim=1)
    torch.testing.assert_close(ours, torch.stack(steps, dim=1), rtol=1e-5, atol=1e-5)
    r = rates.target_rates(toy, targets)
    assert (r.targets, r.tokens) == (3, 6) and r.greedy > 0
    assert r.entropy == pytest.approx(float(-rates.token_log_probs(toy, targets).mean()))
    assert r.greedy == pytest.approx(float(-ours.mean()))


def test_bad_targets(toy):
    with pytest.raises(InputError, match="n >= 2"):
        rates.target_rates(toy, torch.zeros(2, 1, dtype=torch.long))
