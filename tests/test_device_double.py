"""The whole stack on the device double (tests/device_double.py): the GPU path's discipline, on every run.

The double stands in for CuPy: its arrays live "on the device" and refuse to
become NumPy arrays implicitly, and it offers only the names CuPy has. Each test
here installs it, so "cuda" means the double: every op's and layer's gradcheck,
a training step, KV-cache decoding and beam search, checkpoints, the functions
the classroom exercises grade, and a short ``train --device cuda`` all run on
it. A host conversion hidden anywhere on those paths fails here, on a laptop,
before a student with a GPU meets it.
"""
from __future__ import annotations


import numpy as np
import pytest

import device_double
import minitransformer as mt
import minitransformer.functional as F
import minitransformer.nn as nn
from minitransformer import backend, optim
from minitransformer.functional.masks import causal_mask, padding_mask
from minitransformer.ops.broadcasting import unbroadcast

PAD, VOCAB = 0, 11


@pytest.fixture(autouse=True)
def cupy(monkeypatch):
    """Every test here runs with the double as CuPy and "cuda" as the default device."""
    return device_double.on_device_double(monkeypatch)


def on_device(array):
    return backend.to_device(np.asarray(array), "cuda")


def leaf(rng, *shape, positive=False):
    values = rng.uniform(0.5, 2.0, shape) if positive else rng.standard_normal(shape)
    return mt.Tensor(on_device(values), requires_grad=True)


def host(x):
    return backend.asnumpy(x.data if isinstance(x, mt.Tensor) else x)


# -- the double behaves like CuPy at the boundary ---------------------------------------------------

def test_device_arrays_refuse_every_implicit_trip_to_the_host(cupy):
    x = cupy.arange(6.0).reshape(2, 3)
    assert backend.get_device(x) == "cuda" and backend.xp_of(x) is cupy and not isinstance(x, np.ndarray)
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array is not allowed"):
        np.asarray(x)
    with pytest.raises(TypeError, match="Implicit conversion"):
        x.__array__()
    with pytest.raises(TypeError, match="numpy.exp was given a device array"):
        np.exp(x)
    with pytest.raises(TypeError, match="numpy.sum was given a device array"):
        np.sum(x)
    with pytest.raises(TypeError, match="Unsupported type <class 'numpy.ndarray'>"):
        x + np.ones(3)
    with pytest.raises(TypeError, match="numpy.add was given a device array"):
        np.ones(3) + x
    with pytest.raises(TypeError):
        float(x)                                          # six values are not one number
    with pytest.raises(TypeError, match="Unsupported type"):
        cupy.exp(np.ones(3))                              # a host array where CuPy wants a device one
    assert isinstance(np.float32(2.0) * x, cupy.ndarray)   # a NumPy scalar operand is fine on CuPy too


