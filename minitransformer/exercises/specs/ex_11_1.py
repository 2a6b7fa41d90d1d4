"""Exercise 11.1 — one beam-search step (chapters/11-translator.md): its public tests, cases and mistakes (spec.py)."""
from __future__ import annotations

import itertools
import math
from types import SimpleNamespace

import numpy as np

import minitransformer as mt
from minitransformer.decode import beam_search, greedy_decode, length_penalty

from ..spec import ExerciseSpec, case, mistake, parametrize


# -- the public tests (pytest -m grades_11_1) -------------------------------------------------------------------------
PAD, BOS, EOS = 0, 1, 2


class _Markov:
    """A "model" whose next-token distribution depends on the last token only: log_table[last]."""

    def __init__(self, log_table: np.ndarray, max_len: int = 8) -> None:
        self.log_table = np.asarray(log_table, dtype=float)
        self.config = SimpleNamespace(pad_id=PAD, max_len=max_len)

    def parameters(self):
        return []

    def encode(self, src):
        return mt.Tensor(np.zeros((src.shape[0], src.shape[1], 1))), (src != PAD)[:, None, None, :]

    def init_cache(self):
        return SimpleNamespace(reorder=lambda rows: None)

    def decode_step(self, last_ids, memory, src_mask, cache):
        return mt.Tensor(self.log_table[np.asarray(last_ids)])


