"""Modules: registration, state dicts, dtype moves, and a gradient check of every layer end to end."""
from __future__ import annotations

import numpy as np
import pytest

import minitransformer as mt
import minitransformer.nn as nn


def leaf(array) -> mt.Tensor:
    return mt.Tensor(np.asarray(array, dtype=np.float64), requires_grad=True)


def check_module(module: nn.Module, x) -> bool:
    """Gradcheck a module's output with respect to its input (if floating) and every parameter."""
    params = module.parameters()
    inputs = ([x] if isinstance(x, mt.Tensor) else []) + params

    def run(*args):
        return module(x)
    return mt.gradcheck(run, inputs)


# -- layers, end to end, float64 ------------------------------------------------------------

def test_linear_on_3d_input_gradcheck(rng):
    layer = nn.Linear(4, 3).to(np.float64)
    layer.bias.data = rng.standard_normal(3)
    assert check_module(layer, leaf(rng.standard_normal((2, 3, 4))))


def test_linear_without_bias_gradcheck(rng):
    layer = nn.Linear(4, 2, bias=False).to(np.float64)
    assert layer.bias is None and len(layer.parameters()) == 1
    assert check_module(layer, leaf(rng.standard_normal((5, 4))))


def test_linear_computes_x_w_plus_b(rng):
    layer = nn.Linear(4, 3).to(np.float64)
    layer.bias.data = rng.standard_normal(3)
    x = rng.standard_normal((2, 5, 4))
    np.testing.assert_allclose(layer(mt.Tensor(x)).numpy(), x @ layer.weight.data + layer.bias.data, rtol=1e-12)


def test_linear_rejects_the_wrong_feature_count():
    with pytest.raises(ValueError, match="input has 5 features"):
        nn.Linear(4, 3)(mt.Tensor(np.zeros((2, 5), dtype=np.float32)))


def test_xavier_uniform_bound_and_variance():
    nn.init.set_seed(0)
    w = nn.Linear(300, 200).weight.numpy()
    bound = np.sqrt(6 / 500)
    assert w.dtype == np.float32 and np.abs(w).max() <= bound
    np.testing.assert_allclose(w.var(), 2 / 500, rtol=0.05)


def test_embedding_with_repeated_ids_gradcheck(rng):
    table = nn.Embedding(6, 3).to(np.float64)
    ids = np.array([[1, 1, 0], [2, 1, 5]])
    assert check_module(table, ids)


def test_embedding_repeated_ids_accumulate_and_padding_row_gets_nothing():
    table = nn.Embedding(5, 2, padding_idx=0)
    np.testing.assert_array_equal(table.weight.data[0], 0)
    ids = np.array([[1, 1, 0, 3], [1, 0, 0, 3]])
    table(ids).sum().backward()
    np.testing.assert_array_equal(table.weight.grad[:, 0], [0, 3, 0, 2, 0])   # pad row 0 learns nothing


def test_embedding_rejects_out_of_range_and_float_ids():
    table = nn.Embedding(4, 2)
    with pytest.raises(IndexError, match=r"range over \[0, 4\].*4 rows"):
        table(np.array([0, 4]))
    with pytest.raises(TypeError, match="integers"):
        table(np.array([0.0, 1.0]))


def test_layer_norm_module_gradcheck(rng):
    norm = nn.LayerNorm(4).to(np.float64)
    norm.weight.data = rng.standard_normal(4)
    assert check_module(norm, leaf(rng.standard_normal((2, 3, 4))))


def test_feedforward_gradcheck_and_formula(rng):
    ffn = nn.FeedForward(4, 6).to(np.float64)
    x = rng.standard_normal((2, 3, 4))
    assert check_module(ffn, leaf(x))
    w1, b1, w2, b2 = (p.data for p in ffn.parameters())
    np.testing.assert_allclose(ffn(mt.Tensor(x)).numpy(), np.maximum(0, x @ w1 + b1) @ w2 + b2, rtol=1e-12)


def test_sequential_gradcheck(rng):
    model = nn.Sequential(nn.Linear(3, 5), nn.LayerNorm(5), nn.FeedForward(5, 4), nn.Linear(5, 2)).to(np.float64)
    assert check_module(model, leaf(rng.standard_normal((4, 3))))


def test_dropout_module_follows_train_and_eval(rng):
    drop = nn.Dropout(0.5)
    x = mt.Tensor(np.ones((20, 20), dtype=np.float32))
    assert (drop(x).numpy() == 0).any()
    drop.eval()
    assert drop(x) is x