def test_explicit_trips_home_work_and_are_counted(cupy):
    x = cupy.arange(6.0).reshape(2, 3)
    total = x.sum()
    assert isinstance(total, cupy.ndarray) and total.shape == ()      # a reduction stays on the device
    assert isinstance(x[1, 2], cupy.ndarray)                          # so does a scalar index
    device_double.host_syncs.clear()
    assert float(total) == 15.0 and x[1, 2].item() == 5.0 and x.tolist()[0] == [0.0, 1.0, 2.0]
    np.testing.assert_array_equal(cupy.asnumpy(x), np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(x.get(), backend.asnumpy(x))
    assert dict(device_double.host_syncs) == {"float": 1, "item": 1, "tolist": 1, "asnumpy": 2, "get": 1}
    x[x > 2.0]                                               # a data-sized result: CuPy waits for it
    cupy.nonzero(x)
    assert device_double.host_syncs["boolean index"] == 1 and device_double.host_syncs["nonzero"] == 1


def test_only_the_names_cupy_has_are_offered(cupy):
    not_in_cupy = sorted(n for n in dir(np) if not n.startswith("_") and n not in device_double.NAMES["cupy"])
    assert "busday_count" in not_in_cupy
    with pytest.raises(AttributeError, match="module 'cupy' has no attribute 'busday_count'"):
        cupy.busday_count
    x = cupy.ones((2, 2))
    with pytest.raises(AttributeError, match="cupy.ndarray has no attribute 'getfield'"):
        x.getfield
    with pytest.raises(AttributeError, match="cupy.ndarray has no attribute 'data'"):
        x.data                                                # a device pointer on CuPy, never host memory
    with pytest.raises(AttributeError, match="cupy.random.Generator has no attribute 'normal'"):
        cupy.random.default_rng(0).normal
    with pytest.raises(TypeError, match="optimize=False or an explicit path"):
        cupy.einsum("ij,jk->ik", x, x, optimize=True)
    assert cupy.float32 is np.float32 and cupy.inf == np.inf


def test_random_state_draws_take_cupys_dtype(cupy):
    draws = cupy.random.RandomState(3).random_sample((4, 5), dtype=cupy.float32)
    assert isinstance(draws, cupy.ndarray) and draws.dtype == np.float32


def test_cupyx_scatter_add_accumulates_repeated_indices(cupy):
    target = cupy.zeros(3)
    backend.scatter_add(target, on_device([0, 0, 2]), on_device([1.0, 2.0, 5.0]))
    np.testing.assert_array_equal(host(target), [3.0, 0.0, 5.0])


def test_an_index_out_of_range_wraps_as_on_cupy_so_our_range_checks_matter(cupy):
    x = cupy.arange(3.0)
    assert host(x[on_device([3, -1])]).tolist() == [0.0, 2.0]     # NumPy would raise IndexError
    with pytest.raises(IndexError, match=r"ids range over \[1, 4\] but the table has 4 rows"):
        nn.Embedding(4, 2)(on_device([[1, 4]]))
    with pytest.raises(IndexError, match="target id 5 is outside the vocabulary"):
        F.cross_entropy(mt.Tensor(cupy.zeros((2, 5))), on_device([1, 5]))


def test_the_name_list_matches_the_installed_cupy():
    """tests/cupy_names.json is read from CuPy by tools/cupy_names.py; it must not drift from CuPy."""
    pytest.importorskip("cupy")
    import importlib.util  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    path = Path(__file__).resolve().parents[1] / "tools" / "cupy_names.py"
    spec = importlib.util.spec_from_file_location("cupy_names", path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    names = tool.read_names()
    if names["cupy_version"] != device_double.NAMES["cupy_version"]:
        pytest.skip(f"CuPy {names['cupy_version']} installed, list read from {device_double.NAMES['cupy_version']}")
    assert names == device_double.NAMES, "run python tools/cupy_names.py"


# -- a stray NumPy call inside an op is caught ------------------------------------------------------

class HostExp(mt.Function):
    """exp with the mistake the double exists for: a NumPy call on the op's input."""

    def forward(self, x):
        self.y = np.exp(np.asarray(x))     # works on the CPU, breaks on CuPy
        return self.y

    def backward(self, gy):
        return gy * self.y


def test_a_stray_numpy_asarray_inside_an_op_is_caught(rng):
    on_cpu = mt.Tensor(rng.standard_normal(3), requires_grad=True)     # a NumPy array stays on the CPU
    assert on_cpu.device == "cpu"
    assert mt.gradcheck(lambda x: HostExp()(x), [on_cpu])            # the CPU cannot see the mistake
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array is not allowed"):
        mt.gradcheck(lambda x: HostExp()(x), [leaf(rng, 3)])         # the double can


def test_a_stray_numpy_asarray_planted_in_a_package_op_is_caught(rng, monkeypatch):
    """The same mistake planted in the package's own Exp: the ops' gradchecks on the double fail."""
    from minitransformer.ops.elementwise import Exp  # noqa: PLC0415

    as_written = Exp.forward

    def forward_through_the_host(self, x):
        return as_written(self, np.asarray(x))     # the stray conversion, then the op as written

    monkeypatch.setattr(Exp, "forward", forward_through_the_host)
    on_cpu = mt.Tensor(rng.standard_normal((2, 3)), requires_grad=True)
    assert mt.gradcheck(lambda x: x.exp(), [on_cpu])
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array is not allowed"):
        test_every_op_gradchecks_on_the_device(*EXP, rng)       # the op's own case in the table below


# -- every op's gradient on the device -------------------------------------------------------------

EXP = (lambda a: a.exp(), [(2, 3)], False)
OPS = [
    (lambda a, b: a + b, [(2, 3, 4), (3, 1)], False),
    (lambda a, b: a - b, [(3, 4), (4,)], False),
    (lambda a, b: a * b, [(2, 1, 3), (4, 1)], False),
    (lambda a, b: a / b, [(3, 4), (4,)], True),
    (lambda a: 2.0 / a - 1.0, [(3,)], True),
    (lambda a: -a ** 3, [(2, 3)], False),
    (lambda a: a ** 0.5, [(2, 3)], True),
    EXP,
    (lambda a: a.log(), [(2, 3)], True),
    (lambda a: a.sqrt(), [(2, 3)], True),
    (lambda a: a.tanh(), [(2, 3)], False),
    (lambda a: a.sigmoid(), [(2, 3)], False),
    (lambda a: a.relu(), [(2, 3)], False),
    (lambda a, b: mt.maximum(a, b), [(2, 3), (3,)], False),
    (lambda a: a.sum(axis=1, keepdims=True), [(2, 3, 4)], False),
    (lambda a: a.mean(axis=(0, 2)), [(2, 3, 4)], False),
    (lambda a: a.max(axis=-1), [(3, 4)], False),
    (lambda a: a.max(), [(3, 4)], False),
    (lambda a: a.reshape(4, 3).transpose(1, 0), [(2, 6)], False),
    (lambda a: a.swapaxes(0, 2), [(2, 3, 4)], False),
    (lambda a: mt.broadcast_to(a, (2, 3, 4)), [(3, 1)], False),
    (lambda a, b: mt.concatenate([a, b], axis=1), [(2, 3), (2, 2)], False),
    (lambda a, b: mt.stack([a, b], axis=0), [(2, 3), (2, 3)], False),
    (lambda a: mt.split(a, [1, 3], axis=1)[1] * 2.0, [(2, 5)], False),
    (lambda a, b: a @ b, [(2, 3, 4), (4, 5)], False),
    (lambda a, b: a @ b, [(4,), (4, 3)], False),
    (lambda a: a[1:, ::2], [(3, 4)], False),
    (lambda a: a[on_device([0, 0, 2])] * 2.0, [(3, 4)], False),     # repeated rows: cupyx.scatter_add
    (lambda a: a[[1, 1, 0], 1:], [(3, 4)], False),
    (lambda a, b: mt.where(on_device([[True, False, True]]), a, b), [(2, 3), (3,)], False),
    (lambda a: a.masked_fill(on_device([False, True, False, True]), -1.0), [(3, 4)], False),
    (lambda a: a.to("cpu").exp(), [(2, 3)], False),                  # the gradient goes back to the device
]


@pytest.mark.parametrize("op,shapes,positive", OPS)
def test_every_op_gradchecks_on_the_device(op, shapes, positive, rng):
    inputs = [leaf(rng, *shape, positive=positive) for shape in shapes]
    assert mt.gradcheck(op, inputs)
    assert all(backend.get_device(t.grad) == "cuda" for t in inputs)


# -- every function and layer ---------------------------------------------------------------------

FUNCTIONS = [
    (lambda x: F.softmax(x, axis=1), [(2, 3, 4)]),
    (lambda x: F.log_softmax(x, axis=-1), [(3, 5)]),
    (lambda x: F.cross_entropy(x, on_device([1, 0, 4, PAD, 2]), label_smoothing=0.1, ignore_index=PAD), [(5, 6)]),
    (lambda x: F.cross_entropy(x, [3, 1, 0], label_smoothing=0.0), [(3, 4)]),   # targets as a Python list
    (lambda x, w, b: F.layer_norm(x, w, b), [(2, 3, 4), (4,), (4,)]),
    (lambda x: F.dropout(x, 0.4, generator=F.Generator(5)), [(3, 4)]),       # reseeded: the same mask
    (lambda x: F.relu(x), [(3, 4)]),
    (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, causal_mask(3, "cuda"))[0], [(2, 2, 3, 4)] * 3),
]


@pytest.mark.parametrize("function,shapes", FUNCTIONS)
def test_every_function_gradchecks_on_the_device(function, shapes, rng):
    assert mt.gradcheck(function, [leaf(rng, *shape) for shape in shapes])


def test_attention_with_a_padding_mask_and_broadcast_keys(rng):
    q, k, v = leaf(rng, 2, 2, 3, 4), leaf(rng, 2, 1, 5, 4), leaf(rng, 2, 1, 5, 4)
    mask = padding_mask(on_device([[1, 2, 3, 4, 5], [1, 2, 3, PAD, PAD]]), PAD)
    assert backend.get_device(mask) == "cuda"
    assert mt.gradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, mask)[0], [q, k, v])


