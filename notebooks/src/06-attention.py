# %% [markdown]
# # Chapter 6 — Scaled dot-product attention (§3.2.1, §3.2.3)
#
# $$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right)V \qquad \text{(eq. 1)}$$
#
# Every query is compared with every key (a dot product), the scores become weights that sum to 1,
# and the output is the weighted average of the values. In this notebook we
# 1. run our fused `F.scaled_dot_product_attention` against the equation written out,
# 2. **measure** why the scores are divided by $\sqrt{d_k}$: the variance of $q\cdot k$ grows like
#    $d_k$, the softmax saturates and its gradient collapses,
# 3. draw the padding and causal masks and see what they do to the weights,
# 4. look at the corner case of a query with nothing to attend to,
# 5. check every gradient, and watch a broken backward fail,
# 6. go back to where attention came from: gradcheck Bahdanau's additive score, and watch a small
#    attention LSTM learn an alignment.

# %% [markdown] ja
# # 第 6 章 — スケール化内積アテンション（§3.2.1、§3.2.3）
#
# $$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right)V \qquad \text{(eq. 1)}$$
#
# すべてのクエリをすべてのキーと内積で比べ、そのスコアを和が 1 の重みに変えます。出力は、その重みによるバリューの重み付き平均です。このノートブックでは次のことを行います。
# 1. 融合版の `F.scaled_dot_product_attention` を、式をそのまま書き下したものと突き合わせます。
# 2. スコアを $\sqrt{d_k}$ で割る理由を**測ります**。$q\cdot k$ の分散は $d_k$ に比例して増え、ソフトマックスが飽和して勾配が消えてしまいます。
# 3. パディングマスクと因果マスクを描き、それが重みに何をするかを見ます。
# 4. 注目する先が 1 つもないクエリという特殊な場合を見ます。
# 5. すべての勾配を確かめ、壊した逆伝播が失敗するのを見届けます。
# 6. アテンションの出発点に戻ります。Bahdanau の加法的なスコアを勾配チェックし、小さなアテンション付き LSTM がアライメントを学習するのを見ます。

# %%
import matplotlib.pyplot as plt
import numpy as np

import minitransformer as mt
import minitransformer.functional as F

from minitransformer.notebook_support import QUICK, save_figure
rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. The equation, and our one fused Function
#
# Shapes: $Q$ is (B, h, T, $d_k$) — batch, heads, queries, features — $K$ is (B, h, S, $d_k$) and
# $V$ is (B, h, S, $d_v$). The scores $QK^\top$ are (B, h, T, S): one row per query, one column per key.

# %% [markdown] ja
# ## 1. 式と、1 つに融合した Function
#
# $Q$ の形状は (B, h, T, $d_k$) です。軸の並びはバッチ、ヘッド、クエリ、特徴量です。$K$ の形状は (B, h, S, $d_k$) です。$V$ の形状は (B, h, S, $d_v$) です。スコア $QK^\top$ の形状は (B, h, T, S) で、クエリごとに 1 行、キーごとに 1 列です。

# %%
B, H, T, S, D_K = 2, 2, 3, 4, 8
q = mt.Tensor(rng.standard_normal((B, H, T, D_K)), requires_grad=True)
k = mt.Tensor(rng.standard_normal((B, H, S, D_K)), requires_grad=True)
v = mt.Tensor(rng.standard_normal((B, H, S, D_K)), requires_grad=True)

out, weights = F.scaled_dot_product_attention(q, k, v, return_weights=True)
composed = F.softmax(q @ k.swapaxes(-1, -2) / np.sqrt(D_K)) @ v       # eq. 1 from three separate ops
print("output shape", out.shape, " weights shape", weights.shape)
print("rows of the weights sum to", np.unique(weights.numpy().sum(-1).round(12)))
np.testing.assert_allclose(out.numpy(), composed.numpy(), atol=1e-12)