def _table(rows: dict | None, vocab: int = 6, rng=None) -> np.ndarray:
    """A log-probability table: ``rows`` {last: {token: p}} as given, or random rows when ``rows`` is None."""
    table = np.full((vocab, vocab), -1e9)
    if rows is None:                  # eos (2) likely early, so that finished and live beams compete
        for last in range(vocab):
            allowed = np.concatenate([[EOS], rng.permutation(np.arange(3, vocab))[:max(2, vocab // 2)]])
            p = rng.dirichlet(np.ones(len(allowed)))
            table[last, allowed] = np.log(p)
    else:
        for last, row in rows.items():
            for token, p in row.items():
                table[int(last), int(token)] = math.log(p)
    return table


def _best_by_enumeration(table: np.ndarray, alpha: float, longest: int) -> list[int]:
    """The eos-terminated output with the best length-penalised score, by trying every one."""
    words = [t for t in range(table.shape[0]) if t not in (PAD, BOS, EOS)]
    best, best_score = None, -math.inf
    for length in range(longest + 1):
        for tokens in itertools.product(words, repeat=length):
            path = [BOS, *tokens, EOS]
            log_p = sum(table[a, b] for a, b in zip(path, path[1:]))
            score = log_p / length_penalty(length + 1, alpha)
            if score > best_score:
                best, best_score = list(tokens), score
    return best


@parametrize("alpha", [0.0, 0.6])
def test_beam_search_escapes_the_greedy_trap(alpha):
    # after bos "3" is likelier than "4", but "3" leads nowhere certain while "4" ends at once
    table = _table({BOS: {3: 0.6, 4: 0.4}, 3: {5: 0.4, 3: 0.3, 4: 0.3}, 4: {EOS: 0.9, 5: 0.1},
                    5: {EOS: 0.9, 5: 0.1}})
    model, src = _Markov(table), np.array([[7, 7]])
    best = _best_by_enumeration(table, alpha, longest=4)
    assert greedy_decode(model, src, BOS, EOS)[0] != best          # the trap is real
    assert beam_search(model, src, BOS, EOS, beam_size=2, alpha=alpha)[0][0].tokens == best


def test_beam_of_one_is_greedy(rng):
    probabilities = rng.dirichlet(np.ones(4), size=6) * 0.999      # tokens 2..5, rows for every last token
    table = np.full((6, 6), -1e9)
    table[:, 2:] = np.log(probabilities)
    model, src = _Markov(table, max_len=6), np.array([[7, 7, 7], [7, 0, 0]])
    beams = beam_search(model, src, BOS, EOS, beam_size=1, alpha=0.0)
    assert [b[0].tokens for b in beams] == greedy_decode(model, src, BOS, EOS)


def test_n_best_hypotheses_come_sorted_with_their_log_probabilities():
    table = _table({BOS: {3: 0.5, 4: 0.3, EOS: 0.2}, 3: {EOS: 1.0}, 4: {EOS: 1.0}})
    results = beam_search(_Markov(table), np.array([[7]]), BOS, EOS, beam_size=3, alpha=0.0, n_best=3)[0]
    assert [h.tokens for h in results] == [[3], [4], []]
    np.testing.assert_allclose([h.log_prob for h in results], np.log([0.5, 0.3, 0.2]), rtol=1e-9)


def test_an_early_eos_does_not_cost_a_live_beam():
    # after bos the two best extensions are eos and "3": keeping only the top k = 2 would leave one live beam
    # and lose "4"; keeping the top 2k keeps both "3" and "4" alive, and [4] is the second-best output
    table = _table({BOS: {EOS: 0.4, 3: 0.35, 4: 0.25}, 3: {EOS: 0.5, 5: 0.5}, 4: {EOS: 1.0}, 5: {EOS: 1.0}})
    results = beam_search(_Markov(table), np.array([[7]]), BOS, EOS, beam_size=2, alpha=0.0, n_best=2)[0]
    assert [h.tokens for h in results] == [[], [4]]


# -- the cases `grade` scores: public (the tests' inputs) and hidden ---------------------------------------
def probe_beam_search(rng, rows=None, vocab: int = 6, sources=((7, 7),), beam_size: int = 2, alpha: float = 0.0,
                      n_best: int = 1, max_len: int = 8) -> dict:
    """Beam search over a Markov "model": the n-best tokens (−1 pads) and log-probabilities."""
    from minitransformer.decode import beam_search

    model = _Markov(_table(rows, vocab, rng), max_len)
    source = np.asarray([list(s) for s in sources])
    results = beam_search(model, source, BOS, EOS, beam_size=beam_size, alpha=alpha, n_best=n_best)
    longest = max([len(h.tokens) for hypotheses in results for h in hypotheses] + [1])
    tokens = np.full((len(results), n_best, longest), -1, dtype=np.int64)
    log_probs = np.full((len(results), n_best), np.nan)
    for b, hypotheses in enumerate(results):
        for n, hypothesis in enumerate(hypotheses[:n_best]):
            tokens[b, n, :len(hypothesis.tokens)] = hypothesis.tokens
            log_probs[b, n] = hypothesis.log_prob
    return {"tokens": tokens, "log_prob": log_probs}


PUBLIC = ([case(f"the greedy trap, α = {a}", "beam_search", rows={BOS: {3: 0.6, 4: 0.4}, 3: {5: 0.4, 3: 0.3, 4: 0.3},
                                                                4: {EOS: 0.9, 5: 0.1}, 5: {EOS: 0.9, 5: 0.1}},
                alpha=a) for a in (0.0, 0.6)]
          # 7 tokens: with 6, this case's table repeats one token to the end, which a constant would answer
          + [case("a beam of one", "beam_search", vocab=7, sources=[[7, 7, 7], [7, 0, 0]], beam_size=1, max_len=6),
             case("three best, sorted", "beam_search", rows={BOS: {3: 0.5, 4: 0.3, EOS: 0.2}, 3: {EOS: 1.0},
                                                             4: {EOS: 1.0}}, sources=[[7]], beam_size=3, n_best=3),
             case("an early eos does not cost a live beam", "beam_search",
                  rows={BOS: {EOS: 0.4, 3: 0.35, 4: 0.25}, 3: {EOS: 0.5, 5: 0.5}, 4: {EOS: 1.0}, 5: {EOS: 1.0}},
                  sources=[[7]], beam_size=2, n_best=2)])


def hidden_case(r, n: int, count: int) -> dict:
    return case("a random Markov model", "beam_search", vocab=int(r.integers(5, 8)),
                sources=[[7] * int(r.integers(1, 4))] * int(r.integers(1, 3)),
                beam_size=(beam := int(r.integers(2, 5))), alpha=float(r.choice([0.0, 0.6, 1.0])),
                n_best=beam, max_len=int(r.integers(3, 8)))


# BEGIN TEACHER ONLY (the catalogued mistakes quote the solution: the student edition keeps MISTAKES = ())
MISTAKES = (
    mistake("k candidates, not 2k", "keep the 2k best extensions: up to k of them may end in eos, and k must stay alive",
            ("2 * k)", "k)")),
    mistake("beam scores not added", "an extension's score is its beam's log-probability so far plus the new token's: "
            "add alive_log_prob", ("xp.asarray(alive_log_prob[:, :, None], dtype=log_probs.dtype)", "0")),
)
# END TEACHER ONLY

SPEC = ExerciseSpec("11.1", public=PUBLIC, hidden=hidden_case, probes=[probe_beam_search], mistakes=MISTAKES)