LONG_SEQUENCE_ATTENTION = [   # chapter 13's attention functions, checked here once they exist
    ("flash_attention", dict(causal=True, block_size=2)),
    ("local_attention", dict(window=1, causal=True)),
    ("linear_attention", dict(causal=True)),
]


@pytest.mark.parametrize("name,options", LONG_SEQUENCE_ATTENTION, ids=[n for n, _ in LONG_SEQUENCE_ATTENTION])
def test_long_sequence_attention_gradchecks_on_the_device(name, options, rng):
    if not hasattr(F, name):
        pytest.skip(f"minitransformer.functional has no {name} yet")
    attend = getattr(F, name)
    assert mt.gradcheck(lambda q, k, v: attend(q, k, v, **options), [leaf(rng, 1, 2, 5, 4) for _ in range(3)])


def check_module(module, x, *extra):
    inputs = ([x] if isinstance(x, mt.Tensor) else []) + list(module.parameters())
    assert all(p.device == "cuda" for p in module.parameters())
    return mt.gradcheck(lambda *args: module(x, *extra), inputs)


def test_layers_gradcheck_on_the_device(rng):
    nn.init.set_seed(0)
    assert check_module(nn.Linear(4, 3).to(np.float64), leaf(rng, 2, 3, 4))
    assert check_module(nn.LayerNorm(4).to(np.float64), leaf(rng, 2, 4))
    assert check_module(nn.FeedForward(4, 6).to(np.float64), leaf(rng, 2, 4))
    assert check_module(nn.Embedding(6, 3).to(np.float64), on_device([[1, 1, 0], [2, 1, 5]]))
    assert check_module(nn.Embedding(6, 3).to(np.float64), [[1, 1, 0], [2, 1, 5]])     # ids as a list
    assert check_module(nn.MultiHeadAttention(8, 2).to(np.float64), leaf(rng, 2, 3, 8), leaf(rng, 2, 4, 8))
    positions = nn.PositionalEncoding(8, max_len=10, dropout=0.0).to(np.float64)
    assert mt.gradcheck(lambda x: positions(x), [leaf(rng, 2, 5, 8)])
    learned = nn.LearnedPositionalEncoding(8, max_len=10, dropout=0.0).to(np.float64)
    assert check_module(learned, leaf(rng, 2, 5, 8))


