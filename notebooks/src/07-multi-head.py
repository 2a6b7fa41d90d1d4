# %% [markdown]
# # Chapter 7 — Multi-head attention (§3.2.2, §4, Table 1)
#
# $$\mathrm{MultiHead}(Q,K,V) = \mathrm{Concat}(\mathrm{head}_1,\dots,\mathrm{head}_h)\,W^O,\qquad
# \mathrm{head}_i = \mathrm{Attention}(QW^Q_i, KW^K_i, VW^V_i)$$
#
# One attention head averages the values with one set of weights per query. Averaging blurs: the
# paper calls it "reduced effective resolution" (§2) and answers with $h$ heads, each projecting to
# its own small subspace of width $d_k = d_{model}/h$, attending there, and handing its result to
# $W^O$. In this notebook we
# 1. see that "split into heads" is just a reshape of one big projection,
# 2. **measure** that $h$ heads of width $d_{model}/h$ cost about what one full-width head costs,
# 3. **measure** Table 1: self-attention vs a recurrent layer as the sequence length $n$ grows,
# 4. confirm that attention without positions cannot see word order,
# 5. gradient-check multi-head self- and cross-attention.

# %%
import os
import time

import matplotlib.pyplot as plt
import numpy as np

import minitransformer as mt
import minitransformer.nn as nn
from minitransformer.nn.attention import merge_heads, split_heads

QUICK = os.environ.get("MT_QUICK") == "1"
SAVE = os.environ.get("MT_SAVE_FIGURES") == "1"
rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. Heads are slices of one projection
#
# The $h$ matrices $W^Q_i$ ($d_{model}\times d_k$) placed side by side form one
# $d_{model}\times d_{model}$ matrix. One GEMM projects all heads at once; `split_heads` reshapes
# (B, T, $h\cdot d_k$) to (B, T, h, $d_k$) and moves the head axis forward, giving (B, h, T, $d_k$).
# `merge_heads` is the inverse — and it *is* the Concat of the equation.

# %%
x = mt.Tensor(rng.standard_normal((2, 5, 8)))
heads = split_heads(x, 4)
print("x", x.shape, "-> heads", heads.shape, "-> merged", merge_heads(heads).shape)
print("head 1 holds features 2:4 of x:", np.array_equal(heads.numpy()[:, 1], x.numpy()[..., 2:4]))
assert np.array_equal(merge_heads(heads).numpy(), x.numpy())

# %% [markdown]
# ## 2. h heads cost about one head of full width
#
# Count the multiply–adds of one layer with $n$ positions. Projections: $4\,n\,d_{model}^2$, whatever
# $h$ is. Attention: $h$ heads, each $QK^\top$ and $AV$ of $n\cdot n\cdot d_k$ — in total
# $2\,n^2\,h\,d_k = 2\,n^2\,d_{model}$, again independent of $h$. That is the paper's claim: "the total
# computational cost is similar to that of single-head attention with full dimensionality" (§3.2.2).
# Only the softmax grows with $h$ ($h\,n^2$ exponentials), a small term. Let us time forward + backward.

# %%
def time_call(fn, repeats):
    fn()                                            # warm up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


d_model, n = (128, 64) if QUICK else (256, 128)
head_counts = [1, 4, 16] if QUICK else [1, 2, 4, 8, 16, 32]
repeats = 3 if QUICK else 5
x = mt.Tensor(rng.standard_normal((4, n, d_model)).astype(np.float32))
head_times = []
for h in head_counts:
    layer = nn.MultiHeadAttention(d_model, h)

    def forward_backward():
        layer.zero_grad()
        layer(x).sum().backward()

    head_times.append(time_call(forward_backward, repeats))
    print(f"h = {h:2d}  d_k = {d_model // h:3d}   forward + backward {1e3 * head_times[-1]:6.1f} ms")

fig, ax = plt.subplots(figsize=(5, 3))
ax.plot(head_counts, 1e3 * np.array(head_times), "o-")
ax.set_xscale("log", base=2)
ax.set_ylim(0, 1e3 * max(head_times) * 1.3)
ax.set_xlabel("number of heads h  (d_k = d_model / h)")
ax.set_ylabel("ms")
ax.set_title(f"one multi-head layer, d_model={d_model}, n={n}")
fig.tight_layout()
if SAVE:
    fig.savefig("../chapters/figures/07-heads-cost.png", dpi=90, bbox_inches="tight")
