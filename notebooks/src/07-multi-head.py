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
# 5. gradient-check multi-head self- and cross-attention, and the packed projections (one GEMM for
#    Q, K and V) that the layer uses in training.

# %% [markdown] ja
# # 第 7 章 — マルチヘッドアテンション（§3.2.2、§4、論文の表 1）
#
# $$\mathrm{MultiHead}(Q,K,V) = \mathrm{Concat}(\mathrm{head}_1,\dots,\mathrm{head}_h)\,W^O,\qquad
# \mathrm{head}_i = \mathrm{Attention}(QW^Q_i, KW^K_i, VW^V_i)$$
#
# アテンションのヘッドが 1 つだと、クエリごとに 1 組の重みでバリューを平均します。平均はぼやけます。論文はこれを「実効的な解像度の低下」と呼び（§2）、$h$ 個のヘッドで応えます。各ヘッドは幅 $d_k = d_{model}/h$ の自分専用の小さな部分空間に射影し、そこでアテンションを取り、結果を $W^O$ に渡します。このノートブックでは次のことを行います。
# 1. 「ヘッドに分ける」とは 1 つの大きな射影の reshape にすぎないことを見ます。
# 2. 幅 $d_{model}/h$ のヘッド $h$ 個のコストが、全幅のヘッド 1 つのコストとほぼ同じであることを**測ります**。
# 3. 論文の表 1 を**測ります**。系列長 $n$ を大きくしながら、セルフアテンションと再帰型の層を比べます。
# 4. 位置の情報がなければ、アテンションには語順が見えないことを確かめます。
# 5. マルチヘッドのセルフアテンションとクロスアテンション、そして層が学習で使うまとめた射影（Q、K、V を 1 回の GEMM で）の勾配チェックをします。

# %%
import time

import matplotlib.pyplot as plt
import numpy as np

import minitransformer as mt
import minitransformer.nn as nn
from minitransformer.functional.multi_head import merge_heads, split_heads

from minitransformer.notebook_support import QUICK
rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. Heads are slices of one projection
#
# The $h$ matrices $W^Q_i$ ($d_{model}\times d_k$) placed side by side form one
# $d_{model}\times d_{model}$ matrix. One GEMM projects all heads at once; `split_heads` reshapes
# (B, T, $h\cdot d_k$) to (B, T, h, $d_k$) and moves the head axis forward, giving (B, h, T, $d_k$).
# `merge_heads` is the inverse — and it *is* the Concat of the equation.

# %% [markdown] ja
# ## 1. ヘッドは 1 つの射影の切れ端
#
# $h$ 個の行列 $W^Q_i$（$d_{model}\times d_k$）を横に並べると、1 つの $d_{model}\times d_{model}$ 行列になります。1 回の GEMM ですべてのヘッドを一度に射影できます。`split_heads` は (B, T, $h\cdot d_k$) の配列を受け取ります。これを reshape して (B, T, h, $d_k$) にします。そしてヘッドの軸を前に移して (B, h, T, $d_k$) にします。`merge_heads` はその逆で、これが式の Concat *そのもの*です。

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

# %% [markdown] ja
# ## 2. h 個のヘッドのコストは全幅のヘッド 1 つとほぼ同じ
#
# $n$ 個の位置を持つ 1 つの層の積和の回数を数えます。射影は $h$ によらず $4\,n\,d_{model}^2$ です。アテンションは $h$ 個のヘッドで、それぞれ $QK^\top$ と $AV$ が $n\cdot n\cdot d_k$、合計 $2\,n^2\,h\,d_k = 2\,n^2\,d_{model}$ で、やはり $h$ によりません。これが論文の主張「全体の計算コストは、次元を縮めない単一ヘッドのアテンションとほぼ同じ」（§3.2.2）です。$h$ とともに増えるのはソフトマックス（$h\,n^2$ 回の指数関数）だけで、これは小さな項です。順伝播 + 逆伝播の時間を測ってみましょう。

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