# %% [markdown]
# The fused backward is the chain rule through the three lines $Z = QK^\top/\sqrt{d_k}$ (the scores: $S$ counts the keys),
# $A = \mathrm{softmax}(Z)$, $O = AV$, in reverse:
# $g_V = A^\top g_O$, $g_A = g_O V^\top$, $g_Z = A \odot (g_A - \sum_j g_A \odot A)$,
# $g_Q = g_Z K/\sqrt{d_k}$, $g_K = g_Z^\top Q/\sqrt{d_k}$. It agrees with the composed graph:

# %% [markdown] ja
# 融合版の逆伝播は、3 つの行 $Z = QK^\top/\sqrt{d_k}$、$A = \mathrm{softmax}(Z)$、$O = AV$ を逆順にたどる連鎖律です。$Z$ はスコアで、$S$ はキーの個数を表します。$g_V = A^\top g_O$、$g_A = g_O V^\top$、$g_Z = A \odot (g_A - \sum_j g_A \odot A)$、$g_Q = g_Z K/\sqrt{d_k}$、$g_K = g_Z^\top Q/\sqrt{d_k}$。これは組み合わせて作った計算グラフと一致します。

# %%
upstream = rng.standard_normal(out.shape)
out.backward(upstream)
fused = [t.grad.copy() for t in (q, k, v)]
for t in (q, k, v):
    t.grad = None
(F.softmax(q @ k.swapaxes(-1, -2) / np.sqrt(D_K)) @ v).backward(upstream)
for name, a, t in zip("qkv", fused, (q, k, v)):
    print(f"g{name}: max |fused − composed| = {np.abs(a - t.grad).max():.1e}")
    np.testing.assert_allclose(a, t.grad, atol=1e-12)

# %% [markdown]
# ## 2. Why divide by $\sqrt{d_k}$? Measure it
#
# The paper's footnote (footnote 4 of §3.2.1): if the components of $q$ and $k$ are independent with
# mean 0 and variance 1, then $q\cdot k = \sum_{i=1}^{d_k} q_i k_i$ has mean 0 and variance $d_k$.
# Each term $q_ik_i$ has variance $E[q_i^2]E[k_i^2] = 1$, and variances of independent terms add.
# So the scores spread out like $\sqrt{d_k}$, and the softmax — which only sees differences between
# scores — becomes a hard maximum. The paper *suspects* this is why unscaled dot-product attention
# did worse than additive attention for large $d_k$.
#
# We measure three things as $d_k$ grows, with and without the scale, for one query and 16 keys:
# the variance of the scores, the largest softmax weight, and the median norm of the gradient that
# the softmax passes back to the scores for a random upstream gradient.

# %% [markdown] ja
# ## 2. なぜ $\sqrt{d_k}$ で割るのか：測ってみる
#
# 論文の脚注（§3.2.1 の脚注 4）によれば、$q$ と $k$ の成分が独立で平均 0、分散 1 なら、$q\cdot k = \sum_{i=1}^{d_k} q_i k_i$ は平均 0、分散 $d_k$ を持ちます。各項 $q_ik_i$ の分散は $E[q_i^2]E[k_i^2] = 1$ で、独立な項の分散は足し合わせられるからです。したがってスコアは $\sqrt{d_k}$ のように広がり、スコアの差しか見ないソフトマックスは硬い最大値関数になります。論文は、$d_k$ が大きいときにスケーリングしない内積アテンションが加法的アテンションより悪かった理由はこれだろうと*推測*しています。
#
# 1 つのクエリと 16 個のキーについて、$d_k$ を大きくしながら、スケーリングありとなしで 3 つの量を測ります。スコアの分散、ソフトマックスの最大の重み、そしてランダムな上流勾配に対してソフトマックスがスコアに返す勾配ノルムの中央値です。

