"""fast/dropout.py against the plain Generator: the same masks from the same seed, the stream left at the same
place (so checkpoints of either resume the other), and dropout through either gradchecked."""
from __future__ import annotations

import json

import numpy as np
import pytest

import minitransformer as mt
import minitransformer.functional as F
from minitransformer import nn
from minitransformer.fast.dropout import FastGenerator, _word_threshold
from minitransformer.generator import Generator

LIKE = np.zeros(1, dtype=np.float32)
SHAPES = [(4, 6), (3, 5), (2, 2), (7,), (10, 33, 2), (1,), (1, 1), (64, 130), (0, 3)]


@pytest.mark.parametrize("p", [0.0, 0.1, 1 / 3, 0.5, 0.999999, 1.0, np.float64(0.1), np.float32(0.3)])
def test_the_fast_mask_is_the_plain_mask_drawn_after_the_same_draws(p):
    """The words are read without making uniforms: the same mask as uniform ≥ p, and the stream where the
    plain way leaves it, whatever came before (odd sizes leave half a 64-bit output waiting)."""
    plain, fast = Generator(11), FastGenerator(11)
    for shape in SHAPES:
        expected = plain.keep(shape, p, LIKE)
        mask = fast.keep(shape, p, LIKE)
        assert mask.dtype == bool and mask.shape == expected.shape == shape
        np.testing.assert_array_equal(mask, expected)
    position = [{k: v for k, v in g.state_dict()["cpu"].items() if k != "uinteger"} for g in (fast, plain)]
    assert position[0] == position[1]        # "uinteger" is a spare half-output, read only while has_uint32
    np.testing.assert_array_equal(fast.uniform((9,), LIKE), plain.uniform((9,), LIKE))


def test_the_mask_agrees_with_uniform_at_every_24_bit_value():
    words = np.arange(2**24, dtype=np.uint32) << 8             # every uniform float32 draws, (w >> 8)·2⁻²⁴
    uniforms = (words >> 8).astype(np.float32) * np.float32(2.0**-24)
    for p in (0.1, 0.25, 1 / 3, 0.7, np.float64(0.1)):
        np.testing.assert_array_equal(words >= _word_threshold(p), uniforms >= p)
    assert _word_threshold(1.0) is None                         # no uniform reaches 1


def test_a_state_saved_by_one_resumes_the_other():
    fast = FastGenerator(3)
    fast.keep((6, 8), 0.2, LIKE)
    state = json.loads(json.dumps(fast.state_dict()))          # JSON-ready, as in a checkpoint
    expected = fast.keep((5, 4), 0.2, LIKE)
    np.testing.assert_array_equal(Generator(0).load_state_dict(state).keep((5, 4), 0.2, LIKE), expected)
    assert isinstance(FastGenerator(0).load_state_dict(state), FastGenerator)


def _dropped(generator, x, p=0.3, residual=None):
    x = mt.Tensor(x, requires_grad=True)
    if residual is None:
        out = F.dropout(x, p, generator=generator)
    else:
        out = F.dropout_add(mt.Tensor(residual), x, p, generator=generator)
    gy = np.random.default_rng(7).standard_normal(x.shape)
    (out * mt.Tensor(gy)).sum().backward()
    return out.numpy(), np.asarray(x.grad)


@pytest.mark.parametrize("shape", [(3, 4), (1, 1), (2, 1, 5), (5,), (1, 7)])
@pytest.mark.parametrize("residual", [False, True])
def test_dropout_through_either_generator_gives_the_same_output_and_gradient(shape, residual):
    x = np.random.default_rng(2).standard_normal(shape)
    x = np.asfortranarray(x) if len(shape) > 1 else x                          # not C-contiguous where it can be
    base = np.random.default_rng(3).standard_normal(shape) if residual else None
    plain_out, plain_grad = _dropped(Generator(5), x, residual=base)
    fast_out, fast_grad = _dropped(FastGenerator(5), x, residual=base)
    np.testing.assert_array_equal(fast_out, plain_out)
    np.testing.assert_array_equal(fast_grad, plain_grad)


@pytest.mark.parametrize("generator", [Generator, FastGenerator])
def test_dropout_gradchecks_with_either_generator(rng, generator):
    x, y = (mt.Tensor(rng.standard_normal((4, 5)), requires_grad=True) for _ in range(2))
    assert mt.gradcheck(lambda x: F.dropout(x, 0.4, generator=generator(5)), [x])
    assert mt.gradcheck(lambda x, y: F.dropout_add(x, y, 0.4, generator=generator(5)), [x, y])


class DropoutUnscaled(F.Dropout):
    """Forgets the 1/(1 − p) on the way back."""

    def backward(self, gy):
        (keep,) = self.saved_arrays
        return gy * keep


@pytest.mark.parametrize("generator", [Generator, FastGenerator])
def test_a_broken_dropout_backward_fails_with_either_generator(rng, generator):
    x = mt.Tensor(rng.standard_normal((4, 5)), requires_grad=True)
    with pytest.raises(mt.GradcheckError, match=r"gradient of input 0 .* is wrong"):
        mt.gradcheck(lambda x: DropoutUnscaled(0.4, generator(5))(x), [x])


def test_the_command_lines_dropout_layer_draws_with_the_fast_generator():
    nn.init.set_seed(0)
    layer = nn.Dropout(0.3)
    assert isinstance(layer.generator, FastGenerator)
    x = mt.Tensor(np.ones((4, 6), dtype=np.float32))
    plain = Generator(layer.generator.initial_seed)
    np.testing.assert_array_equal(layer(x).numpy(), F.dropout(x, 0.3, generator=plain).numpy())