plt.show()

# %% [markdown]
# The time stays within a small factor across a 16–32× change in the number of heads. (Many heads
# of tiny width are a little slower: each small matrix product does less work per call, and the
# softmax work $h\,n^2$ grows.)
#
# ## 3. Table 1 measured: self-attention vs a recurrent layer
#
# Table 1 compares layer types by the work per layer, the number of operations that must run one
# after another ("sequential operations"), and the longest path a signal travels between two
# positions:
#
# | layer | work per layer | sequential ops | max path length |
# |---|---|---|---|
# | self-attention | $O(n^2\cdot d)$ | $O(1)$ | $O(1)$ |
# | recurrent | $O(n\cdot d^2)$ | $O(n)$ | $O(n)$ |
#
# We write a plain tanh RNN, $h_t = \tanh(x_tW_x + h_{t-1}W_h + b)$, with engine ops and compare
# it with one self-attention layer of the same width, as $n$ grows. The input projection $x_tW_x$ is
# one GEMM over all positions; the recurrence $h_{t-1}W_h$ cannot be: step $t$ needs step $t-1$.

# %%
class TanhRNN(nn.Module):
    """h_t = tanh(x_t W_x + h_{t-1} W_h + b); x (B, n, d) -> all states (B, n, d)."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.input = nn.Linear(d, d)
        self.recurrent = nn.Linear(d, d, bias=False)

    def forward(self, x):
        projected = self.input(x)                              # (B, n, d): all positions in parallel
        h = mt.Tensor(np.zeros((x.shape[0], x.shape[2]), dtype=x.dtype))
        states = []
        for t in range(x.shape[1]):                            # n steps, strictly one after another
            h = (projected[:, t] + self.recurrent(h)).tanh()   # (B, d)
            states.append(h)
        return mt.stack(states, axis=1)                        # (B, n, d)


def sequential_depth(output):
    """The longest chain of Functions from any input to ``output``: the sequential operations."""
    depth = {}
    stack = [(output, False)]
    while stack:
        t, inputs_done = stack.pop()
        if id(t) in depth:
            continue
        inputs = t.creator.inputs if t.creator is not None else ()
        if inputs_done or not inputs:
            depth[id(t)] = 1 + max((depth[id(i)] for i in inputs), default=-1)   # a leaf has depth 0
        else:
            stack.append((t, True))
            stack.extend((i, False) for i in inputs if id(i) not in depth)
    return depth[id(output)]


d = 64
lengths = [16, 64, 256] if QUICK else [16, 32, 64, 128, 256, 512, 1024]
rnn, attention = TanhRNN(d), nn.MultiHeadAttention(d, 4)
rnn_times, attention_times = [], []
for n in lengths:
    x = mt.Tensor(rng.standard_normal((1, n, d)).astype(np.float32), requires_grad=True)
    rnn_times.append(time_call(lambda: rnn(x).sum().backward(), 3))
    attention_times.append(time_call(lambda: attention(x).sum().backward(), 3))
    print(f"n = {n:5d}   RNN {1e3 * rnn_times[-1]:8.1f} ms   self-attention {1e3 * attention_times[-1]:7.1f} ms")

short = mt.Tensor(rng.standard_normal((1, 32, d)))
print("sequential operations at n=32:  RNN", sequential_depth(rnn(short)),
      "  self-attention", sequential_depth(attention(short)))
short = mt.Tensor(rng.standard_normal((1, 64, d)))
print("sequential operations at n=64:  RNN", sequential_depth(rnn(short)),
      "  self-attention", sequential_depth(attention(short)))

fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
axes[0].loglog(lengths, 1e3 * np.array(rnn_times), "o-", label="tanh RNN (engine)")
axes[0].loglog(lengths, 1e3 * np.array(attention_times), "s-", label="self-attention (engine)")
axes[0].set_xlabel("sequence length n")
axes[0].set_ylabel("forward + backward, ms")
axes[0].set_title(f"measured, d = {d}")
axes[0].legend(fontsize=8)
ns = np.array([8, 4096])
axes[1].loglog(ns, ns * d * d, label="recurrent: n·d²")
axes[1].loglog(ns, ns * ns * d, label="self-attention: n²·d")
axes[1].axvline(d, color="gray", ls=":", lw=1)
axes[1].text(d * 1.1, d ** 3 * 30, "n = d", color="gray")
axes[1].set_xlabel("sequence length n")
axes[1].set_title("Table 1: work per layer")
axes[1].legend(fontsize=8)
fig.tight_layout()
if SAVE:
    fig.savefig("../chapters/figures/07-table1.png", dpi=90, bbox_inches="tight")
plt.show()

# %% [markdown]
# What the measurement shows. In *work*, self-attention is cheaper than recurrence while $n < d$,
# which for word-piece sentences is the usual case (§4), and more expensive beyond. But the
# recurrent layer's $n$ steps must run one after another: its graph is $O(n)$ operations deep, while
# self-attention's depth does not depend on $n$ at all — every position is computed by the same few
# large matrix products. On a machine with parallel hardware (a GPU, or BLAS on many cores), the
# depth, not the work, dominates for the lengths of translation sentences; in our Python engine each
# sequential step also costs a fixed overhead, which makes the RNN's line climb from the start.

# %%
assert sequential_depth(rnn(mt.Tensor(rng.standard_normal((1, 64, d))))) > \
    1.5 * sequential_depth(rnn(mt.Tensor(rng.standard_normal((1, 32, d)))))

# %% [markdown]
# ## 4. Without positions, attention cannot see order
#
# Permute the input positions and the output of self-attention is permuted the same way — nothing
# else changes. Word order must be added to the input: chapter 8.

# %%
layer = nn.MultiHeadAttention(16, 4).to(np.float64)
x = mt.Tensor(rng.standard_normal((1, 6, 16)))
permutation = rng.permutation(6)
out = layer(x).numpy()
out_permuted = layer(mt.Tensor(x.numpy()[:, permutation])).numpy()
print("permutation:", permutation, " max |f(Px) − P f(x)| =", np.abs(out_permuted - out[:, permutation]).max())
np.testing.assert_allclose(out_permuted, out[:, permutation], atol=1e-12)

# %% [markdown]
# Each head looks at the tokens its own way. A forward pass returns only the output; inside
# `nn.record_attention(layer)` the layer also keeps its weights (B, h, T, S) in `attention_weights`
# (off by default: training has no use for them once the backward pass is done).

# %%
with nn.record_attention(layer):
    layer(x)
weights = layer.attention_weights.numpy()[0]                      # (h, T, S)
print("weights per head:", weights.shape, " rows sum to 1:", np.allclose(weights.sum(-1), 1.0))
print("where query 0 looks, head by head:\n", np.round(weights[:, 0], 2))

# %% [markdown]
# ## 5. Gradient checks (float64)

# %%
nn.init.set_seed(0)
mha = nn.MultiHeadAttention(8, 2).to(np.float64)
xq = mt.Tensor(rng.standard_normal((2, 3, 8)), requires_grad=True)
memory = mt.Tensor(rng.standard_normal((2, 4, 8)), requires_grad=True)
pad = mt.functional.padding_mask(np.array([[5, 6, 7, 0], [5, 6, 7, 8]]), 0)
assert mt.gradcheck(lambda x, w_q, w_o: mha(x, None, mt.functional.causal_mask(3)),
                    [xq, mha.w_q.weight, mha.w_o.weight])
print("self-attention (causal): gradcheck passed")
assert mt.gradcheck(lambda x, m, w_k, b_v: mha(x, m, pad), [xq, memory, mha.w_k.weight, mha.w_v.bias])
print("cross-attention (padding): gradcheck passed")

# %% [markdown]
# ## Exercises
#
# 1. Implement `split_heads` and `merge_heads` yourself (reshape + transpose) and check that the
#    tests in `tests/test_multihead.py` pass. What goes wrong if you reshape (B, T, d) straight to
#    (B, h, T, $d_k$) without the transpose?
# 2. Fuse $W^Q$, $W^K$, $W^V$ into one (d, 3d) Linear for self-attention and time it. Why can't
#    cross-attention use the same trick for all three?
# 3. Table 3 row (A) varies $h$ with the compute held constant. Using section 2, explain why the
#    parameter count does not change with $h$ either.
# 4. Add "restricted" self-attention (each query sees only $r$ neighbours, Table 1's last row) with a
#    band mask. Its work is $O(r\cdot n\cdot d)$ — does our implementation achieve that? Why not?
# 5. Measure the maximum path length of Table 1: after how many RNN steps does the gradient from
#    the last output to the first input fall below $10^{-6}$ with random weights?