# %%
dims = [2, 8, 32, 128, 512] if QUICK else [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
n_queries, n_keys = (200, 16) if QUICK else (2000, 16)
measure = {"var": [], "max_raw": [], "max_scaled": [], "grad_raw": [], "grad_scaled": []}
for d_k in dims:
    qs = rng.standard_normal((n_queries, 1, d_k))
    ks = rng.standard_normal((n_queries, n_keys, d_k))
    dots = (qs @ ks.swapaxes(-1, -2))[:, 0]                  # (n_queries, n_keys)
    measure["var"].append(dots.var())
    g = rng.standard_normal(dots.shape)
    for label, scores in (("raw", dots), ("scaled", dots / np.sqrt(d_k))):
        s = mt.Tensor(scores, requires_grad=True)
        p = F.softmax(s)
        p.backward(g)
        measure[f"max_{label}"].append(p.numpy().max(-1).mean())
        measure[f"grad_{label}"].append(np.median(np.linalg.norm(s.grad, axis=-1)))

# %%
fig, axes = plt.subplots(1, 3, figsize=(12, 3.2))
axes[0].loglog(dims, measure["var"], "o-", label="measured var(q·k)")
axes[0].loglog(dims, dims, "k--", lw=1, label="$d_k$ (footnote 4)")
axes[0].set_title("variance of the scores")
axes[1].semilogx(dims, measure["max_raw"], "o-", label="q·k")
axes[1].semilogx(dims, measure["max_scaled"], "s-", label="q·k / √d_k")
axes[1].set_title("largest softmax weight (16 keys)")
axes[2].loglog(dims, measure["grad_raw"], "o-", label="q·k")
axes[2].loglog(dims, measure["grad_scaled"], "s-", label="q·k / √d_k")
axes[2].set_title("median gradient norm through the softmax")
for ax in axes:
    ax.set_xlabel("$d_k$")
    ax.legend(fontsize=8)
fig.tight_layout()
save_figure(fig, "06-why-sqrt-dk.png", dpi=90)
plt.show()
for d_k, var, g_raw, g_scaled in zip(dims, measure["var"], measure["grad_raw"], measure["grad_scaled"]):
    print(f"d_k={d_k:5d}  var(q·k)={var:8.1f}  gradient norm: unscaled {g_raw:.2e}, scaled {g_scaled:.2e}")

# %% [markdown]
# Reading the plots: the variance follows the dashed line $d_k$ exactly. Without the scale the
# largest weight climbs towards 1 (the softmax picks one key) and the typical (median) gradient norm
# falls by orders of magnitude — a saturated softmax has a Jacobian $\mathrm{diag}(p) - pp^\top \approx 0$.
# (The *mean* falls more slowly, like $1/\sqrt{d_k}$: it is carried by the few queries whose two best
# keys happen to score close together.) With the
# scale, all three stay flat whatever $d_k$ is: $d_k$ becomes a free design choice.

# %% [markdown] ja
# グラフの読み方：分散は破線 $d_k$ にぴったり沿います。スケーリングしないと、最大の重みは 1 に近づき（ソフトマックスが 1 つのキーだけを選ぶ）、典型的な（中央値の）勾配ノルムは何桁も下がります。飽和したソフトマックスのヤコビ行列は $\mathrm{diag}(p) - pp^\top \approx 0$ だからです。（*平均*はもっとゆっくり、$1/\sqrt{d_k}$ のように下がります。平均を支えているのは、上位 2 つのキーのスコアがたまたま近くなった少数のクエリです。）スケーリングすれば、$d_k$ がいくつでも 3 つとも平らなままです。$d_k$ は自由に選べる設計パラメータになります。

# %%
assert measure["grad_raw"][-1] < 0.1 * measure["grad_raw"][0]
assert max(measure["grad_scaled"]) < 3 * min(measure["grad_scaled"])

# %% [markdown]
# ## 3. Masks as pictures
#
# A mask is a boolean array that broadcasts against the scores (B, h, T, S); **True means "may
# attend"**. Masked scores become $-\infty$, so their weights are exactly 0.
#
# * The **padding mask** (B, 1, 1, S) hides the pad tokens that make a batch rectangular — the same
#   for every head and every query.
# * The **causal mask** (1, 1, T, T) hides the future in the decoder: position $i$ sees $0..i$
#   (§3.2.3, "masking out (setting to $-\infty$) all values in the input of the softmax which
#   correspond to illegal connections"). Together, with `&`: (B, 1, T, S).

# %% [markdown] ja
# ## 3. マスクを絵で見る
#
# マスクはスコア (B, h, T, S) に対してブロードキャストされるブール配列で、**True は「注目してよい」**を意味します。マスクされたスコアは $-\infty$ になるので、その重みはちょうど 0 です。
#
# * **パディングマスク** (B, 1, 1, S) は、バッチを長方形にそろえるためのパッドトークンを隠します。すべてのヘッド、すべてのクエリで共通です。
# * **因果マスク** (1, 1, T, T) は、デコーダで未来を隠します。位置 $i$ は $0..i$ を見ます（§3.2.3、「ソフトマックスの入力のうち、許されない接続に対応するすべての値をマスクする（$-\infty$ にする）」）。`&` で組み合わせると (B, 1, T, S) になります。

# %%
ids = np.array([[5, 6, 7, 8, 9, 4],
                [5, 6, 7, 0, 0, 0]])            # sentence 2 has 3 tokens and 3 pads (pad id 0)
pad = F.padding_mask(ids, pad_id=0)              # (2, 1, 1, 6)
causal = F.causal_mask(6)                        # (1, 1, 6, 6)
both = pad & causal                              # (2, 1, 6, 6)
print("padding", pad.shape, " causal", causal.shape, " combined", both.shape)

fig, axes = plt.subplots(1, 4, figsize=(12, 3))
pictures = [(np.broadcast_to(pad[1, 0], (6, 6)), "padding mask, sentence 2"),
            (causal[0, 0], "causal mask"),
            (both[1, 0], "both, sentence 2")]
for ax, (picture, title) in zip(axes, pictures):
    ax.imshow(picture, cmap="Greens", vmin=0, vmax=1)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("key position")
    ax.set_ylabel("query position")
x = mt.Tensor(rng.standard_normal((2, 1, 6, 8)))
_, w = F.scaled_dot_product_attention(x, x, x, mask=both, return_weights=True)
axes[3].imshow(w.numpy()[0, 0], cmap="viridis")
axes[3].set_title("causal weights, sentence 1", fontsize=10)
axes[3].set_xlabel("key position")
fig.tight_layout()
save_figure(fig, "06-masks.png", dpi=90)
plt.show()
assert (w.numpy()[0, 0][~causal[0, 0]] == 0).all()

# %% [markdown]
# ## 4. A query with nothing to attend to
#
# In the combined mask above, sentence 2's query rows at pad positions 3–5 can still see keys 0–2, so
# every row has something. But a mask can hide a whole row (e.g. a padding-only source, or a query
# mask). Then softmax$(-\infty, \dots, -\infty) = 0/0$. We *define* that row's weights as all zeros:
# the output is 0, nothing is NaN, and no gradient flows from that row into $q$, $k$ or $v$.

# %% [markdown] ja
# ## 4. 注目する先が 1 つもないクエリ
#
# 上の組み合わせたマスクでは、文 2 のパッドの位置 3–5 にあるクエリの行もキー 0–2 を見られるので、どの行にも注目できる先があります。しかしマスクが行全体を隠すこともあります（たとえばパディングだけの原文や、クエリマスク）。そのときは softmax$(-\infty, \dots, -\infty) = 0/0$ です。本書ではその行の重みをすべて 0 と*定義*します。出力は 0 になり、NaN はどこにも現れず、その行から $q$、$k$、$v$ へ勾配は流れません。

# %%
mask = np.ones((1, 1, 3, 4), bool)
mask[0, 0, 1] = False                                  # query 1 may attend to nothing
q1 = mt.Tensor(rng.standard_normal((1, 1, 3, 4)), requires_grad=True)
k1 = mt.Tensor(rng.standard_normal((1, 1, 4, 4)), requires_grad=True)
v1 = mt.Tensor(rng.standard_normal((1, 1, 4, 4)), requires_grad=True)
o1, w1 = F.scaled_dot_product_attention(q1, k1, v1, mask=mask, return_weights=True)
print("weights:\n", w1.numpy()[0, 0].round(3))
print("output row 1:", o1.numpy()[0, 0, 1])
only_row_1 = np.zeros(o1.shape)
only_row_1[0, 0, 1] = 1.0
o1.backward(only_row_1)
print("gradients reaching q, k, v from row 1:", [float(np.abs(t.grad).sum()) for t in (q1, k1, v1)])

# %% [markdown]
# ## 5. Gradient checks
#
# Central differences in float64 against our backward, with a random upstream gradient, for every
# kind of mask — and two deliberately broken backwards that the check must catch.

# %% [markdown] ja
# ## 5. 勾配チェック
#
# マスクの種類ごとに、ランダムな上流勾配を使い、float64 の中心差分を本書の逆伝播と比べます。さらに、わざと壊した逆伝播を 2 つ用意し、チェックがそれらを検出することを確かめます。

# %%
masks = {"none": None, "padding": F.padding_mask(np.array([[3, 4, 0, 0], [3, 4, 5, 6]]), 0),
         "causal": F.causal_mask(4), "fully masked row": np.tile(mask, (2, 1, 1, 1))}
for name, m in masks.items():
    t_q = 4 if name == "causal" else 3
    qc = mt.Tensor(rng.standard_normal((2, 2, t_q, 4)), requires_grad=True)
    kc = mt.Tensor(rng.standard_normal((2, 2, 4, 4)), requires_grad=True)
    vc = mt.Tensor(rng.standard_normal((2, 2, 4, 3)), requires_grad=True)
    assert mt.gradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, mask=m), [qc, kc, vc])
    print(f"gradcheck passed: mask = {name}")