def test_lstm_and_recurrent_attention_gradcheck_on_the_device(rng):
    nn.init.set_seed(0)
    lstm = nn.LSTM(3, 2, num_layers=2, bidirectional=True).to(np.float64)
    mask = on_device([[True, True, True, True], [True, True, False, False]])
    x = leaf(rng, 2, 4, 3)
    assert mt.gradcheck(lambda x, w, b: lstm(x, mask)[0], [x, lstm.cells[3].weight_h, lstm.cells[0].bias])
    assert all(backend.get_device(s.data) == "cuda" for s in lstm(x, mask)[1])
    for attention in (nn.AdditiveAttention(4, 4, 3), nn.DotAttention(), nn.GeneralAttention(4, 4)):
        attention.to(np.float64)
        queries, memory = leaf(rng, 2, 3, 4), leaf(rng, 2, 4, 4)
        assert mt.gradcheck(lambda q, m, *p: attention(q, m, mask)[0], [queries, memory, *attention.parameters()])


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_encoder_and_decoder_layers_gradcheck_on_the_device(rng, norm_first):
    nn.init.set_seed(0)
    encoder = nn.EncoderLayer(8, 2, 16, dropout=0.0, norm_first=norm_first).to(np.float64)
    decoder = nn.DecoderLayer(8, 2, 16, dropout=0.0, norm_first=norm_first).to(np.float64)
    src_mask = padding_mask(on_device([[1, 2, 3, 4], [1, 2, PAD, PAD]]), PAD)
    x, memory = leaf(rng, 2, 3, 8), leaf(rng, 2, 4, 8)
    assert mt.gradcheck(lambda m, w: encoder(m, src_mask), [memory, encoder.self_attn.w_v.weight])
    assert mt.gradcheck(lambda x, m, w: decoder(x, m, causal_mask(3, "cuda"), src_mask),
                        [x, memory, decoder.cross_attn.w_q.weight])


