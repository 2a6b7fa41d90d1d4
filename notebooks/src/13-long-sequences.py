# %% [markdown]
# # Chapter 13 — Long sequences (§4, Table 1; FlashAttention, sparse and linear attention)
#
# Eq. 1 builds a $T\times S$ matrix of weights and keeps it for the backward pass. Its memory grows
# as $n^2$. In this notebook we
# 1. **measure** that $n^2$ in our own engine,
# 2. derive the **online softmax** and check it block by block,
# 3. run **FlashAttention**'s tiled forward and its recomputing backward, and count what it stores,
# 4. draw **block-sparse** layouts and run them through the same tiles,
# 5. run **sliding-window** attention in $O(n\cdot w)$,
# 6. run **linear attention** and see that it is a different model,
# 7. measure **Table 1** in full: time, sequential operations and path length for four layer types,
# 8. gradient-check all three new functions,
# 9. decode with **linear attention as a recurrent network**, in constant memory,
# 10. build the **sparse patterns** of Sparse Transformer, Longformer and BigBird and run them through the tiles,
# 11. try **Linformer** and Reformer's **LSH attention** at a small scale.

# %% [markdown] ja
# # 第 13 章 — 長い系列（§4、論文の表 1。FlashAttention、スパースアテンション、線形アテンション）
#
# 式 (1) は $T\times S$ の重み行列を作り、逆伝播のためにそれを保持します。そのメモリは $n^2$ で増えます。このノートブックでは次のことを行います。
# 1. 本書のエンジンでその $n^2$ を**測ります**。
# 2. **オンラインソフトマックス**を導き、ブロックごとに確かめます。
# 3. **FlashAttention** のタイル化した順伝播と、再計算する逆伝播を動かし、それが何を保存するかを数えます。
# 4. **ブロックスパース**のレイアウトを描き、同じタイルで計算します。
# 5. **スライディングウィンドウ**のアテンションを $O(n\cdot w)$ で計算します。
# 6. **線形アテンション**を動かし、それが別のモデルであることを確かめます。
# 7. **論文の表 1** をすべて測ります（4 種類の層について、時間、逐次的な演算の数、経路長）。
# 8. 新しい 3 つの関数すべてを勾配チェックします。
# 9. **再帰型ネットワークとしての線形アテンション**を使い、一定のメモリでデコードします。
# 10. Sparse Transformer、Longformer、BigBird の**スパースなパターン**を作り、タイルで計算します。
# 11. **Linformer** と Reformer の **LSH アテンション**を小さな規模で試します。

# %%
import json
import sys
import tracemalloc
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import minitransformer as mt
import minitransformer.functional as F
from minitransformer.functional.flash_attention import finish_rows, flash_delta, online_softmax_step

from minitransformer.notebook_support import QUICK, save_figure
rng = np.random.default_rng(0)


def qkv(n, heads=4, d_k=64, dtype=np.float32, batch=1):
    """Random q, k, v of shape (batch, heads, n, d_k) that require gradients."""
    return tuple(mt.Tensor(rng.standard_normal((batch, heads, n, d_k)).astype(dtype), requires_grad=True)
                 for _ in range(3))