class ForgotTheScale(F.ScaledDotProductAttention):
    def backward(self, g_out):
        g_q, g_k, g_v = super().backward(g_out)
        return g_q / self.scale, g_k, g_v          # gQ = gZ·K, without 1/√d_k


class ZeroKeyGradient(F.ScaledDotProductAttention):
    def backward(self, g_out):
        g_q, g_k, g_v = super().backward(g_out)
        return g_q, 0 * g_k, g_v


for broken in (ForgotTheScale, ZeroKeyGradient):
    try:
        mt.gradcheck(lambda q, k, v: broken()(q, k, v), [qc, kc, vc])
        raise AssertionError(f"{broken.__name__} passed the gradient check")
    except mt.GradcheckError as error:
        print(f"{broken.__name__}: caught — {str(error)[:90]}...")

# %% [markdown]
# ## 6. Before the Transformer: Bahdanau's additive score
#
# Bahdanau et al. (2015) scored a decoder state $s$ against each encoder state $h_j$ with a small
# network, $e_j = v^\top\tanh(W s + U h_j)$. With the projections done by linear layers, what is left
# pairs every query $q_t = W s_t$ (B, T, A) with every key $k_j = U h_j$ (B, S, A):
# $e_{tj} = v^\top\tanh(q_t + k_j)$, a (B, T, S, A) array on the way. `F.additive_score` does it as one
# Function. Its backward (Exercise 6.4) goes through $v^\top$, then tanh, and sums over the axis that
# broadcasting stretched: $g_q = \sum_j g_u$, $g_k = \sum_t g_u$. First, against the same formula
# written with engine ops:

# %% [markdown] ja
# ## 6. Transformer 以前：Bahdanau の加法的なスコア
#
# Bahdanau ら（2015）は、デコーダの状態 $s$ をエンコーダの各状態 $h_j$ と照らし合わせ、小さなネットワーク $e_j = v^\top\tanh(W s + U h_j)$ で点数を付けました。射影を線形層に任せると、残るのは、すべてのクエリ $q_t = W s_t$ をすべてのキー $k_j = U h_j$ と組にする部分 $e_{tj} = v^\top\tanh(q_t + k_j)$ です。クエリの形状は (B, T, A) です。キーの形状は (B, S, A) です。その途中に (B, T, S, A) の配列ができます。`F.additive_score` はこれを 1 つの Function として計算します。その逆伝播（演習 6.4）は $v^\top$ と tanh を順に通り、ブロードキャストが引き伸ばした軸について和を取ります。つまり $g_q = \sum_j g_u$、$g_k = \sum_t g_u$ です。まず、同じ式をエンジンの演算で書いたものと比べます。

# %%
queries = mt.Tensor(rng.standard_normal((2, 3, 6)), requires_grad=True)     # q_t = W s_t: B = 2, T = 3, A = 6
keys = mt.Tensor(rng.standard_normal((2, 5, 6)), requires_grad=True)        # k_j = U h_j: S = 5
v_a = mt.Tensor(rng.standard_normal(6), requires_grad=True)
upstream = rng.standard_normal((2, 3, 5))
scores = F.additive_score(queries, keys, v_a)                               # (B, T, S)
scores.backward(upstream)
fused = [t.grad.copy() for t in (queries, keys, v_a)]
for t in (queries, keys, v_a):
    t.grad = None