# -- the whole model: a gradcheck, a training step that matches the CPU's ----------------------------

def tiny_model(**overrides):
    fields = dict(d_model=8, n_heads=2, d_ff=16, n_layers=2, dropout=0.0, max_len=16)
    fields.update(overrides)
    return nn.Transformer(nn.TransformerConfig.tiny(VOCAB, **fields))


def batch():
    src = np.array([[4, 5, 6, 7, 8], [9, 3, 4, PAD, PAD]])
    tgt_in = np.array([[1, 5, 7, 9], [1, 6, 8, PAD]])
    tgt_out = np.array([[5, 7, 9, 2], [6, 8, 2, PAD]])
    return src, tgt_in, tgt_out


def loss_of(model, src, tgt_in, tgt_out):
    logits = model(src, tgt_in)
    return F.cross_entropy(logits.reshape(-1, VOCAB), tgt_out.reshape(-1), label_smoothing=0.1, ignore_index=PAD)


def test_the_whole_model_gradchecks_on_the_device():
    model = tiny_model(tie_embeddings=False, norm_first=True, positional="learned").to(np.float64)
    src, tgt_in, tgt_out = (on_device(a) for a in batch())
    checked = [model.encoder.layers[0].norm2.weight, model.decoder.layers[1].cross_attn.w_k.bias,
               model.decoder.norm.bias]     # few numbers each: the whole model runs twice per number
    assert mt.gradcheck(lambda *params: loss_of(model, src, tgt_in, tgt_out), checked)


def train_two_steps(device, monkeypatch, dropout=0.0):
    """Two steps as train_step takes them: Noam-scheduled Adam, clipped gradients; returns (losses, model)."""
    monkeypatch.setattr(backend, "_default_device", device)
    nn.init.set_seed(0)
    model = tiny_model(dropout=dropout)
    optimizer = optim.Adam(model.parameters(), betas=(0.9, 0.98), eps=1e-9)
    schedule = optim.NoamSchedule(optimizer, d_model=8, warmup=4)
    losses = []
    for _ in range(2):
        loss = loss_of(model, *batch())           # host ids: the model moves them to its device
        optimizer.zero_grad()
        loss.backward()
        optim.clip_grad_norm(model.parameters(), 1.0)
        schedule.step()
        optimizer.step()
        losses.append(loss.item())
    assert all(p.device == device for p in model.parameters())
    return losses, model


def test_training_steps_on_the_device_match_the_cpu(monkeypatch):
    cpu_losses, cpu_model = train_two_steps("cpu", monkeypatch)
    gpu_losses, gpu_model = train_two_steps("cuda", monkeypatch)
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=1e-5)
    assert cpu_losses[1] < cpu_losses[0]
    for (name, a), b in zip(cpu_model.state_dict().items(), gpu_model.state_dict().values()):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-6, err_msg=name)


def test_a_training_step_with_dropout_runs_on_the_device(monkeypatch):
    losses, model = train_two_steps("cuda", monkeypatch, dropout=0.1)
    assert np.isfinite(losses).all()
    assert any(g.device_draws > 0 for g in model_dropout_generators(model))   # masks drawn on the device


def model_dropout_generators(model):
    from minitransformer.training.trainer import dropout_generators  # noqa: PLC0415
    return dropout_generators(model)


# -- decoding: KV cache, greedy and beam search ---------------------------------------------------