# %% [markdown] ja
# ヘッドの数を 16–32 倍に変えても、時間の違いは小さな倍率に収まります。（ごく細いヘッドをたくさん使うと少し遅くなります。小さな行列積は 1 回の呼び出しあたりの仕事が少なく、ソフトマックスの仕事 $h\,n^2$ も増えるからです。）
#
# ## 3. 論文の表 1 を測る：セルフアテンションと再帰型の層
#
# 論文の表 1 は、層の種類を、層あたりの計算量、順番に実行しなければならない演算の数（「逐次的な演算」）、そして 2 つの位置の間を信号が通る最長の経路で比べています。
#
# | 層 | 層あたりの計算量 | 逐次的な演算 | 最大経路長 |
# |---|---|---|---|
# | セルフアテンション | $O(n^2\cdot d)$ | $O(1)$ | $O(1)$ |
# | 再帰型 | $O(n\cdot d^2)$ | $O(n)$ | $O(n)$ |
#
# 素朴な tanh RNN $h_t = \tanh(x_tW_x + h_{t-1}W_h + b)$ をエンジンの演算で書き、$n$ を大きくしながら、同じ幅のセルフアテンションの層 1 つと比べます。入力の射影 $x_tW_x$ はすべての位置をまとめて 1 回の GEMM にできます。しかし再帰 $h_{t-1}W_h$ ではそれができません。ステップ $t$ にはステップ $t-1$ が必要だからです。

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
plt.show()

# %% [markdown]
# What the measurement shows. In *work*, self-attention is cheaper than recurrence while $n < d$,
# which for word-piece sentences is the usual case (§4), and more expensive beyond. But the
# recurrent layer's $n$ steps must run one after another: its graph is $O(n)$ operations deep, while
# self-attention's depth does not depend on $n$ at all — every position is computed by the same few
# large matrix products. On a machine with parallel hardware (a GPU, or BLAS on many cores), the
# depth, not the work, dominates for the lengths of translation sentences; in our Python engine each
# sequential step also costs a fixed overhead, which makes the RNN's line climb from the start.

# %% [markdown] ja
# 測定から次のことがわかります。*計算量*では、$n < d$ である限りセルフアテンションは再帰より安く、ワードピースに区切った文ではこれが普通です（§4）。それを超えると高くなります。しかし再帰型の層の $n$ 個のステップは順番に実行しなければなりません。その計算グラフの深さは $O(n)$ ですが、セルフアテンションの深さは $n$ にまったくよりません。すべての位置が同じ少数の大きな行列積で計算されるからです。並列ハードウェア（GPU や多数のコアで動く BLAS）を持つマシンでは、翻訳の文の長さなら、計算量ではなく深さが支配的になります。本書の Python のエンジンでは、逐次的な各ステップにさらに一定のオーバーヘッドがかかるので、RNN の線は最初から上昇します。

# %%
assert sequential_depth(rnn(mt.Tensor(rng.standard_normal((1, 64, d))))) > \
    1.5 * sequential_depth(rnn(mt.Tensor(rng.standard_normal((1, 32, d)))))

# %% [markdown]
# ## 4. Without positions, attention cannot see order
#
# Permute the input positions and the output of self-attention is permuted the same way — nothing
# else changes. Word order must be added to the input: chapter 8.

# %% [markdown] ja
# ## 4. 位置の情報がなければ、アテンションには順序が見えない
#
# 入力の位置を並べ替えると、セルフアテンションの出力も同じように並べ替わるだけで、それ以外は何も変わりません。語順は入力に加えなければなりません。それを扱うのが第 8 章です。

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

# %% [markdown] ja
# 各ヘッドは、それぞれのやり方でトークンを見ています。順伝播が返すのは出力だけです。ただし `nn.record_attention(layer)` の中では、層が重み (B, h, T, S) も `attention_weights` に保持します。既定では無効です。逆伝播が終われば、学習にはもう使い道がないからです。

# %%
with nn.record_attention(layer):
    layer(x)
weights = layer.attention_weights.numpy()[0]                      # (h, T, S)
print("weights per head:", weights.shape, " rows sum to 1:", np.allclose(weights.sum(-1), 1.0))
print("where query 0 looks, head by head:\n", np.round(weights[:, 0], 2))

# %% [markdown]
# ## 5. Gradient checks (float64)