composed = (queries.reshape(2, 3, 1, 6) + keys.reshape(2, 1, 5, 6)).tanh() @ v_a   # every pair, then vᵀ
composed.backward(upstream)
np.testing.assert_allclose(scores.numpy(), composed.numpy(), atol=1e-12)
for name, a, t in zip(("q", "k", "v"), fused, (queries, keys, v_a)):
    print(f"g{name}: max |fused − composed| = {np.abs(a - t.grad).max():.1e}")
    np.testing.assert_allclose(a, t.grad, atol=1e-12)

# %% [markdown]
# The modules add the projections, the mask, the softmax and the weighted sum: `nn.AdditiveAttention`
# (Bahdanau), and Luong et al.'s (2015) `nn.DotAttention` ($q^\top h_j$) and `nn.GeneralAttention`
# ($q^\top W_a h_j$). Each is gradchecked with a padding mask, and a backward without tanh's
# derivative must fail.

# %% [markdown] ja
# モジュールは、射影、マスク、ソフトマックス、重み付き和を加えます。`nn.AdditiveAttention`（Bahdanau）と、Luong ら（2015）の `nn.DotAttention`（$q^\top h_j$）と `nn.GeneralAttention`（$q^\top W_a h_j$）です。どれもパディングマスク付きで勾配チェックします。tanh の微分を落とした逆伝播は、このチェックで失敗しなければなりません。

# %%
source_mask = np.array([[True, True, True, False, False], [True] * 5])      # sentence 1: 3 tokens and 2 pads
for attention in (mt.nn.AdditiveAttention(6, 6, 6), mt.nn.DotAttention(), mt.nn.GeneralAttention(6, 6)):
    attention.to(np.float64)
    decoder_states = mt.Tensor(rng.standard_normal((2, 3, 6)), requires_grad=True)
    annotations = mt.Tensor(rng.standard_normal((2, 5, 6)), requires_grad=True)
    assert mt.gradcheck(lambda s, h, *params: attention(s, h, source_mask)[0],
                        [decoder_states, annotations, *attention.parameters()])
    context, alpha = attention(decoder_states, annotations, source_mask)
    assert (alpha.numpy()[0, :, 3:] == 0).all()
    print(f"gradcheck passed: {type(attention).__name__}; weights at the pads: {alpha.numpy()[0, :, 3:].max()}")