def test_greedy_and_beam_search_on_the_device_match_the_cpu(monkeypatch):
    from minitransformer.decode import beam_search, greedy_decode  # noqa: PLC0415

    src = batch()[0]
    found = {}
    for device in ("cpu", "cuda"):
        monkeypatch.setattr(backend, "_default_device", device)
        nn.init.set_seed(1)
        model = tiny_model().to(np.float64)
        greedy = greedy_decode(model, src, bos_id=1, eos_id=2, max_len=6)
        uncached = greedy_decode(model, src, bos_id=1, eos_id=2, max_len=6, use_cache=False)
        beams = beam_search(model, on_device(src) if device == "cuda" else src, bos_id=1, eos_id=2,
                            beam_size=3, max_len=6, n_best=2)
        assert greedy == uncached                 # the KV cache changes the cost, not the result
        found[device] = greedy, [[(h.tokens, round(h.score, 9)) for h in best] for best in beams]
    assert found["cuda"] == found["cpu"]
    assert any(found["cpu"][0])


def test_the_attention_lstm_gradchecks_and_searches_on_the_device_as_on_the_cpu(monkeypatch):
    from minitransformer.decode import beam_search, greedy_decode  # noqa: PLC0415

    src, tgt_in, tgt_out = batch()
    found = {}
    for device in ("cpu", "cuda"):
        monkeypatch.setattr(backend, "_default_device", device)
        model = nn.Seq2Seq(nn.Seq2SeqConfig(VOCAB, VOCAB, d_model=8, n_layers=2, dropout=0.0, seed=1)).to(np.float64)
        assert all(p.device == device for p in model.parameters())
        if device == "cuda":
            checked = [model.attention.v, model.encoder.cells[3].bias]     # few numbers: two runs each
            assert mt.gradcheck(lambda *params: model.loss(src, tgt_in, tgt_out, 0.1), checked)
        greedy = greedy_decode(model, src, bos_id=1, eos_id=2, max_len=6)
        assert greedy == greedy_decode(model, src, bos_id=1, eos_id=2, max_len=6, use_cache=False)
        beams = beam_search(model, src, bos_id=1, eos_id=2, beam_size=3, max_len=6, n_best=2)
        found[device] = greedy, [[(h.tokens, round(h.score, 9)) for h in best] for best in beams]
    assert found["cuda"] == found["cpu"]


# -- checkpoints: save, load, average; arrays come home only through the backend ---------------------

def test_checkpoints_save_load_and_average_from_the_device(tmp_path, monkeypatch):
    from minitransformer import checkpoint as ckpt  # noqa: PLC0415

    losses, model = train_two_steps("cuda", monkeypatch)
    optimizer = optim.Adam(model.parameters())
    loss_of(model, *batch()).backward()
    optimizer.step()
    first = ckpt.save_checkpoint(tmp_path, 1, model.state_dict(), {"note": "device"}, optimizer.state_dict())
    for p in model.parameters():
        p.data = p.data * 0.5
    second = ckpt.save_checkpoint(tmp_path, 2, model.state_dict(), {"note": "halved"})

    loaded = ckpt.load_checkpoint(first)
    assert all(type(a) is np.ndarray for a in loaded.weights.values())
    nn.init.set_seed(7)
    fresh = tiny_model()
    fresh.load_state_dict(loaded.weights)
    assert all(p.device == "cuda" for p in fresh.parameters())
    fresh_optimizer = optim.Adam(fresh.parameters())
    fresh_optimizer.load_state_dict(loaded.optimizer)
    assert all(backend.get_device(m) == "cuda" for m in fresh_optimizer.exp_avg if m is not None)

    averaged = ckpt.average_checkpoints([first, second])
    fresh.load_state_dict(averaged)
    for name, weight in fresh.state_dict().items():
        np.testing.assert_allclose(weight, 0.75 * loaded.weights[name], rtol=1e-6, err_msg=name)


# -- what the classroom exercises grade, on the device ----------------------------------------------