def peak_mib(fn):
    """Peak memory NumPy allocated while fn ran (tracemalloc sees NumPy's allocations), in MiB."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2 ** 20


# %% [markdown]
# ## 1. The $n^2$ in eq. 1, measured
#
# One forward + backward of eq. 1 with $B = 1$, $h = 4$, $d_k = 64$ in float32. The weights alone are
# $4\cdot n^2\cdot 4$ bytes: 16 MiB at $n = 1024$, 256 MiB at $n = 4096$, 4 GiB at $n = 16384$. Inside
# one process we can watch NumPy's own allocations with `tracemalloc`:

# %% [markdown] ja
# ## 1. 式 (1) の $n^2$ を測る
#
# $B = 1$、$h = 4$、$d_k = 64$、float32 で、式 (1) の順伝播 + 逆伝播を 1 回実行します。重みだけで $4\cdot n^2\cdot 4$ バイトあり、$n = 1024$ で 16 MiB、$n = 4096$ で 256 MiB、$n = 16384$ で 4 GiB です。1 つのプロセスの中なら、`tracemalloc` で NumPy 自身のメモリ確保を観察できます。

# %%
def forward_backward(attention, q, k, v):
    def run():
        for x in (q, k, v):
            x.grad = None
        out = attention(q, k, v)
        out.backward(np.ones(out.shape, dtype=out.dtype))
    return run


lengths = [128, 256, 512] if QUICK else [256, 512, 1024, 2048]
memory = {"eq. 1": [], "flash": []}
for n in lengths:
    q, k, v = qkv(n)
    memory["eq. 1"].append(peak_mib(forward_backward(F.scaled_dot_product_attention, q, k, v)))
    memory["flash"].append(peak_mib(forward_backward(F.flash_attention, q, k, v)))
    weights = 4 * n * n * 4 / 2 ** 20
    print(f"n = {n:5d}   weights {weights:7.1f} MiB   peak: eq. 1 {memory['eq. 1'][-1]:7.1f} MiB, "
          f"flash {memory['flash'][-1]:5.1f} MiB")
assert memory["eq. 1"][-1] > 4 * memory["eq. 1"][-2] * 0.8          # quadrupled when n doubled
assert memory["flash"][-1] < 3 * memory["flash"][-2]                # about doubled

# %% [markdown]
# Each doubling of $n$ multiplies eq. 1's peak by four, and flash's by about two. The benchmark
# `benchmarks/sequence_length/long_sequences.py` measures the same in separate processes, up to $n = 16384$; if its
# results file is present we show it here (the chapter quotes the same file).

# %% [markdown] ja
# $n$ が 2 倍になると、式 (1) のピークは 4 倍、flash のピークはおよそ 2 倍です。ベンチマーク `benchmarks/sequence_length/long_sequences.py` は、同じものを別々のプロセスで $n = 16384$ まで測ります。その結果ファイルがあれば、ここに表示します（章も同じファイルを引用しています）。

# %%
results_path = Path("../benchmarks/sequence_length/results/long_sequences.json")
if results_path.exists():
    sys.path.insert(0, "../benchmarks/sequence_length")
    from long_sequences import render_markdown
    print(render_markdown(json.loads(results_path.read_text())))

# %% [markdown]
# ## 2. The online softmax
#
# Chapter 4 subtracts the row maximum before exponentiating. FlashAttention sees a row of scores one
# block at a time, so it keeps a *running* maximum $m$, a running sum $\ell = \sum_j e^{s_j - m}$ and a
# running weighted sum $a = \sum_j e^{s_j - m} v_j$. When a block with a larger maximum $m'$
# arrives, everything accumulated so far was computed against the old maximum. Multiplying by
# $e^{m - m'}$ moves it to the new one ($J$ is the block's set of keys):
#
# $$\ell' = e^{m-m'}\,\ell + \sum_{j\in J} e^{s_j - m'},\qquad a' = e^{m-m'}\,a + \sum_{j\in J} e^{s_j-m'}\,v_j .$$
#
# At the end, $o = a/\ell$ and the row's log-sum-exp is $L = m + \log\ell$.

# %% [markdown] ja
# ## 2. オンラインソフトマックス
#
# 第 4 章では、指数をとる前に行の最大値を引きました。FlashAttention はスコアの行を一度に 1 ブロックずつしか見ないので、*途中経過の*最大値 $m$、途中経過の和 $\ell = \sum_j e^{s_j - m}$、途中経過の重み付き和 $a = \sum_j e^{s_j - m} v_j$ を保持します。より大きな最大値 $m'$ を持つブロック $J$（キーの集合）が届いたとき、それまでに蓄えたものはすべて古い最大値を基準に計算されています。$e^{m - m'}$ を掛ければ、新しい最大値の基準に移せます。
#
# $$\ell' = e^{m-m'}\,\ell + \sum_{j\in J} e^{s_j - m'},\qquad a' = e^{m-m'}\,a + \sum_{j\in J} e^{s_j-m'}\,v_j .$$
#
# 最後には $o = a/\ell$ となり、行の log-sum-exp は $L = m + \log\ell$ です。

# %%
scores, values = 3 * rng.standard_normal((2, 10)), rng.standard_normal((10, 3))
state = (np.full((2, 1), -np.inf), np.zeros((2, 1)), np.zeros((2, 3)))
for start, stop in [(0, 4), (4, 7), (7, 10)]:
    state = online_softmax_step(*state, scores[:, start:stop], values[start:stop])
    print(f"after keys {start}..{stop - 1}: running max {state[0].ravel().round(3)}, running sum "
          f"{state[1].ravel().round(3)}")
out, log_sum_exp = finish_rows(*state)
weights = np.exp(scores - scores.max(1, keepdims=True))
weights /= weights.sum(1, keepdims=True)
print("block by block equals the softmax of the whole row:", np.allclose(out, weights @ values, atol=1e-14))
assert np.allclose(out, weights @ values, atol=1e-14)
assert np.allclose(log_sum_exp[:, 0], np.log(np.exp(scores).sum(1)))

# %% [markdown]
# ## 3. FlashAttention: tiles forward, recomputation backward
#
# `F.flash_attention` runs that loop over tiles of `block_size` queries × `block_size` keys. It keeps
# only $O$ and $L$ for backward. The backward recomputes each tile's weights as $P = e^{S - L}$ and
# needs one more number per query, $D_i = \sum_e \mathrm{d}O_{ie} O_{ie}$, which replaces the row sums
# of chapter 6's softmax backward. Same numbers as eq. 1, in value and gradient:

# %% [markdown] ja
# ## 3. FlashAttention：タイルごとの順伝播、再計算による逆伝播
#
# `F.flash_attention` は、このループを `block_size` 個のクエリ × `block_size` 個のキーのタイルについて実行します。逆伝播のために保持するのは $O$ と $L$ だけです。逆伝播は各タイルの重みを $P = e^{S - L}$ として再計算し、クエリごとにもう 1 つの数 $D_i = \sum_e \mathrm{d}O_{ie} O_{ie}$ を必要とします。これが第 6 章のソフトマックスの逆伝播の行和に取って代わります。値と勾配のどちらも、式 (1) と同じ数値になります。

# %%
q, k, v = qkv(300, dtype=np.float64)
upstream = rng.standard_normal((1, 4, 300, 64))
results = {}
causal = F.causal_mask(300, "cpu")
for name, attention in [("eq. 1", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, mask=causal)),
                        ("flash", lambda q, k, v: F.flash_attention(q, k, v, causal=True, block_size=64))]:
    for x in (q, k, v):
        x.grad = None
    out = attention(q, k, v)
    out.backward(upstream)
    results[name] = [out.data] + [x.grad for x in (q, k, v)]
gaps = [np.abs(a - b).max() for a, b in zip(results["eq. 1"], results["flash"])]
print("largest difference in O, dQ, dK, dV:", ["%.1e" % g for g in gaps])
assert max(gaps) < 1e-10

flash = F.flash_attention(q, k, v, causal=True, block_size=64).creator
kept = {name: value.shape for name, value in vars(flash).items() if hasattr(value, "nbytes")}
print("what the flash Function keeps for backward:", kept)
n_tiles = len(list(flash._tiles(300, 300)))
print("causal: tiles computed", sum(len(keys) for _, keys in flash._tiles(300, 300)), "of", n_tiles ** 2)

# %% [markdown]
# The saved arrays are the inputs, $O$ and $L$: nothing of size $T\times S$. With `causal=True`, the
# tiles that lie entirely above the diagonal are never computed (15 of 25 here).
#
# On NumPy the tiles cost Python loop iterations. At $n = 1024$ the benchmark above shows flash slower
# than eq. 1 in time while using a fraction of its memory. On a GPU, FlashAttention's fused CUDA kernel
# keeps each tile in on-chip SRAM, and that IO-awareness is what made it fast in Dao et al.'s
# measurements. This tile loop on CuPy is not that kernel: each of its operations writes to HBM.
#
# ## 4. Block-sparse layouts
#
# `block_mask` lists the tiles to compute. Here, a *local* pattern (a sliding window of tiles near the
# diagonal, the first head of Child et al.'s (2019) *strided* pattern) combined with the *summary*
# columns of their *fixed* pattern (the last block of every group of $s$, which collects a summary of
# its group). Their strided pattern's second head would instead see every $l$-th position, $(i - j)
# \bmod l = 0$. With the window as wide as the group, two layers of the combined pattern connect every
# position to every earlier one, at $O(n\sqrt{n})$ cost when both are $\sqrt{n}$.

# %% [markdown] ja
# 保存される配列は入力と $O$ と $L$ で、$T\times S$ の大きさのものはありません。`causal=True` では、対角線より完全に上にあるタイルは一度も計算されません（ここでは 25 個中 15 個）。
#
# NumPy では、タイルの一つひとつが Python のループの反復として時間を取ります。$n = 1024$ では、上のベンチマークが示すとおり、flash は式 (1) のメモリのごく一部しか使わない一方で、時間では遅くなります。GPU では、FlashAttention の融合した CUDA カーネルが各タイルをオンチップの SRAM に置いたまま計算します。Dao らの測定で FlashAttention が速かったのは、この IO を意識した設計のおかげです。CuPy の上で回すこのタイルのループは、そのカーネルではありません。演算のたびに結果を HBM へ書き込みます。
#
# ## 4. ブロックスパースのレイアウト
#
# `block_mask` は計算するタイルを列挙します。ここでは 2 つのパターンを組み合わせます。1 つは*局所的な*パターンで、対角線近くのタイルのスライディングウィンドウです。これは Child ら（2019）の*ストライドの*パターンの 1 つめのヘッドにあたります。もう 1 つは、同じ論文の*固定の*パターンにある*要約*の列です。$s$ 個ずつのブロックの組の最後のブロックが、その組の要約を集めます。ストライドのパターンの 2 つめのヘッドなら、代わりに $l$ 個おきの位置、つまり $(i - j) \bmod l = 0$ を見ます。ウィンドウの幅を組の大きさと同じにすれば、組み合わせたパターンを 2 層重ねるだけで、どの位置もそれより前のすべての位置とつながります。そのコストは $O(n\sqrt{n})$ です（両方の幅を $\sqrt{n}$ にした場合）。

# %%
def local_layout(n_blocks, width, causal=True):
    i, j = np.arange(n_blocks)[:, None], np.arange(n_blocks)[None, :]
    return (j <= i) & (i - j < width) if causal else np.abs(i - j) < width


def summary_layout(n_blocks, group, causal=True):
    """The fixed pattern's summary columns (Child et al., 2019): the last block of every group."""
    i, j = np.arange(n_blocks)[:, None], np.arange(n_blocks)[None, :]
    return ((j % group) == group - 1) & (j <= i) if causal else (j % group) == group - 1