def test_models_built_with_the_same_seed_are_identical(rng):
    def build():
        nn.init.set_seed(7)
        return nn.Sequential(nn.Embedding(5, 4), nn.FeedForward(4, 8, dropout=0.5))
    a, b = build(), build()
    for (_, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        np.testing.assert_array_equal(p.data, q.data)
    x = mt.Tensor(np.ones((3, 4), dtype=np.float32))
    np.testing.assert_array_equal(a[1](x).numpy(), b[1](x).numpy())   # same dropout masks too


# -- the Module system ------------------------------------------------------------------------

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(np.ones(2, dtype=np.float32))
        self.inner = nn.Linear(2, 3)
        self.norm = nn.LayerNorm(3)
        self.layers = nn.ModuleList([nn.Linear(3, 3), nn.Linear(3, 1)])
        self.not_a_parameter = np.zeros(4)

    def forward(self, x):
        x = self.norm(self.inner(x * self.scale))
        for layer in self.layers:
            x = layer(x)
        return x


def test_parameters_are_registered_in_assignment_order_with_dotted_names():
    names = [name for name, _ in Block().named_parameters()]
    assert names == ["scale", "inner.weight", "inner.bias", "norm.weight", "norm.bias",
                     "layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias"]


def test_children_modules_and_parameter_count():
    block = Block()
    assert [type(c).__name__ for c in block.children()] == ["Linear", "LayerNorm", "ModuleList"]
    assert len(list(block.modules())) == 6
    assert block.num_parameters() == 2 + (6 + 3) + (3 + 3) + (9 + 3) + (3 + 1)


def test_shared_parameter_is_listed_once():
    a = nn.Linear(2, 2)
    model = nn.Sequential(a, a)
    assert len(model.parameters()) == 2 and model.num_parameters() == 6


def test_train_eval_reach_every_module_and_zero_grad_clears():
    block = Block()
    block.eval()
    assert not any(m.training for m in block.modules())
    block.train()
    assert all(m.training for m in block.modules())
    block(mt.Tensor(np.ones((1, 2), dtype=np.float32))).sum().backward()
    assert all(p.grad is not None for p in block.parameters())
    block.zero_grad()
    assert all(p.grad is None for p in block.parameters())


def test_state_dict_round_trip():
    nn.init.set_seed(1)
    source = Block()
    nn.init.set_seed(2)
    target = Block()
    state = source.state_dict()
    assert all(isinstance(v, np.ndarray) for v in state.values())
    state["inner.weight"] += 0   # a copy: editing it must not touch the model
    target.load_state_dict(state)
    x = mt.Tensor(np.ones((1, 2), dtype=np.float32))
    np.testing.assert_array_equal(source(x).numpy(), target(x).numpy())
    state["inner.weight"][:] = 5
    assert not (source.inner.weight.data == 5).any()


def test_load_state_dict_errors_name_the_key_and_both_shapes():
    block = Block()
    state = block.state_dict()
    state["inner.weight"] = np.zeros((3, 2))
    with pytest.raises(ValueError, match=r"'inner.weight': checkpoint has shape \(3, 2\), model has shape \(2, 3\)"):
        block.load_state_dict(state)
    state = block.state_dict()
    del state["norm.bias"]
    state["extra.weight"] = np.zeros(1)
    with pytest.raises(KeyError, match=r"missing keys \['norm.bias'\].*unexpected keys \['extra.weight'\]"):
        block.load_state_dict(state)
    block.load_state_dict(state, strict=False)   # tolerated when asked


def test_load_state_dict_casts_to_the_parameter_dtype():
    layer = nn.Linear(2, 2)
    layer.load_state_dict({"weight": np.eye(2, dtype=np.float64), "bias": np.zeros(2, dtype=np.float64)})
    assert layer.weight.dtype == np.float32
    np.testing.assert_array_equal(layer.weight.data, np.eye(2))


def test_to_float64_is_in_place_and_keeps_the_parameter_objects():
    block = Block()
    before = block.parameters()
    assert block.to(np.float64) is block
    after = block.parameters()
    assert all(p is q for p, q in zip(before, after))
    assert all(p.dtype == np.float64 for p in after)
    with pytest.raises(TypeError, match="floating"):
        block.to(np.int32)


def test_repr_lists_children():
    text = repr(nn.FeedForward(4, 8))
    assert "(linear1): Linear(in_features=4, out_features=8, bias=True)" in text
    assert "(linear2): Linear(in_features=8, out_features=4, bias=True)" in text


def test_reassigning_an_attribute_unregisters_it():
    block = Block()
    block.norm = None
    assert "norm.weight" not in dict(block.named_parameters())


def test_buffers_move_with_to_and_stay_out_of_the_state_dict():
    module = nn.Module()
    module.register_buffer("table", np.ones(3, dtype=np.float32))
    module.to(np.float64)
    assert module.table.dtype == np.float64 and module.state_dict() == {}


@pytest.mark.gpu
def test_layers_on_the_gpu_match_the_cpu(rng):
    nn.init.set_seed(3)
    model = nn.Sequential(nn.Embedding(7, 4, padding_idx=0), nn.LayerNorm(4), nn.FeedForward(4, 8), nn.Linear(4, 2))
    ids = np.array([[1, 2, 2, 0], [6, 0, 1, 1]])
    cpu_out = model(ids)
    cpu_out.sum().backward()
    cpu_grads = [p.grad.copy() for p in model.parameters()]
    model.zero_grad()
    model.to("cuda")
    assert all(p.device == "cuda" for p in model.parameters())
    gpu_out = model(ids)
    gpu_out.sum().backward()
    np.testing.assert_allclose(gpu_out.numpy(), cpu_out.numpy(), rtol=1e-4, atol=1e-6)
    for g_cpu, p in zip(cpu_grads, model.parameters()):
        np.testing.assert_allclose(mt.backend.asnumpy(p.grad), g_cpu, rtol=1e-4, atol=1e-5)
    assert model.state_dict()["0.weight"].__class__ is np.ndarray


# -- randomness: every generator belongs to a module and has a state ---------------------------

def test_generator_state_round_trips_through_json():
    import json
    generator = mt.functional.Generator(5)
    like = np.zeros(1, dtype=np.float32)
    generator.uniform((3,), like)
    state = json.loads(json.dumps(generator.state_dict()))   # JSON-ready, as in a checkpoint
    expected = generator.uniform((4,), like)
    generator.uniform((10,), like)                              # wander off ...
    np.testing.assert_array_equal(generator.load_state_dict(state).uniform((4,), like), expected)  # ... and back
    fresh = mt.functional.Generator(9).load_state_dict({"seed": 5, "cpu": None})
    np.testing.assert_array_equal(fresh.uniform((3,), like), mt.functional.Generator(5).uniform((3,), like))
    with pytest.raises(ValueError, match="seed"):
        generator.load_state_dict({"cpu": None})


def test_modules_list_their_generators_by_name_and_restore_them():
    nn.init.set_seed(2)
    model = nn.Sequential(nn.FeedForward(4, 8, dropout=0.5), nn.Dropout(0.5))
    names = [name for name, _ in model.named_generators()]
    assert names == ["0.dropout.generator", "1.generator"]
    x = mt.Tensor(np.ones((3, 4), dtype=np.float32))
    state = model.rng_state_dict()
    first = model(x).numpy()
    assert not np.array_equal(model(x).numpy(), first)          # the streams moved on
    model.load_rng_state_dict(state)
    np.testing.assert_array_equal(model(x).numpy(), first)     # and are back where they were
    with pytest.raises(KeyError, match=r"missing generators \['1.generator'\]"):
        model.load_rng_state_dict({"0.dropout.generator": state["0.dropout.generator"]})
    with pytest.raises(ValueError, match="'1.generator'"):
        model.load_rng_state_dict({**state, "1.generator": {"seed": 1, "cpu": {"bit_generator": "MT19937"}}})


def test_a_shared_generator_is_listed_once_and_reassigning_unregisters():
    drop = nn.Dropout(0.5)
    model = nn.Sequential(drop, drop)
    assert [name for name, _ in model.named_generators()] == ["0.generator"]
    drop.generator = None
    assert list(model.named_generators()) == []


def test_evaluating_restores_each_modules_mode_even_after_an_error():
    block = Block()
    block.inner.eval()                                   # a caller's own mix of modes
    with pytest.raises(RuntimeError, match="inside"):
        with block.evaluating():
            assert not any(m.training for m in block.modules())
            raise RuntimeError("inside")
    assert block.training and not block.inner.training and block.norm.training


@pytest.mark.gpu
def test_a_restored_gpu_stream_is_reproducible_and_does_not_repeat_the_first_masks():
    like = mt.backend.to_device(np.zeros(1, dtype=np.float32), "cuda")
    generator = mt.functional.Generator(4)
    first = mt.backend.asnumpy(generator.uniform((64,), like))
    state = generator.state_dict()
    assert state["device_draws"] == 1
    a = mt.backend.asnumpy(mt.functional.Generator(0).load_state_dict(state).uniform((64,), like))
    b = mt.backend.asnumpy(mt.functional.Generator(0).load_state_dict(state).uniform((64,), like))
    np.testing.assert_array_equal(a, b)                       # the same checkpoint resumes the same way
    assert not np.array_equal(a, first)                       # and does not replay the masks already drawn
