"""A hand-built transformer that attains Corollary 4.6's slope: the matching lower bound.

:class:`DigitTransformer` is a causal transformer with explicit weights (no training): an input
projection and a positional table, two single-head softmax attention layers and five ReLU MLPs on a
residual stream, and a linear unembedding. Its prompt is *written down* (:func:`encode_prompt`): each
token is spread over q digits in base :math:`b = \\lceil |V|^{1/q}\\rceil` (q = 1: one base-|V| digit),
each of the d coordinates of a prompt vector holds j such digits, so each vector stores
:math:`k = \\lfloor dj/q\\rfloor` tokens, and greedy decoding (:func:`generate`, which feeds every argmax
token back in) emits them in order. So every sequence of length k·m is accessible with m vectors.

How it decodes the token at output position p (m prompt vectors at positions 0..m-1):

1. *MLP 0* flags token positions: token embeddings have first coordinate 3r, outside the prompt
   cube [-r, r]^d, and ReLU(x_1 - r - ε/2)/(2r - ε/2) is 1 for them and 0 for prompt vectors;
2. *attention 1* finds the last prompt position m - 1 (scores grow with position and drop for tokens);
3. *MLP 1* computes s = p - (m - 1), the index of the token to emit, and the vector index ⌊s/k⌋;
4. *attention 2* reads that prompt vector (score :math:`-\\beta (q - \\lfloor s/k \\rfloor)^2` over
   positions q);
5. *MLP 2* turns each coordinate into its grid index c = (x + r)/ε, extracts its base-b digits
   with ReLU steps, and one-hot selects token number w = s mod k; *MLP 3* rounds the last digit of each
   coordinate (the others are already integers); *MLP 4* gates token w's q digits and sums them,
   :math:`y = \\sum_{i<q} b^{q-1-i} a_{wq+i}`, the token id;
6. the unembedding scores token v by :math:`2vy - v^2`, whose argmax is the nearest integer to y.

Every step function is a pair of ReLUs, ``ReLU(2(c - T) + 1.5) - ReLU(2(c - T) + 0.5)``, which is
exactly 0 or 1 when c is within 1/4 of an integer; softmax attention with logit gaps of
:data:`ATTENTION_MARGIN` nats puts weight below e^-40 off target.

Precision model. The prompt is quantised: each coordinate lies on the grid
:math:`-r + \\varepsilon\\{0, \\dots, \\Lambda - 1\\}`, :math:`\\Lambda = b^j`,
:math:`\\varepsilon = 2r/(\\Lambda - 1)`, so the grid spans [-r, r] and
:math:`1 + 2r/\\varepsilon = \\Lambda`. The network is exact on the grid, and every prompt whose
coordinates lie within ε/4 of grid values decodes to the same sequence: the model factors through
rounding to the grid, the quantisation hypothesis of Theorem 4.5. Between those cells nothing is
claimed. Arithmetic is float64 by default; a dtype whose mantissa cannot hold the network's largest
integers (logits up to :math:`2(|V| - 1)^2`) exactly, with :data:`HEADROOM_BITS` to spare, is refused.
With one digit per token (q = 1, b = |V|), Corollary 4.6's slope at this ε is
:math:`C = d \\ln \\Lambda/\\ln|V| = dj = k`: the bound is attained, k/C = 1. At a given precision ε the
construction takes the most digits that fit, :math:`b^j \\le 1 + 2r/\\varepsilon`, and the q that
stores the most tokens (:meth:`DigitConfig.for_eps`); its grid step is then at least ε, so its
prompts are ε apart, and :func:`lower_bound_ratio` gives k/C at that ε. Sub-token digits matter when
a coordinate holds less than one base-|V| digit: at fp16 relative precision (1 + 2r/ε = 4097) and
|V| = 50304, q = 4 digits in base 15, j = 3 per coordinate, give k/C = 0.976.

The prompt vectors live in R^d; the residual stream is wider (positions, flags, the digits of the
read vector and the selector), as in any transformer whose embedding is followed by a wider
computation. The bound's d is the dimension of the prompt's support, the prompt vectors' own, so C is
computed with d.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from accessibility import bounds
from accessibility.checks import InputError, at_least, positive

#: Logit gap (nats) between the attended position and any other: off-target weight below e^-40.
ATTENTION_MARGIN = 40.0
#: First coordinate of every token embedding, in units of r: outside the prompt cube [-r, r]^d.
TOKEN_FLAG = 3.0
#: Largest grid size Λ = b^j: float64 holds integers exactly far beyond, but the digit MLP has about
#: 2d·Λ/b step units, so keep it small.
MAX_LEVELS = 2**16
#: Bits of the mantissa kept free: every integer the network computes (logits up to 2(|V| - 1)^2, grid
#: indices up to Λ, attention scores up to β·L^2 for context length L) stays below 2^(bits - 4), so
#: rounding stays far inside the 1/4 margins of the steps and the unit gaps between logits.
HEADROOM_BITS = 4


def _base(vocab_size: int, token_digits: int) -> int:
    """⌈|V|^(1/q)⌉ in integers: the smallest b with b^q >= |V|."""
    base = max(1, int(round(vocab_size ** (1 / token_digits))))
    while base**token_digits < vocab_size:
        base += 1
    while base > 1 and (base - 1) ** token_digits >= vocab_size:
        base -= 1
    return base


def _fitting_digits(base: int, levels: float, most: float = math.inf) -> int:
    """The largest j with b^j <= ``levels`` (and <= ``most``): digits a coordinate holds at 1 + 2r/ε."""
    j = 0
    while base ** (j + 1) <= min(levels, most) * (1 + 1e-12):
        j += 1
    return j


def _most_digits(vocab_size: int) -> int:
    """The most digits a token can be spread over (base 2): ⌈log2 |V|⌉."""
    return (vocab_size - 1).bit_length()


@dataclass(frozen=True)
class DigitConfig:
    """The construction's parameters.

    Attributes
    ----------
    d_model : d, the dimension of the prompt vectors.
    vocab_size : |V|.
    digits : j, base-b digits stored in each coordinate (Λ = b^j grid values).
    r : support radius (largest absolute coordinate of a prompt vector).
    max_vectors : the largest prompt length m the positional table covers.
    token_digits : q, digits per token, in base b = ⌈|V|^(1/q)⌉ (1: one base-|V| digit per token).
    """

    d_model: int = 8
    vocab_size: int = 16
    digits: int = 2
    r: float = 1.0
    max_vectors: int = 8
    token_digits: int = 1

    def __post_init__(self):
        at_least("d_model", self.d_model, 1, integer=True)
        at_least("vocab_size", self.vocab_size, 2, integer=True)
        at_least("digits", self.digits, 1, integer=True)
        positive("r", self.r)
        at_least("max_vectors", self.max_vectors, 1, integer=True)
        at_least("token_digits", self.token_digits, 1, integer=True)
        if self.levels > MAX_LEVELS:
            raise InputError(f"base**digits must be <= {MAX_LEVELS}, got {self.base}**{self.digits}")
        if self.tokens_per_vector < 1:
            raise InputError(f"d_model * digits = {self.d_model * self.digits} < token_digits = "
                             f"{self.token_digits}: a vector cannot hold a token")

    @classmethod
    def for_eps(cls, *, d_model: int, vocab_size: int, r: float, eps: float,
                max_vectors: int = 8) -> DigitConfig:
        """The construction that stores the most tokens per vector at precision ε: for each q, the most
        digits that fit, :math:`b^j \\le 1 + 2r/\\varepsilon` with Λ <= :data:`MAX_LEVELS`; then the q with
        the largest :math:`k = \\lfloor dj/q\\rfloor` (the smallest q on a tie)."""
        levels = 1 + 2 * positive("r", r) / positive("eps", eps)
        layouts = [(d_model * _fitting_digits(_base(vocab_size, q), levels, MAX_LEVELS) // q, -q)
                   for q in range(1, _most_digits(vocab_size) + 1)]
        k, minus_q = max(layouts)
        if k < 1:
            raise InputError(f"1 + 2r/eps = {levels:.3g}: a vector of {d_model} coordinates cannot hold "
                             f"one of {vocab_size} tokens")
        digits = _fitting_digits(_base(vocab_size, -minus_q), levels, MAX_LEVELS)
        return cls(d_model=d_model, vocab_size=vocab_size, digits=digits, r=r, max_vectors=max_vectors,
                   token_digits=-minus_q)

    @property
    def base(self) -> int:
        """b = ⌈|V|^(1/q)⌉: the smallest base whose q digits index every token."""
        return _base(self.vocab_size, self.token_digits)

    @property
    def levels(self) -> int:
        """Λ = b^j grid values per coordinate."""
        return self.base**self.digits

    @property
    def eps(self) -> float:
        """The construction's precision: the grid step 2r/(Λ - 1)."""
        return 2 * self.r / (self.levels - 1)

    @property
    def tokens_per_vector(self) -> int:
        """k = ⌊d·j/q⌋."""
        return self.d_model * self.digits // self.token_digits

    @property
    def largest_integer(self) -> float:
        """The largest magnitude the network computes with: logits (2(|V| - 1)^2), grid indices (Λ) or
        attention scores (β·L^2)."""
        return max(2.0 * (self.vocab_size - 1) ** 2, float(self.levels),
                   ATTENTION_MARGIN * self.context_length**2)

    @property
    def context_length(self) -> int:
        return self.max_vectors * (self.tokens_per_vector + 1)

    @property
    def slope(self) -> float:
        """Corollary 4.6's C at the construction's own r and ε (equal to k up to rounding)."""
        return float(bounds.slope_bound(d_model=self.d_model, vocab_size=self.vocab_size, r=self.r,
                                        eps=self.eps))