n_blocks = 16
layouts = {"dense causal": np.tril(np.ones((n_blocks, n_blocks), bool)),
           "local (4 blocks)": local_layout(n_blocks, 4),
           "fixed summaries (every 4th)": summary_layout(n_blocks, 4),
           "local + summaries": local_layout(n_blocks, 4) | summary_layout(n_blocks, 4)}
fig, axes = plt.subplots(1, 4, figsize=(12, 3.2))
for ax, (name, layout) in zip(axes, layouts.items()):
    ax.imshow(layout, cmap="Blues", vmin=0, vmax=1.3)
    ax.set_title(f"{name}\n{layout.sum()} of {n_blocks * n_blocks} tiles", fontsize=9)
    ax.set_xlabel("key block")
    ax.set_xticks([])
    ax.set_yticks([])
axes[0].set_ylabel("query block")
fig.tight_layout()
save_figure(fig, "13-block-sparse.png", dpi=90)
plt.show()

# %%
block, n = 16, 16 * 16
layout = layouts["local + summaries"]
q, k, v = qkv(n, heads=2, d_k=16, dtype=np.float64)
sparse = F.flash_attention(q, k, v, causal=True, block_size=block, block_mask=layout)
entry_mask = np.kron(layout, np.ones((block, block), bool))[None, None] & F.causal_mask(n, "cpu")
dense = F.scaled_dot_product_attention(q, k, v, mask=entry_mask)
print("block-sparse flash equals eq. 1 with the expanded mask:", np.abs(sparse.data - dense.data).max())
assert np.abs(sparse.data - dense.data).max() < 1e-12
reach = layout.astype(int)
layers_needed = next(depth for depth in range(1, 5)
                     if (np.linalg.matrix_power(reach, depth) > 0)[np.tril_indices(n_blocks)].all())