def test_the_graded_functions_run_on_the_device(rng):
    """The subjects of tests/exercises/test_exercises.py, on device arrays: a student's NumPy call fails here."""
    from minitransformer.functional.multi_head import merge_heads, split_heads  # noqa: PLC0415
    from minitransformer.nn.positional import sinusoidal_table  # noqa: PLC0415

    x, upstream = leaf(rng, 3, 4), on_device(rng.standard_normal((3, 4)))
    numeric = mt.numerical_gradient(lambda t: t * t * t, [x], 0, upstream, 1e-6)          # Exercise 1.1
    np.testing.assert_allclose(host(numeric), 3 * host(x) ** 2 * host(upstream), rtol=1e-6, atol=1e-8)
    grad = unbroadcast(on_device(np.ones((2, 3, 4))), (3, 1))
    assert backend.get_device(grad) == "cuda" and host(grad).tolist() == [[8.0]] * 3
    tied = mt.Tensor(on_device([[1.0, 3.0, 3.0]]), requires_grad=True)                    # tied maxima share
    tied.max().backward()
    np.testing.assert_allclose(host(tied.grad), [[0.0, 0.5, 0.5]])
    heads = split_heads(leaf(rng, 2, 3, 8), 2)
    assert heads.shape == (2, 2, 3, 4) and heads.device == "cuda"
    assert mt.gradcheck(lambda t: merge_heads(split_heads(t, 2)) * 2.0, [leaf(rng, 2, 3, 8)])
    table = sinusoidal_table(6, 8)
    assert table.shape == (6, 8)
    positions = nn.PositionalEncoding(8, max_len=6, dropout=0.0)
    assert backend.get_device(positions.table) == "cuda"


# -- the command line: a short training run with --device cuda ---------------------------------------

def test_train_translate_and_evaluate_on_the_command_line_with_device_cuda(tmp_path, monkeypatch, capsys):
    from minitransformer.__main__ import main  # noqa: PLC0415

    monkeypatch.setenv("MINITRANSFORMER_MALLOC", "0")
    monkeypatch.setattr(backend, "_default_device", "cpu")     # the flag, not the test, picks the device
    out = tmp_path / "run"
    status = main(["train", "--device", "cuda", "--out", str(out), "--steps", "3", "--preset", "toy",
                   "--limit", "12", "--average", "2"])
    printed = capsys.readouterr()
    assert status == 0, printed.err
    assert backend.default_device() == "cuda"
    assert (out / "final").is_dir()
    assert "BLEU" in printed.out
    # the trained model, loaded back onto the device, translates and scores there too
    assert main(["translate", "--checkpoint", str(out), "--device", "cuda", "the cat sees a dog ."]) == 0
    assert main(["evaluate", "--checkpoint", str(out), "--device", "cuda", "--limit", "4", "--greedy"]) == 0
    printed = capsys.readouterr()
    assert "BLEU" in printed.out, printed.err


# -- host synchronisations: each one stalls a GPU until its queue drains ----------------------------

def test_clipping_the_gradients_waits_for_the_device_once(monkeypatch):
    """The global norm is summed on the device and read once, not once per parameter."""
    losses, model = train_two_steps("cuda", monkeypatch)
    loss_of(model, *batch()).backward()
    assert len(model.parameters()) > 30
    device_double.host_syncs.clear()
    norm = optim.clip_grad_norm(model.parameters(), 1e-3)
    assert sum(device_double.host_syncs.values()) == 1
    clipped = np.sqrt(sum(float((host(p.grad).astype(np.float64) ** 2).sum()) for p in model.parameters()))
    assert norm > 1e-3 and abs(clipped - 1e-3) < 1e-6


def test_a_training_step_waits_for_the_device_a_handful_of_times(monkeypatch):
    """loss.item(), the gradient norm, the range checks of the ids and targets, the count of real tokens."""
    losses, model = train_two_steps("cuda", monkeypatch)
    optimizer = optim.Adam(model.parameters())
    device_double.host_syncs.clear()
    loss = loss_of(model, *batch())
    optimizer.zero_grad()
    loss.backward()
    optim.clip_grad_norm(model.parameters(), 1.0)
    optimizer.step()
    loss.item()
    assert sum(device_double.host_syncs.values()) <= 6, dict(device_double.host_syncs)