class _Layout:
    """Names of the residual stream's coordinates."""

    def __init__(self, cfg: DigitConfig):
        sizes = {"x": cfg.d_model, "one": 1, "pos": 1, "pos2": 1, "is_token": 1, "last": 1, "vec": 1,
                 "read": cfg.d_model, "digit": cfg.d_model * cfg.digits, "select": cfg.tokens_per_vector,
                 "y": 1}
        self.slots, start = {}, 0
        for name, size in sizes.items():
            self.slots[name] = list(range(start, start + size))
            start += size
        self.width = start

    def __getitem__(self, name):
        return self.slots[name]


class _Attention(nn.Module):
    """Single-head causal softmax attention with explicit matrices (no 1/sqrt(d) scaling)."""

    def __init__(self, width: int, head: int, value: int, dtype):
        super().__init__()
        self.q = nn.Linear(width, head, bias=False, dtype=dtype)
        self.k = nn.Linear(width, head, bias=False, dtype=dtype)
        self.v = nn.Linear(width, value, bias=False, dtype=dtype)
        self.o = nn.Linear(value, width, bias=False, dtype=dtype)

    def forward(self, h):  # (batch, seq, width)
        scores = self.q(h) @ self.k(h).transpose(1, 2)  # (batch, seq, seq)
        mask = torch.ones(h.shape[1], h.shape[1], dtype=torch.bool, device=h.device).triu(1)
        weights = scores.masked_fill(mask, -math.inf).softmax(-1)
        return self.o(weights @ self.v(h))