print("layers of local + summaries until every block sees every earlier block:", layers_needed)
assert layers_needed == 2

# %% [markdown]
# ## 5. Sliding windows: $O(n\cdot w)$
#
# `F.local_attention(q, k, v, window)` lets query $i$ see keys $i-w \dots i+w$, $2w + 1$ of them: $w$
# counts one side. That is Table 1's *restricted* self-attention with a neighbourhood of $r = 2w + 1$,
# and Longformer's sliding window of $2w$ (its window size counts both sides). It cuts the sequence into chunks of
# $w$ queries; a chunk's keys are its own block and its two neighbours, three shifted views of the
# same array. Then one ordinary attention runs over (chunks × $w$ × $3w$): $3nw$ scores instead of $n^2$.

# %% [markdown] ja
# ## 5. スライディングウィンドウ：$O(n\cdot w)$
#
# `F.local_attention(q, k, v, window)` では、クエリ $i$ はキー $i-w \dots i+w$ の $2w + 1$ 個を見ます。$w$ は片側の数です。これは論文の表 1 の*制限付き*セルフアテンション（近傍の大きさ $r = 2w + 1$）にあたります。また、幅 $2w$ の Longformer のスライディングウィンドウでもあります（Longformer のウィンドウの大きさは両側を数えます）。系列を $w$ 個のクエリからなるチャンクに切り分けます。チャンクのキーは自分のブロックと両隣の 2 つのブロックで、同じ配列を 3 通りにずらしたビューです。そのうえで、通常のアテンションを (チャンク × $w$ × $3w$) に対して 1 回計算します。スコアの数は $3nw$ で、$n^2$ ではありません。