# %% [markdown] ja
# ## 5. 勾配チェック（float64）

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
# Without a cache the layer projects Q, K and V with ONE GEMM, $x\,[W^Q \mid W^K \mid W^V]$ (for
# cross-attention: Q, then $[K \mid V]$ from the memory), and hands the packed result to
# `PackedAttention`, which cuts the parts and heads out as views and returns its gradient in the same
# packed layout. The checks above went through that path; here is `PackedAttention` on its own, with
# one packed input (self-attention, (B, T, 3·h·d_k)) and with two (cross-attention: q and a packed kv).

# %% [markdown] ja
# キャッシュがないとき、層は Q、K、V を 1 回の GEMM $x\,[W^Q \mid W^K \mid W^V]$ で射影し（クロスアテンションでは Q と、メモリからの $[K \mid V]$）、まとめた結果を `PackedAttention` に渡します。`PackedAttention` は各部分とヘッドをビューとして切り出し、勾配も同じまとめた配置で返します。上のチェックはこの経路を通っていました。ここでは `PackedAttention` を単独で確かめます。まとめた入力が 1 つの場合（セルフアテンション、(B, T, 3·h·d_k)）と、2 つの場合（クロスアテンション：q と、まとめた kv）です。

# %%
from minitransformer.functional.multi_head import PackedAttention

qkv = mt.Tensor(rng.standard_normal((2, 3, 3 * 8)), requires_grad=True)     # [Q | K | V], h = 2, d_k = 4
assert mt.gradcheck(lambda qkv: PackedAttention(2, mt.functional.causal_mask(3))(qkv), [qkv])
print("PackedAttention, self (one packed qkv, causal): gradcheck passed")
q = mt.Tensor(rng.standard_normal((2, 3, 8)), requires_grad=True)
kv = mt.Tensor(rng.standard_normal((2, 4, 2 * 8)), requires_grad=True)      # [K | V] from the memory
assert mt.gradcheck(lambda q, kv: PackedAttention(2, pad)(q, kv), [q, kv])
print("PackedAttention, cross (q and a packed kv, padding): gradcheck passed")

# %% [markdown]
# The packed path and the chapter's six lines that project one by one compute the same function.
# Build the one-by-one computation from the layer's own `w_q`, `w_k`, `w_v`, `w_o` and
# `F.scaled_dot_product_attention`, and compare. The parameters are still four Linear layers: the
# state dict does not know about the packing.

# %% [markdown] ja
# まとめた経路と、本文の 1 つずつ射影する 6 行は、同じ関数を計算します。層自身の `w_q`、`w_k`、`w_v`、`w_o` と `F.scaled_dot_product_attention` から 1 つずつ射影する計算を組み立てて、比べてみましょう。パラメータは今も 4 つの Linear 層のままです。state dict はまとめた配置とは無関係です。

# %%
def one_by_one(layer, query, source, mask):
    q = split_heads(layer.w_q(query), layer.n_heads)
    k = split_heads(layer.w_k(source), layer.n_heads)
    v = split_heads(layer.w_v(source), layer.n_heads)
    return layer.w_o(merge_heads(mt.functional.scaled_dot_product_attention(q, k, v, mask)))


causal = mt.functional.causal_mask(3)
packed_self, plain_self = mha(xq, None, causal), one_by_one(mha, xq, xq, causal)
packed_cross, plain_cross = mha(xq, memory, pad), one_by_one(mha, xq, memory, pad)
print("the layer's attention Function:", type(packed_self.creator.inputs[0].creator).__name__)
print("self-attention  max |packed − one by one| =", np.abs(packed_self.numpy() - plain_self.numpy()).max())
print("cross-attention max |packed − one by one| =", np.abs(packed_cross.numpy() - plain_cross.numpy()).max())
print("parameters:", sorted(mha.state_dict()))
np.testing.assert_allclose(packed_self.numpy(), plain_self.numpy(), atol=1e-12)
np.testing.assert_allclose(packed_cross.numpy(), plain_cross.numpy(), atol=1e-12)

# %% [markdown]
# ## Exercises
#
# {{exercises}}

# %% [markdown] ja
# ## 演習
#
# {{exercises}}