def _digit_units(cfg: DigitConfig) -> int:
    """Hidden units of MLP 2: per coordinate one for c and two per step of each floor ⌊c/b^e⌋
    (b^(j-e) - 1 steps, e = 1..j-1); two per step of the selector (k - 1 steps)."""
    per_coordinate = 1 + sum(2 * (cfg.base ** (cfg.digits - e) - 1) for e in range(1, cfg.digits))
    return cfg.d_model * per_coordinate + 2 * (cfg.tokens_per_vector - 1)


def _mlp(width: int, hidden: int, dtype) -> nn.Sequential:
    return nn.Sequential(nn.Linear(width, hidden, dtype=dtype), nn.ReLU(),
                         nn.Linear(hidden, width, dtype=dtype))


def _zero(module: nn.Module) -> None:
    for p in module.parameters():
        p.requires_grad_(False)
        p.zero_()


class DigitTransformer(nn.Module):
    """The construction as a causal transformer: ``forward(inputs_embeds) -> logits``.

    ``inputs_embeds`` has shape (batch, seq, d_model): the prompt vectors followed by the embeddings
    of the tokens emitted so far (:meth:`embed`). Weights are set in ``__init__`` and never trained.
    """

    def __init__(self, config: DigitConfig, dtype: torch.dtype = torch.float64):
        super().__init__()
        exact = 2.0 / torch.finfo(dtype).eps / 2**HEADROOM_BITS  # integers are exact up to 2 / eps
        if config.largest_integer >= exact:
            raise InputError(f"dtype {dtype} cannot hold this network's logits exactly: they reach "
                             f"{config.largest_integer:.3g}, above {exact:.3g}; use torch.float64")
        self.config, self.layout = config, _Layout(config)
        cfg, lay, width = config, self.layout, self.layout.width
        self.embed_in = nn.Linear(cfg.d_model, width, bias=False, dtype=dtype)
        positions = torch.arange(cfg.context_length, dtype=dtype)
        table = torch.zeros(cfg.context_length, width, dtype=dtype)
        table[:, lay["one"][0]], table[:, lay["pos"][0]] = 1, positions
        table[:, lay["pos2"][0]] = positions**2
        self.register_buffer("positions", table)
        tokens = torch.zeros(cfg.vocab_size, cfg.d_model, dtype=dtype)
        tokens[:, 0] = TOKEN_FLAG * cfg.r  # the model reads only that a token is there, not which
        self.register_buffer("token_embedding", tokens)
        self.mlp0 = _mlp(width, 1, dtype)
        self.attn1 = _Attention(width, 1, 1, dtype)
        self.mlp1 = _mlp(width, 2 * cfg.max_vectors, dtype)
        self.attn2 = _Attention(width, 3, cfg.d_model, dtype)
        self.mlp2 = _mlp(width, _digit_units(cfg), dtype)
        self.mlp3 = _mlp(width, cfg.d_model * (1 + 2 * (cfg.base - 1)), dtype)
        self.mlp4 = _mlp(width, cfg.tokens_per_vector * cfg.token_digits, dtype)
        self.unembed = nn.Linear(width, cfg.vocab_size, bias=False, dtype=dtype)
        for module in self.children():
            _zero(module)
        with torch.no_grad():
            self._build()

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """Token embeddings in the prompt's space, shape ids.shape + (d_model,)."""
        return self.token_embedding[ids]

    def forward(self, inputs_embeds: torch.Tensor) -> torch.Tensor:
        return self.unembed(self.hidden(inputs_embeds))  # (batch, seq, vocab_size)

    def hidden(self, inputs_embeds: torch.Tensor) -> torch.Tensor:
        """The residual stream after the last sublayer, shape (batch, seq, width)."""
        seq = inputs_embeds.shape[1]
        if seq > self.config.context_length:
            raise InputError(f"sequence of {seq} positions exceeds the context length "
                             f"{self.config.context_length}")
        h = self.embed_in(inputs_embeds.to(self.positions.dtype)) + self.positions[:seq]
        for sublayer in (self.mlp0, self.attn1, self.mlp1, self.attn2, self.mlp2, self.mlp3, self.mlp4):
            h = h + sublayer(h)
        return h

    # --- weights ------------------------------------------------------------------------------

    def _build(self) -> None:
        cfg, lay = self.config, self.layout
        one, pos, flag = lay["one"][0], lay["pos"][0], lay["is_token"][0]
        self.embed_in.weight[lay["x"], list(range(cfg.d_model))] = 1.0
        # MLP 0: is_token = ReLU(x_1 - r - ε/2) / (2r - ε/2)
        threshold = cfg.r + cfg.eps / 2
        self.mlp0[0].weight[0, lay["x"][0]], self.mlp0[0].bias[0] = 1.0, -threshold
        self.mlp0[2].weight[flag, 0] = 1 / (TOKEN_FLAG * cfg.r - threshold)
        # attention 1: score = β (1 - is_token + pos/P); the last prompt position wins; value = pos
        span = float(cfg.context_length)
        self.attn1.q.weight[0, one] = ATTENTION_MARGIN * span
        key = self.attn1.k.weight
        key[0, one], key[0, flag], key[0, pos] = 1.0, -1.0, 1 / span
        self.attn1.v.weight[0, pos], self.attn1.o.weight[lay["last"][0], 0] = 1.0, 1.0
        # MLP 1: vec = Σ_q step(s >= q k), s = pos - last
        s = {pos: 1.0, lay["last"][0]: -1.0}
        for q in range(1, cfg.max_vectors + 1):
            self._step(self.mlp1, 2 * (q - 1), s, q * cfg.tokens_per_vector, {lay["vec"][0]: 1.0})
        # attention 2: score = 2β vec·pos - β pos² - β is_token; value = the prompt vector
        self.attn2.q.weight[0, lay["vec"][0]] = 2 * ATTENTION_MARGIN
        self.attn2.q.weight[1, one] = -ATTENTION_MARGIN
        self.attn2.q.weight[2, one] = -ATTENTION_MARGIN
        key = self.attn2.k.weight
        key[0, pos], key[1, lay["pos2"][0]], key[2, flag] = 1, 1, 1
        for g in range(cfg.d_model):
            self.attn2.v.weight[g, lay["x"][g]] = 1.0
            self.attn2.o.weight[lay["read"][g], g] = 1.0
        self._build_digits()
        self._build_rounding()
        # MLP 4: y = Σ_i b^(q-1-i) ReLU(digit_{wq+i} - b (1 - select_w)) = the selected token's id
        q, base = cfg.token_digits, float(cfg.base)
        for unit in range(cfg.tokens_per_vector * q):
            w, i = divmod(unit, q)
            self.mlp4[0].weight[unit, lay["digit"][unit]] = 1.0
            self.mlp4[0].weight[unit, lay["select"][w]] = base
            self.mlp4[0].bias[unit] = -base
            self.mlp4[2].weight[lay["y"][0], unit] = base ** (q - 1 - i)
        # unembedding: logit_v = 2 v y - v²; argmax = the nearest integer to y
        v = torch.arange(cfg.vocab_size, dtype=self.unembed.weight.dtype)
        self.unembed.weight[:, lay["y"][0]], self.unembed.weight[:, one] = 2 * v, -(v**2)

    def _step(self, mlp, unit: int, inputs: dict, threshold: float, outputs: dict) -> None:
        """Hidden units ``unit, unit + 1`` add ``step(Σ inputs >= threshold)`` to ``outputs``:
        ReLU(2(z - T) + 1.5) - ReLU(2(z - T) + 0.5), exact for z within 1/4 of an integer."""
        for offset, (shift, sign) in enumerate(((1.5, 1.0), (0.5, -1.0))):
            for slot, coef in inputs.items():
                mlp[0].weight[unit + offset, slot] = 2 * coef
            mlp[0].bias[unit + offset] = -2 * threshold + shift
            for slot, coef in outputs.items():
                mlp[2].weight[slot, unit + offset] += sign * coef

    def _build_rounding(self) -> None:
        """MLP 3: the last digit a of each coordinate, c - b⌊c/b⌋, is exact only on the grid; replace it by
        Σ_t step(a >= t), t = 1..b-1 (exact within 1/4 of an integer): remove ReLU(a + 1) - 1 = a
        (a >= -1/4), add the steps. Then every digit is an integer, and so is the token id they build."""
        cfg, lay, mlp, unit = self.config, self.layout, self.mlp3, 0
        for g in range(cfg.d_model):
            slot = lay["digit"][g * cfg.digits + cfg.digits - 1]
            mlp[0].weight[unit, slot], mlp[0].bias[unit] = 1.0, 1.0
            mlp[2].weight[slot, unit], mlp[2].bias[slot] = -1.0, mlp[2].bias[slot] + 1.0
            unit += 1
            for t in range(1, cfg.base):
                self._step(mlp, unit, {slot: 1.0}, t, {slot: 1.0})
                unit += 2

    def _build_digits(self) -> None:
        """MLP 2: digits a_{g,t} of c_g = (read_g + r)/ε and the one-hot selector of w = s mod k."""
        cfg, lay = self.config, self.layout
        base, j, k = cfg.base, cfg.digits, cfg.tokens_per_vector
        mlp, unit = self.mlp2, 0
        for g in range(cfg.d_model):
            c = {lay["read"][g]: 1 / cfg.eps}
            # F_0 = c = ReLU(c + 1) - 1 (c >= -1/4), in the least significant digit's slot
            mlp[0].weight[unit, lay["read"][g]], mlp[0].bias[unit] = 1 / cfg.eps, cfg.r / cfg.eps + 1
            mlp[2].weight[lay["digit"][g * j + j - 1], unit] = 1.0
            mlp[2].bias[lay["digit"][g * j + j - 1]] -= 1.0
            unit += 1
            for e in range(1, j):  # F_e = ⌊c / base^e⌋ = Σ_q step(c >= q base^e); a_t = F_e - base F_{e+1}
                outputs = {lay["digit"][g * j + j - 1 - e]: 1.0, lay["digit"][g * j + j - e]: -float(base)}
                for q in range(1, base ** (j - e)):
                    self._step(mlp, unit, c, q * base**e - cfg.r / cfg.eps, outputs)
                    unit += 2
        t = {lay["pos"][0]: 1.0, lay["last"][0]: -1.0, lay["vec"][0]: -float(k)}  # t = s - k·vec
        for w in range(k):  # select_w = step(t >= w) - step(t >= w + 1), step(t >= 0) = 1 for t >= 0
            if w > 0:
                self._step(mlp, unit, t, w, {lay["select"][w]: 1.0, lay["select"][w - 1]: -1.0})
                unit += 2
        mlp[2].bias[lay["select"][0]] += 1.0
        assert unit == _digit_units(cfg)