# %%
n, window = 200, 16
q, k, v = qkv(n, heads=2, d_k=16, dtype=np.float64)
local = F.local_attention(q, k, v, window, causal=True)
band = F.scaled_dot_product_attention(q, k, v, mask=F.band_mask(n, window, causal=True, device="cpu"))
print("local attention equals eq. 1 with the band mask:", np.abs(local.data - band.data).max())
assert np.abs(local.data - band.data).max() < 1e-12

local_memory = []
for n in lengths:
    q, k, v = qkv(n)
    local_memory.append(peak_mib(forward_backward(lambda q, k, v: F.local_attention(q, k, v, 64), q, k, v)))
print("peak MiB of local attention (w = 64) at n =", lengths, ":", [round(m, 1) for m in local_memory])
assert local_memory[-1] < 3 * local_memory[-2]                      # linear in n

# %% [markdown]
# ## 6. Linear attention: a different model
#
# With $\phi(x) = \mathrm{elu}(x) + 1$ the weight of key $j$ for query $i$ is
# $\phi(q_i)\cdot\phi(k_j) / \sum_{j'} \phi(q_i)\cdot\phi(k_{j'})$. Regroup the product and the sum over
# keys happens once: $o_i = \phi(q_i)^\top (\sum_j \phi(k_j)v_j^\top) / \phi(q_i)^\top \sum_j\phi(k_j)$.
# Causal: the two sums become prefix sums over $j \le i$. Compare its weights with softmax's for the
# same queries and keys:

# %% [markdown] ja
# ## 6. 線形アテンション：別のモデル
#
# $\phi(x) = \mathrm{elu}(x) + 1$ とすると、キー $j$ がクエリ $i$ に対して持つ重みは $\phi(q_i)\cdot\phi(k_j) / \sum_{j'} \phi(q_i)\cdot\phi(k_{j'})$ です。積の順序を組み替えると、キーについての和は一度で済みます：$o_i = \phi(q_i)^\top (\sum_j \phi(k_j)v_j^\top) / \phi(q_i)^\top \sum_j\phi(k_j)$。因果的な場合、2 つの和は $j \le i$ についての接頭辞和になります。同じクエリとキーに対して、その重みをソフトマックスの重みと比べてみましょう。

# %%
n, d_k = 48, 16
q, k, v = qkv(n, heads=1, d_k=d_k, dtype=np.float64)
scores = q.data[0, 0] @ k.data[0, 0].T / np.sqrt(d_k)
softmax_weights = np.exp(scores - scores.max(1, keepdims=True))
softmax_weights /= softmax_weights.sum(1, keepdims=True)
similarity = F.elu_plus_one(q.data[0, 0]) @ F.elu_plus_one(k.data[0, 0]).T
linear_weights = similarity / similarity.sum(1, keepdims=True)
check = F.linear_attention(q, k, v).data[0, 0]
assert np.allclose(check, linear_weights @ v.data[0, 0], atol=1e-12)


def entropy(w):
    return -(w * np.log(w)).sum(1).mean()


print(f"mean entropy of a row: softmax {entropy(softmax_weights):.2f} nats, linear {entropy(linear_weights):.2f} "
      f"nats (uniform: {np.log(n):.2f})")
print("largest weight, mean over queries: softmax", softmax_weights.max(1).mean().round(3),
      " linear", linear_weights.max(1).mean().round(3))
fig, axes = plt.subplots(1, 2, figsize=(8, 3.4))
pairs = [("softmax(q·k/√d_k)", softmax_weights), ("φ(q)·φ(k), normalised", linear_weights)]
for ax, (name, w) in zip(axes, pairs):
    image = ax.imshow(w, cmap="viridis")
    ax.set_title(name, fontsize=9)
    ax.set_xlabel("key")
    fig.colorbar(image, ax=ax, fraction=0.046)
axes[0].set_ylabel("query")
fig.tight_layout()
save_figure(fig, "13-linear-vs-softmax.png", dpi=90)
plt.show()

