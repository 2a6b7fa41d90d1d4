"""The alignment scores of attention heads, on hand-made attention matrices."""

import numpy as np
import pytest

from minitransformer.alignment_scores import (AlignmentTally, alignment_accuracy, alignment_error_rate, attention_mass,
                                   offset_baseline, relation_accuracy)

DIAGONAL = [(i, i) for i in range(5)]          # (source, target)


def test_a_perfect_diagonal_scores_one_and_no_error():
    weights = np.eye(5)
    assert alignment_accuracy(weights, DIAGONAL) == 1.0
    assert attention_mass(weights, DIAGONAL) == 1.0
    assert alignment_error_rate(weights, DIAGONAL) == 0.0


def test_uniform_attention_puts_the_formulas_mass_on_the_gold_partners():
    """mass = mean over linked rows of |G_t| / S: rows with 1, 2 and 1 partners among S = 4."""
    weights = np.full((3, 4), 0.25)
    links = [(0, 0), (1, 1), (2, 1), (3, 2)]
    assert attention_mass(weights, links) == pytest.approx((1 + 2 + 1) / 4 / 3)
    # argmax of a uniform row is position 0: only row 0 has it as a partner
    assert alignment_accuracy(weights, links) == pytest.approx(1 / 3)
    # AER = 1 − (|A ∩ S| + |A ∩ P|) / (|A| + |S|): 3 argmax links (0, t); P = the 4 links;
    # S = the links of rows 0 and 2, which have one partner each; (0, 0) is in both
    assert alignment_error_rate(weights, links) == pytest.approx(1 - (1 + 1) / (3 + 2))
    one_row_two_partners = np.array([[0.0, 1.0, 0.0]])
    assert alignment_error_rate(one_row_two_partners, [(0, 0), (1, 0)]) == 0.0   # a possible link counts


def test_an_anti_diagonal_gets_nothing_right_and_rows_without_links_do_not_count():
    weights = np.eye(4)[::-1]
    links = [(0, 0), (1, 1), (3, 3)]               # row 2 has no gold link
    assert alignment_accuracy(weights, links) == 0.0
    assert attention_mass(weights, links) == 0.0
    assert alignment_error_rate(weights, links) == 1.0
    assert np.isnan(alignment_accuracy(weights, []))


def test_the_tally_over_sentences_weights_every_row_alike():
    tally = AlignmentTally()
    tally.add(np.eye(5), DIAGONAL)                  # 5 rows right
    tally.add(np.eye(3)[::-1], [(0, 0), (2, 2)])    # 2 rows wrong
    scores = tally.scores()
    assert scores["rows"] == 7 and scores["accuracy"] == pytest.approx(5 / 7)
    assert scores["mass"] == pytest.approx(5 / 7)
    assert scores["aer"] == pytest.approx(1 - (5 + 5) / (7 + 7))


def test_relations_against_the_best_fixed_offset():
    weights = np.eye(6, k=2)                        # every row looks two to the right (rows 4, 5: all zero)
    pairs = [(0, 2), (1, 3), (2, 3)]
    assert relation_accuracy(weights, pairs) == (2, 3)
    assert offset_baseline(pairs) == (2, pytest.approx(2 / 3))


def test_bad_shapes_and_links_are_named():
    with pytest.raises(ValueError, match=r"\(T, S\) matrix"):
        alignment_accuracy(np.ones(3), DIAGONAL)
    with pytest.raises(ValueError, match="outside the 5 × 5"):
        attention_mass(np.eye(5), [(7, 0)])