class NoTanhDerivative(F.AdditiveScore):
    def backward(self, g_scores):
        hidden, v = self.saved_arrays
        g_pre = g_scores[..., None] * v                   # the (1 − a²) of tanh forgotten
        return g_pre.sum(axis=2), g_pre.sum(axis=1), hidden.reshape(-1, v.shape[0]).T @ g_scores.reshape(-1)


try:
    mt.gradcheck(lambda q, k, v: NoTanhDerivative()(q, k, v), [queries, keys, v_a])
    raise AssertionError("NoTanhDerivative passed the gradient check")
except mt.GradcheckError as error:
    print(f"NoTanhDerivative: caught — {str(error)[:90]}...")

# %% [markdown]
# Last, the whole model of those papers, on our engine: `nn.Seq2Seq`, a bidirectional LSTM encoder and
# an LSTM decoder that attends with the additive score. A tiny one learns to reverse sentences in a
# second or two. Its attention weights then show what Bahdanau et al. saw in translation: a soft
# alignment. Reversing a sentence, output word $i$ looks at source word $S + 1 - i$, so the weights
# form the anti-diagonal.

# %% [markdown] ja
# 最後に、これらの論文のモデル全体を本書のエンジンで動かします。`nn.Seq2Seq` は、双方向 LSTM のエンコーダと、加法的なスコアで注目する LSTM のデコーダからなります。小さなモデルでも 1、2 秒で文を逆順にすることを学習します。そのときのアテンションの重みには、Bahdanau らが翻訳で見たもの、つまりソフトなアライメントが現れます。文を逆順にするとき、出力の $i$ 番目の単語は原文の $S + 1 - i$ 番目の単語を見るので、重みは反対角線をなします。

# %%
from minitransformer import optim   # noqa: E402
from minitransformer.decode import greedy_decode   # noqa: E402

PAD, BOS, EOS = 0, 1, 2


def reversal_batch(n=32):
    lengths = rng.integers(2, 7, n)
    src, tgt_in, tgt_out = (np.full((n, lengths.max() + extra), PAD) for extra in (0, 1, 1))
    for row, length in enumerate(lengths):
        words = rng.integers(3, 12, length)
        src[row, :length] = words
        tgt_in[row, :length + 1] = [BOS, *words[::-1]]
        tgt_out[row, :length + 1] = [*words[::-1], EOS]
    return src, tgt_in, tgt_out


seq2seq = mt.nn.Seq2Seq(mt.nn.Seq2SeqConfig(src_vocab_size=12, tgt_vocab_size=12, d_model=32, n_layers=1,
                                            dropout=0.0))
optimizer = optim.Adam(seq2seq.parameters(), lr=1e-2)
losses = []
for step in range(100 if QUICK else 300):
    loss = seq2seq.loss(*reversal_batch())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
print(f"loss: {losses[0]:.2f} at the start, {np.mean(losses[-10:]):.3f} at the end")
assert np.mean(losses[-10:]) < 0.5 * losses[0]

# %%
sentence = np.array([[3, 4, 5, 6, 7, 8]])
output = greedy_decode(seq2seq, sentence, BOS, EOS)[0]
print("source", sentence[0].tolist(), "→ output", output)
alpha = seq2seq.eval().attention_weights(sentence, np.array([[BOS, *output]]))[0]      # (T, S)
fig, ax = plt.subplots(figsize=(4, 3.5))
ax.imshow(alpha, cmap="viridis", vmin=0, vmax=1)
ax.set_xticks(range(6), sentence[0])
ax.set_yticks(range(len(output) + 1), output + ["eos"])
ax.set_xlabel("source word")
ax.set_ylabel("output word")
ax.set_title("additive attention, reversal task", fontsize=10)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Exercises
#
# {{exercises}}

# %% [markdown] ja
# ## 演習
#
# {{exercises}}