# %% [markdown]
# With random queries and keys the linear weights are much flatter: every $\phi$ is positive, and the
# similarity is a product of features rather than an exponential of a dot product, so no key can
# dominate the way one does under softmax. A model trained with it learns to live with that; it is not
# a cheaper way to compute the same attention.
#
# ## 7. Table 1, all rows and all columns
#
# `benchmarks/sequence_length/table1.py` writes the four layers with engine ops (chapter 6's LSTM, a convolution with
# kernel 3 as three shifted matrix products, multi-head self-attention, and restricted self-attention
# with $w = 8$ keys a side, $r = 17$, built on `local_attention`) and measures the three columns: time against $n$, the
# depth of the engine's graph (the sequential operations), and the number of stacked layers before
# the last output depends on the first input (the path length, tested with a gradient).

# %% [markdown] ja
# ランダムなクエリとキーでは、線形アテンションの重みのほうがずっと平坦です。どの $\phi$ も正であり、類似度が内積の指数ではなく特徴量の積なので、ソフトマックスの場合と違い、1 つのキーが支配的になれないのです。線形アテンションで学習したモデルは、その性質を前提として学びます。同じアテンションをより安く計算する方法ではないのです。
#
# ## 7. 論文の表 1、すべての行とすべての列
#
# `benchmarks/sequence_length/table1.py` は 4 つの層をエンジンの演算で書きます。第 6 章の LSTM、3 つのずらした行列積として書いたカーネル 3 の畳み込み、マルチヘッドセルフアテンション、制限付きセルフアテンションです。最後のものは `local_attention` の上に構築し、片側 $w = 8$（$r = 17$）とします。測るのは 3 つの列です。1 つ目は $n$ に対する時間、2 つ目はエンジンのグラフの深さ（逐次的な演算の数）です。3 つ目は、最後の出力が最初の入力に依存するまでに積み重ねる層の数（経路長。勾配で確かめます）です。

# %%
sys.path.insert(0, "../benchmarks/sequence_length")
import table1  # noqa: E402

table_lengths = [16, 64, 256] if QUICK else [16, 32, 64, 128, 256, 512, 1024]
measured = table1.measure(table_lengths, repeats=1 if QUICK else 3, path_n=32)
print(f"{'layer':<36}{'depth n=32':>11}{'depth n=64':>11}{'layers to connect (n=32)':>26}")
for name, row in measured["rows"].items():
    print(f"{name:<36}{row['graph_depth'][0]:>11}{row['graph_depth'][1]:>11}{row['layers_to_connect']:>26}")

fig, ax = plt.subplots(figsize=(6, 3.6))
for (name, row), marker in zip(measured["rows"].items(), "osd^"):
    ax.loglog(table_lengths, 1e3 * np.array(row["seconds"]), marker + "-", label=name)
ax.set_xlabel("sequence length n")
ax.set_ylabel("forward + backward, ms")
ax.set_title(f"Table 1 measured, d = {measured['d']}", fontsize=10)
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

rows = measured["rows"]
assert rows["self-attention"]["layers_to_connect"] == 1
assert rows["convolutional, k = 3"]["layers_to_connect"] == 31            # n − 1 for kernel 3
assert rows["restricted self-attention, r = 8"]["layers_to_connect"] == 4  # ⌈(n − 1) / w⌉, w = 8 a side
assert rows["recurrent"]["graph_depth"][1] > 1.8 * rows["recurrent"]["graph_depth"][0]
assert all(rows[name]["graph_depth"][0] == rows[name]["graph_depth"][1]
           for name in rows if name != "recurrent")

# %% [markdown]
# The path lengths follow Table 1's orders for the layers built here: one layer of self-attention
# connects the ends; our contiguous kernel-3 convolution needs $n-1 = 31$ layers ($O(n/k)$; Table 1's
# $O(\log_k n)$ is for dilated convolutions); restricted attention with $w = 8$ a side needs
# $\lceil 31/8\rceil = 4$ ($O(n/r)$, $r = 2w + 1$). The recurrent layer connects them in one layer,
# but only through its $n-1$ steps, which is why its graph depth doubles with $n$ while every other
# layer's depth stays fixed.
#
# ## 8. Gradient checks
#
# float64 central differences with a random upstream gradient, on lengths that are not multiples
# of the block or window, with causal, padding and block masks.