def _place_values(base: int, count: int) -> torch.Tensor:
    """b^(count-1), ..., b, 1: the weights of ``count`` digits, most significant first."""
    return base ** torch.arange(count - 1, -1, -1)


def encode_prompt(config: DigitConfig, tokens: torch.Tensor,
                  dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The prompt that makes :class:`DigitTransformer` emit ``tokens``: shape (batch, m, d) from (batch, k·m).

    Token ``i k + w`` becomes q base-b digits (most significant first), digits ``w q .. w q + q - 1`` of
    vector i; the d·j digits of a vector (the last d·j - kq of them zero) fill its coordinates, j each,
    coordinate g holding digits ``g j + t`` as the grid value
    :math:`-r + \\varepsilon \\sum_{t<j} a_{gj+t}\\, b^{j-1-t}`.
    """
    tokens = torch.as_tensor(tokens)
    cfg, k = config, config.tokens_per_vector
    if tokens.ndim != 2 or tokens.shape[1] % k or not 0 < tokens.shape[1] // k <= cfg.max_vectors:
        raise InputError(f"tokens must have shape (batch, k·m) with k = {k} and "
                         f"1 <= m <= {cfg.max_vectors}, got {tuple(tokens.shape)}")
    if tokens.min() < 0 or tokens.max() >= cfg.vocab_size:
        raise InputError(f"tokens must lie in [0, {cfg.vocab_size - 1}]")
    batch, m = tokens.shape[0], tokens.shape[1] // k
    q, j, base = cfg.token_digits, cfg.digits, cfg.base
    digits = tokens.reshape(batch, m, k, 1).to(torch.int64) // _place_values(base, q) % base  # (b, m, k, q)
    stream = torch.zeros(batch, m, cfg.d_model * j, dtype=torch.int64)
    stream[..., :k * q] = digits.reshape(batch, m, k * q)
    index = (stream.reshape(batch, m, cfg.d_model, j) * _place_values(base, j)).sum(-1)  # c in [0, Λ - 1]
    return (-cfg.r + cfg.eps * index.to(dtype)).to(dtype)


@torch.no_grad()
def generate(model: DigitTransformer, prompt: torch.Tensor, n: int) -> torch.Tensor:
    """Greedy decoding: ``n`` tokens, each the argmax of the last position's logits, fed back in.

    ``prompt`` has shape (batch, m, d); returns (batch, n) token ids.
    """
    at_least("n", n, 1, integer=True)
    inputs, out = prompt.to(model.positions.dtype), []
    for _ in range(int(n)):
        token = model.unembed(model.hidden(inputs)[:, -1]).argmax(-1)  # (batch,): logits of the last position
        out.append(token)
        inputs = torch.cat([inputs, model.embed(token)[:, None]], dim=1)
    return torch.stack(out, dim=1)


@dataclass(frozen=True)
class Certificate:
    """Greedy decoding of written-down prompts, for one prompt length m.

    Attributes
    ----------
    m : prompt length in vectors.
    length : k·m, the length of every target.
    samples : how many uniformly random targets were tried.
    reproduced : how many of them greedy decoding emitted exactly.
    slope : Corollary 4.6's C at the construction's ε (the bound on the length is C·m).
    """

    m: int
    length: int
    samples: int
    reproduced: int
    slope: float

    @property
    def all_reproduced(self) -> bool:
        return self.reproduced == self.samples


def certify(model: DigitTransformer, m: int, samples: int, *,
            generator: torch.Generator | None = None) -> Certificate:
    """Draw ``samples`` uniform targets of length k·m, write their prompts, decode them greedily."""
    cfg = model.config
    at_least("m", m, 1, integer=True)
    length = cfg.tokens_per_vector * int(m)
    targets = torch.randint(cfg.vocab_size, (int(samples), length), generator=generator)
    emitted = generate(model, encode_prompt(cfg, targets, model.positions.dtype), length)
    reproduced = int((emitted == targets).all(dim=1).sum())
    return Certificate(m=int(m), length=length, samples=int(samples), reproduced=reproduced, slope=cfg.slope)


def lower_bound_ratio(*, vocab_size, r, eps, d_model=None) -> float:
    """k/C of the construction at precision ε: the best spread of tokens over digits.

    With :math:`\\lambda = \\ln(1 + 2r/\\varepsilon)/\\ln|V|` (Corollary 4.6's C per coordinate) and, for
    q digits per token in base :math:`b_q = \\lceil |V|^{1/q}\\rceil`, :math:`j_q` the most digits with
    :math:`b_q^{j_q} \\le 1 + 2r/\\varepsilon`,

    .. math:: \\frac{k}{C} = \\max_q \\frac{\\lfloor d\\, j_q/q\\rfloor}{d\\,\\lambda},

    which for d a multiple of the best q (or ``d_model=None``) is :math:`\\max_q j_q/(q\\lambda)`.
    q = 1 alone gives :math:`\\lfloor\\lambda\\rfloor/\\lambda`, 0 when :math:`\\lambda < 1` (a coordinate
    holds less than one base-|V| digit, as at fp16 precision with the paper's vocabularies); spreading
    tokens over digits recovers most of the slope. A formula: the grids it needs may exceed
    :data:`MAX_LEVELS`.

    >>> lower_bound_ratio(vocab_size=16, r=1.0, eps=2 / 255)
    1.0
    >>> round(lower_bound_ratio(vocab_size=50304, r=1.0, eps=2**-11), 3)  # fp16 relative, Pythia's |V|
    0.976
    """
    vocab_size = int(at_least("vocab_size", vocab_size, 2, integer=True))
    levels = 1 + 2 * positive("r", r) / positive("eps", eps)
    lam = math.log(levels) / math.log(vocab_size)
    per_coordinate = [(_fitting_digits(_base(vocab_size, q), levels), q)
                      for q in range(1, _most_digits(vocab_size) + 1)]
    if d_model is None:
        return max(j / q for j, q in per_coordinate) / lam
    d = int(at_least("d_model", d_model, 1, integer=True))
    return max(d * j // q for j, q in per_coordinate) / (d * lam)