# %% [markdown] ja
# 経路長は、ここで作った層について論文の表 1 の次数に従います。セルフアテンションは 1 層で両端をつなぎます。カーネル 3 の畳み込みを積み重ねた本書の層は $n-1 = 31$ 層を必要とします（$O(n/k)$ です。表 1 の $O(\log_k n)$ は膨張畳み込みについての値です）。片側 $w = 8$ の制限付きアテンションは $\lceil 31/8\rceil = 4$ 層です（$O(n/r)$、$r = 2w + 1$）。再帰層は 1 層でつなぎますが、その $n-1$ ステップを通してしかつなげません。そのため、ほかのどの層もグラフの深さが一定なのに、再帰層の深さは $n$ とともに 2 倍になります。
#
# ## 8. 勾配チェック
#
# ランダムな上流勾配を使い、float64 の中心差分で確かめます。長さにはブロックやウィンドウの倍数でないものを使い、因果マスク、パディングマスク、ブロックマスクも試します。

# %%
def small(t, s, d_k=3, d_v=2):
    return (mt.Tensor(rng.standard_normal((2, 1, t, d_k)), requires_grad=True),
            mt.Tensor(rng.standard_normal((2, 1, s, d_k)), requires_grad=True),
            mt.Tensor(rng.standard_normal((2, 1, s, d_v)), requires_grad=True))


padding = (np.arange(7)[None, :] < np.array([5, 7])[:, None])[:, None, None, :]    # (B, 1, 1, S)
layout = np.array([[1, 0, 0], [1, 1, 0], [0, 1, 1]], bool)
checks = {
    "flash, causal + padding, block 3": lambda q, k, v: F.flash_attention(q, k, v, mask=padding, causal=True,
                                                                           block_size=3),
    "flash, block-sparse": lambda q, k, v: F.flash_attention(q, k, v, block_size=3, block_mask=layout),
    "local, window 2, padding": lambda q, k, v: F.local_attention(q, k, v, 2, mask=padding),
    "linear, causal": lambda q, k, v: F.linear_attention(q, k, v, causal=True),
}
for name, fn in checks.items():
    print(f"{name:<36}", mt.gradcheck(fn, list(small(7, 7))))


# %% [markdown]
# ## 9. Linear attention as a recurrent network
#
# Causal linear attention is a recurrence over the state $S_i = S_{i-1} + \phi(k_i)v_i^\top$,
# $z_i = z_{i-1} + \phi(k_i)$, read as $o_i = S_i^\top\phi(q_i) / z_i^\top\phi(q_i)$ (Exercise 13.4).
# Decoding step by step from that state gives the causal pass, and a decoder's cache keeps $(S, z)$
# instead of every key and value: its size does not grow with the prefix.

# %% [markdown] ja
# ## 9. 再帰型ネットワークとしての線形アテンション
#
# 因果的な線形アテンションは、状態 $S_i = S_{i-1} + \phi(k_i)v_i^\top$、$z_i = z_{i-1} + \phi(k_i)$ についての再帰で、出力は $o_i = S_i^\top\phi(q_i) / z_i^\top\phi(q_i)$ として読みます（演習 13.4）。この状態から 1 ステップずつデコードすると因果的な一括計算と同じ結果になり、デコーダのキャッシュはすべてのキーとバリューの代わりに $(S, z)$ を保持します。その大きさは接頭辞の長さとともに増えません。

# %%
from minitransformer.functional.linear_attention import linear_attention_step

q, k, v = (x.data.astype(np.float64) for x in qkv(12, heads=2, d_k=8))
full = F.linear_attention(mt.Tensor(q), mt.Tensor(k), mt.Tensor(v), causal=True).data
state, steps = None, []
for t in range(12):
    out, state = linear_attention_step(q[..., t:t + 1, :], k[..., t:t + 1, :], v[..., t:t + 1, :], state)
    steps.append(out.data)
print("step by step vs the causal pass:", np.abs(np.concatenate(steps, axis=-2) - full).max())
assert np.abs(np.concatenate(steps, axis=-2) - full).max() < 1e-10

config = dict(d_model=16, n_heads=2, d_ff=32, dropout=0.0, max_len=128)
cache_bytes = {}
for kind in ("softmax", "linear"):
    model = mt.nn.Transformer(mt.nn.TransformerConfig.tiny(11, attention=kind, **config))
    memory, src_mask = model.encode(np.array([[4, 5, 6]]))
    cache, sizes = model.init_cache(), []
    with mt.no_grad():
        for t in range(64):
            model.decode_step(np.array([3 + t % 7]), memory, src_mask, cache)
            sizes.append(sum(layer.self_attn.nbytes for layer in cache.layers))
    cache_bytes[kind] = sizes
fig, ax = plt.subplots(figsize=(5, 3))
for kind, sizes in cache_bytes.items():
    ax.plot(range(1, 65), sizes, label=kind)
ax.set_xlabel("decoded positions")
ax.set_ylabel("self-attention cache, bytes")
ax.legend()
plt.show()
assert len(set(cache_bytes["linear"])) == 1 and cache_bytes["softmax"][-1] == 64 * cache_bytes["softmax"][0]

# %% [markdown]
# ## 10. Sparse patterns as masks, run through the tiles
#
# Each pattern is a function of its definition (Exercise 13.5 writes Longformer's). `F.sparse_attention`
# computes only the tiles a pattern touches, and gives eq. 1's numbers with the same mask. Two steps of a
# factorised Sparse Transformer pattern reach every earlier position.

# %% [markdown] ja
# ## 10. マスクとしてのスパースなパターンをタイルで実行する
#
# 各パターンは、その定義を書いた関数です（演習 13.5 で Longformer のものを書きます）。`F.sparse_attention` はパターンが触れるタイルだけを計算し、同じマスクの式 (1) と同じ数値を与えます。分解された Sparse Transformer のパターンを 2 歩たどれば、それより前のすべての位置に届きます。

# %%
n = 32
patterns = {"strided": np.logical_or(*F.strided_pattern(n, 4, device="cpu")),
            "fixed": np.logical_or(*F.fixed_pattern(n, 4, 1, device="cpu")),
            "Longformer": F.longformer_pattern(n, 2, 2, [0], device="cpu"),
            "BigBird": F.expand_layout(F.bigbird_layout(n // 4, 1, 1, seed=0), 4, n, device="cpu")}
q, k, v = qkv(n, heads=2, d_k=8, dtype=np.float64)
for name, pattern in patterns.items():
    sparse = F.sparse_attention(q, k, v, pattern, block_size=4).data
    dense = F.scaled_dot_product_attention(q, k, v, mask=pattern[None, None]).data
    tiles = F.covering_layout(pattern, 4).sum()
    print(f"{name:<11} {pattern.sum():>4} pairs, {tiles:>2} of 64 tiles, |sparse − eq. 1| = {np.abs(sparse - dense).max():.1e}")
    assert np.abs(sparse - dense).max() < 1e-12
for name in ("strided", "fixed"):
    reach = patterns[name].astype(int)
    assert ((reach @ reach) > 0)[np.tril_indices(n)].all() and not (reach > 0)[np.tril_indices(n)].all()

# %% [markdown]
# ## 11. Linformer and LSH attention
#
# Linformer projects keys and values along the sequence with learned $E, F$ ($k\times n$): $O(nk)$, and no
# causal form. LSH attention hashes, sorts and attends within chunks; more hashing rounds find more of
# each query's best keys.

# %% [markdown] ja
# ## 11. Linformer と LSH アテンション
#
# Linformer は、学習される $E, F$（$k\times n$）でキーとバリューを系列の軸に沿って射影します。コストは $O(nk)$ で、因果的な形はありません。LSH アテンションは、ハッシュして並べ替え、チャンクの中でアテンションを計算します。ハッシュのラウンドを増やすほど、各クエリの最良のキーがより多く見つかります。

# %%
q, k, v = (mt.Tensor(rng.standard_normal((1, 2, 16, 8)), requires_grad=True) for _ in range(3))
e, f = (mt.Tensor(rng.standard_normal((4, 16)) / 2, requires_grad=True) for _ in range(2))
print("Linformer gradcheck:", mt.gradcheck(lambda q, k, v, e, f: F.linformer_attention(q, k, v, e, f), [q, k, v, e, f]))
try:
    F.linformer_attention(q, k, v, e, f, causal=True)
except ValueError as error:
    print("causal Linformer refused:", str(error)[:80], "…")
print("LSH gradcheck:", mt.gradcheck(lambda q, v: F.lsh_attention(q, v, n_buckets=4, chunk=4, seed=0), [q, v]))
queries, keys = rng.standard_normal((256, 32)), rng.standard_normal((512, 32))
keys /= np.linalg.norm(keys, axis=-1, keepdims=True)
recall = {r: F.bucket_recall(queries, keys, 8, r, seed=0) for r in (1, 2, 4, 8)}
print("best key in the query's bucket, 8 buckets, by rounds:", {r: round(x, 3) for r, x in recall.items()})
assert recall[8] > recall[1]
