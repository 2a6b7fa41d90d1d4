# %% [markdown]
# # Chapter 4 — Softmax and cross-entropy (§3.2.1, §5.4)
#
# Softmax turns a row of scores into a probability distribution. The Transformer uses it twice:
# inside every attention head, on the scaled scores $QK^\top/\sqrt{d_k}$ (eq. 1), and at the very
# end, on the logits over the target vocabulary (§3.4). Cross-entropy is the training loss on those
# logits, with label smoothing $\epsilon_{ls} = 0.1$ (§5.4).
#
# In this notebook we
# 1. see why softmax must subtract the row maximum,
# 2. watch the "temperature" of a softmax — dividing the scores by a larger or smaller number — which
#    is exactly what $\sqrt{d_k}$ does in chapter 6,
# 3. derive the backward of softmax and of the fused cross-entropy and check them,
# 4. look at label smoothing: why it *raises* perplexity and still helps BLEU.

# %% [markdown] ja
# # 第 4 章 — ソフトマックスと交差エントロピー（§3.2.1、§5.4）
#
# ソフトマックスは、スコアの 1 行を確率分布に変えます。Transformer はこれを 2 か所で使います。すべてのアテンションのヘッドの内部でスケールされたスコア $QK^\top/\sqrt{d_k}$ に対して（式 (1)）、そして一番最後に目的言語の語彙上のロジットに対して（§3.4）です。交差エントロピーはそのロジットに対する学習の損失で、ラベルスムージング $\epsilon_{ls} = 0.1$ を伴います（§5.4）。
#
# このノートブックでは次のことを行います。
# 1. ソフトマックスが行の最大値を引かなければならない理由を見る
# 2. ソフトマックスの「温度」、つまりスコアをより大きな数やより小さな数で割ることの効果を観察する。これは第 6 章で $\sqrt{d_k}$ が行うことそのものです
# 3. ソフトマックスと融合した交差エントロピーの逆伝播を導き、チェックする
# 4. ラベルスムージングを調べる。なぜそれがパープレキシティを*上げ*、それでも BLEU を改善するのか

# %%
import numpy as np

import minitransformer as mt
import minitransformer.functional as F

from minitransformer.notebook_support import QUICK
rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. A stable softmax
#
# $\mathrm{softmax}(x)_i = e^{x_i} / \sum_j e^{x_j}$. Written literally it overflows: $e^{1000}$ is
# infinite in float64 and $e^{89}$ already is in float32. But adding a constant $c$ to every score
# changes nothing, because $e^{x_i - c}/\sum_j e^{x_j - c} = e^{x_i}/\sum_j e^{x_j}$. With
# $c = \max_j x_j$ every exponent is $\le 0$ (no overflow) and the largest term is exactly $1$ (the sum
# cannot underflow to 0).

# %% [markdown] ja
# ## 1. 安定なソフトマックス
#
# $\mathrm{softmax}(x)_i = e^{x_i} / \sum_j e^{x_j}$ です。文字どおりに書くとオーバーフローします。$e^{1000}$ は float64 で無限大になり、float32 では $e^{89}$ ですでにそうなります。しかし、すべてのスコアに定数 $c$ を足しても何も変わりません。$e^{x_i - c}/\sum_j e^{x_j - c} = e^{x_i}/\sum_j e^{x_j}$ だからです。$c = \max_j x_j$ とすると、すべての指数が $\le 0$ になり（オーバーフローしない）、最大の項がちょうど $1$ になります（和がアンダーフローして 0 になることはない）。

# %%
scores = np.array([[1e4, -1e4, 0.0]], dtype=np.float32)
with np.errstate(over="ignore", invalid="ignore"):
    naive = np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)
print("naive:  ", naive)
print("stable: ", F.softmax(mt.Tensor(scores)).numpy())
assert np.isnan(naive).any() and np.isfinite(F.softmax(mt.Tensor(scores)).numpy()).all()

# %% [markdown]
# ## 2. Temperature: dividing the scores flattens or sharpens the distribution
#
# Divide the same scores by $T$ before the softmax. A large $T$ pulls all scores towards 0 and the
# distribution towards uniform; a small $T$ stretches the gaps and the largest score takes almost
# everything. A spiked softmax is a problem for learning: its Jacobian $\mathrm{diag}(y) - yy^\top$ is
# nearly zero when one $y_i \approx 1$, so almost no gradient flows back (§3.2.1 makes this argument
# for unscaled dot products, in a footnote).

# %% [markdown] ja
# ## 2. 温度：スコアを割ると分布が平らになったり鋭くなったりする
#
# ソフトマックスの前に、同じスコアを $T$ で割ってみます。$T$ が大きいとすべてのスコアが 0 に引き寄せられ、分布は一様分布に近づきます。$T$ が小さいと差が引き伸ばされ、最大のスコアがほぼすべてを持っていきます。尖ったソフトマックスは学習にとって問題です。1 つの $y_i \approx 1$ のとき、そのヤコビ行列 $\mathrm{diag}(y) - yy^\top$ はほぼゼロになり、勾配がほとんど逆向きに流れなくなるからです（§3.2.1 はスケールしない内積についてこの議論を脚注で述べています）。

# %%
import matplotlib.pyplot as plt

scores = np.array([2.0, 1.0, 0.5, -0.5, -1.0, 3.0, 0.0, 1.5])
temperatures = [0.25, 1.0, 4.0]
fig, axes = plt.subplots(1, 3, figsize=(10, 2.6), sharey=True)
for ax, t in zip(axes, temperatures):
    p = F.softmax(mt.Tensor(scores / t)).numpy()
    ax.bar(range(len(scores)), p, color="tab:blue")
    ax.set_title(f"softmax(scores / {t:g})")
    ax.set_xlabel("position")
axes[0].set_ylabel("probability")
fig.tight_layout()
plt.show()

# %% [markdown]
# Why does this matter for attention? If the entries of $q$ and $k$ are independent with mean 0
# and variance 1, their dot product $q\cdot k = \sum_{i=1}^{d_k} q_i k_i$ has mean 0 and variance
# $d_k$ (§3.2.1). With $d_k = 64$ the scores are 8 times larger than with $d_k = 1$: the softmax is run
# at a very low temperature and spikes. Dividing by $\sqrt{d_k}$ brings the variance back to 1.

# %% [markdown] ja
# これがアテンションにとってなぜ重要なのでしょうか。$q$ と $k$ の成分が平均 0、分散 1 の互いに独立な変数なら、その内積 $q\cdot k = \sum_{i=1}^{d_k} q_i k_i$ は平均 0、分散 $d_k$ になります（§3.2.1）。$d_k = 64$ では、スコアは $d_k = 1$ のときの 8 倍の大きさになります。ソフトマックスは非常に低い温度で動くことになり、鋭く尖ります。$\sqrt{d_k}$ で割ると、分散は 1 に戻ります。

# %%
for d_k in [4, 64, 512]:
    q = rng.standard_normal((2000, d_k))
    k = rng.standard_normal((2000, 10, d_k))
    dots = np.einsum("nd,nkd->nk", q, k)             # 2000 queries, 10 keys each
    raw = F.softmax(mt.Tensor(dots)).numpy().max(axis=1).mean()
    scaled = F.softmax(mt.Tensor(dots / np.sqrt(d_k))).numpy().max(axis=1).mean()
    print(f"d_k={d_k:4d}  var(q·k)={dots.var():7.1f}   mean largest weight: "
          f"unscaled {raw:.3f}, scaled by 1/sqrt(d_k) {scaled:.3f}")

# %% [markdown]
# ## 3. The softmax backward
#
# With $y = \mathrm{softmax}(x)$, $\partial y_i / \partial x_k = y_i(\delta_{ik} - y_k)$: the Jacobian is
# $J = \mathrm{diag}(y) - y y^\top$. Backward needs only the vector–Jacobian product
#
# $$g_x = J^\top g_y = y \odot g_y - y\,(y^\top g_y) = y \odot \bigl(g_y - \textstyle\sum_i g_{y,i} y_i\bigr),$$
#
# one elementwise product and one row sum: $O(V)$ instead of the $O(V^2)$ Jacobian. Let us compare
# it against the explicit Jacobian.

# %% [markdown] ja
# ## 3. ソフトマックスの逆伝播
#
# $y = \mathrm{softmax}(x)$ とすると $\partial y_i / \partial x_k = y_i(\delta_{ik} - y_k)$ で、ヤコビ行列は $J = \mathrm{diag}(y) - y y^\top$ です。逆伝播に必要なのは、次のベクトル・ヤコビ積だけです。
#
# $$g_x = J^\top g_y = y \odot g_y - y\,(y^\top g_y) = y \odot \bigl(g_y - \textstyle\sum_i g_{y,i} y_i\bigr),$$
#
# 要素ごとの積が 1 回と行ごとの和が 1 回なので、$O(V^2)$ のヤコビ行列ではなく $O(V)$ で済みます。明示的なヤコビ行列と比べてみましょう。

# %%
x = rng.standard_normal(6)
gy = rng.standard_normal(6)
y = F.softmax(mt.Tensor(x)).numpy()
jacobian = np.diag(y) - np.outer(y, y)
x_t = mt.Tensor(x, requires_grad=True)
F.softmax(x_t).backward(gy)
print("explicit J^T g_y:", np.round(jacobian.T @ gy, 6))
print("backward():      ", np.round(x_t.grad, 6))
np.testing.assert_allclose(x_t.grad, jacobian.T @ gy, rtol=1e-12)

# %% [markdown]
# ## 4. Cross-entropy, fused
#
# For logits $x$ and a target distribution $q$, the loss is $\ell = -\sum_k q_k \log p_k$ with
# $\log p_k = x_k - \log\sum_j e^{x_j}$. Differentiate:
#
# $$\frac{\partial \ell}{\partial x_k} = -q_k + \Bigl(\sum_j q_j\Bigr) p_k = p_k - q_k ,$$
#
# because $q$ sums to 1. Averaged over $n$ counted tokens, the gradient is $(p - q)/n$ and zero on
# padding rows. Composed from primitive ops the same loss would store the exponentials, the sums,
# the logs and the products, and run a backward for each. The fused Function makes one array of the
# logits' size, the exponentials $e^{x - m}$ ($m$ the row maximum), and otherwise only numbers per row:
# $\log Z = m + \log\sum_j e^{x_j - m}$ and $-\log p_t = \log Z - x_t$. It stores the exponentials and
# their row sums; its backward divides the one by the other, which is the softmax, and makes a few
# in-place updates. `benchmarks/speed/fused_vs_composed.py` measures the difference.

# %% [markdown] ja
# ## 4. 融合した交差エントロピー
#
# ロジット $x$ と目標分布 $q$ について、損失は $\ell = -\sum_k q_k \log p_k$、ただし $\log p_k = x_k - \log\sum_j e^{x_j}$ です。$q$ の和が 1 なので、微分は次のようになります。
#
# $$\frac{\partial \ell}{\partial x_k} = -q_k + \Bigl(\sum_j q_j\Bigr) p_k = p_k - q_k ,$$
#
# 損失に数える $n$ 個のトークンについて平均をとると、勾配は $(p - q)/n$ で、パディングの行ではゼロです。基本演算を組み合わせて同じ損失を作ると、指数、和、対数、積を保存し、それぞれについて backward を実行することになります。融合した Function がロジットと同じ大きさで作る配列は、指数 $e^{x - m}$（$m$ は行の最大値）の 1 つだけで、ほかは行ごとの数だけです：$\log Z = m + \log\sum_j e^{x_j - m}$、$-\log p_t = \log Z - x_t$。保存するのは指数とその行ごとの和です。backward は前者を後者で割ってソフトマックスを得て、いくつかの値をインプレースで更新します。`benchmarks/speed/fused_vs_composed.py` がその差を測ります。

# %%
logits = mt.Tensor(rng.standard_normal((5, 7)), requires_grad=True)
targets = np.array([3, 0, 6, 2, 0])              # id 0 is padding
loss = F.cross_entropy(logits, targets, ignore_index=0)
loss.backward()

p = np.exp(logits.data) / np.exp(logits.data).sum(axis=1, keepdims=True)
q = np.eye(7)[targets]
counted = targets != 0
expected = (p - q) * counted[:, None] / counted.sum()
np.testing.assert_allclose(logits.grad, expected, rtol=1e-12)
print("loss", loss.item(), " gradient rows on padding are zero:", np.abs(logits.grad[~counted]).max())

# %% [markdown]
# ## 5. Label smoothing (§5.4)
#
# The paper trains with $\epsilon_{ls} = 0.1$: instead of the one-hot target, the model is asked to
# predict a *smoothed* distribution. Ours puts $1-\epsilon$ on the correct token and spreads
# $\epsilon$ evenly over the other allowed tokens — every token except the padding id, which is
# never a correct output:
#
# $$q_k = (1-\epsilon)\,[k = t] + \frac{\epsilon}{V-1}\,[k \ne \text{pad}] .$$
#
# (PyTorch's `label_smoothing` spreads $\epsilon$ over all $V$ classes, pad included; without an
# `ignore_index` we do the same.) A hand computation on $V = 4$, pad $= 0$, target $3$:

# %% [markdown] ja
# ## 5. ラベルスムージング（§5.4）
#
# 論文は $\epsilon_{ls} = 0.1$ で学習しています。モデルが予測するのは one-hot の目標ではなく、*平滑化した*分布です。本書の実装では、正しいトークンに $1-\epsilon$ を置き、残りの $\epsilon$ はほかの許されたトークンで均等に分けます。許されたトークンとは、パディングの id を除くすべてのトークンです。パディングが正しい出力になることは決してないからです。
#
# $$q_k = (1-\epsilon)\,[k = t] + \frac{\epsilon}{V-1}\,[k \ne \text{pad}] .$$
#
# PyTorch の `label_smoothing` は、パディングを含む $V$ 個のクラスすべてに $\epsilon$ を配ります。`ignore_index` がない場合は、本書も同じようにします。$V = 4$、パディング $= 0$、ターゲット $3$ で手計算してみましょう。

# %%
eps, V = 0.1, 4
x = np.array([0.0, 1.0, 2.0, 3.0])
log_p = x - np.log(np.exp(x).sum())
q = np.array([0.0, eps / 3, eps / 3, 1 - eps + eps / 3])
by_hand = -(q * log_p).sum()
ours = F.cross_entropy(mt.Tensor(x[None]), np.array([3]), label_smoothing=eps, ignore_index=0).item()
print(f"by hand {by_hand:.6f}   F.cross_entropy {ours:.6f}")
assert abs(by_hand - ours) < 1e-12

# %% [markdown]
# ### Why smoothing hurts perplexity …
#
# Cross-entropy against $q$ is smallest when the model predicts $p = q$, and that minimum is the
# entropy $H(q) > 0$, not 0. Perplexity is measured against the *true* next token, so the best the
# model can reach is $-\log(1 - \epsilon + \epsilon/(V-1))$ per token: it has been taught to keep some
# probability back. For the paper's vocabulary of about 37,000 tokens:

# %% [markdown] ja
# ### 平滑化がパープレキシティを悪化させる理由
#
# $q$ に対する交差エントロピーが最小になるのは、モデルが $p = q$ と予測したときです。その最小値は 0 ではなく、エントロピー $H(q) > 0$ です。パープレキシティは*真の*次のトークンに対して測るので、モデルが到達できる最良の値はトークンあたり $-\log(1 - \epsilon + \epsilon/(V-1))$ です。モデルは、確率の一部を正解以外に残しておくように学習しているのです。論文の語彙、およそ 37,000 トークンについて計算すると次のようになります。

# %%
def smoothed_floor(eps, vocab):
    top = 1 - eps + eps / (vocab - 1)
    rest = eps / (vocab - 1)
    entropy = -(top * np.log(top) + (vocab - 2) * rest * np.log(rest))
    return entropy, -np.log(top)


for eps in [0.0, 0.1, 0.2]:
    entropy, nll = smoothed_floor(eps, 37000) if eps else (0.0, 0.0)
    print(f"eps={eps:.1f}: smoothed loss floor H(q) = {entropy:.3f} nats; best perplexity on the true "
          f"token = {np.exp(nll):.3f}")

# %% [markdown]
# ### … and still improves accuracy and BLEU
#
# §5.4: smoothing "hurts perplexity, as the model learns to be more unsure, but improves accuracy and
# BLEU score" (Table 3, rows (D): $\epsilon_{ls} = 0$ gives a lower perplexity but a lower BLEU than
# 0.1). With a one-hot target the loss keeps falling as the correct logit runs away from the others,
# so the model is rewarded for unbounded confidence — also on the noisy or ambiguous pairs of a real
# corpus. With smoothing the optimum is finite: the gap between the target logit and any other is
# $\log\bigl((1-\epsilon+\epsilon/V) / (\epsilon/V)\bigr)$ (smoothing over all $V$ classes, no
# padding here). Let us watch gradient descent on a single row of logits.

# %% [markdown] ja
# ### それでも正解率と BLEU が向上する理由
#
# §5.4 によれば、平滑化は「モデルがより自信を持たないように学習するのでパープレキシティを悪化させるが、正解率と BLEU スコアを向上させる」ものです。論文の表 3 の (D) の行でも、$\epsilon_{ls} = 0$ は 0.1 よりパープレキシティが低いものの、BLEU も低くなっています。one-hot の目標では、正しいロジットがほかのロジットから離れていくほど損失は下がり続けるので、モデルは際限のない自信に対して報酬を受けます。それは実際のコーパスのノイズを含む文対や曖昧な文対でも同じです。平滑化すると最適値は有限になります。ターゲットのロジットとほかのロジットとの差は $\log\bigl((1-\epsilon+\epsilon/V) / (\epsilon/V)\bigr)$ です（$V$ 個のクラスすべてに平滑化し、ここではパディングはありません）。1 行のロジットに対する勾配降下法を観察してみましょう。

# %%
def train_one_row(eps, steps, vocab=10, lr=1.0):
    row = mt.Tensor(np.zeros((1, vocab)), requires_grad=True)
    for _ in range(steps):
        row.grad = None
        F.cross_entropy(row, np.array([1]), label_smoothing=eps).backward()
        row.data -= lr * row.grad
    return row.data[0, 1] - row.data[0, 2]          # target logit minus a wrong one


steps = 300 if QUICK else 2000
vocab = 10
limit = np.log((1 - 0.1 + 0.1 / vocab) / (0.1 / vocab))
for n in [steps // 10, steps]:
    print(f"after {n:5d} steps: gap without smoothing {train_one_row(0.0, n):6.2f}, "
          f"with eps=0.1 {train_one_row(0.1, n):6.3f} (optimum {limit:.3f})")
assert abs(train_one_row(0.1, steps) - limit) < 1e-2          # converges to the finite optimum
assert train_one_row(0.0, steps) > train_one_row(0.0, steps // 10) + 1.0   # keeps growing

# %% [markdown]
# A model that is a little unsure everywhere keeps alternatives alive for beam search and does not
# over-commit on training noise; that is the usual reading of why BLEU improves while perplexity
# gets worse.
#
# ## 6. Gradient checks
#
# Every function of this chapter, in float64 with a random upstream gradient (`mt.gradcheck`).

# %% [markdown] ja
# どの予測でも自信を少し控えめに保つモデルは、ビームサーチのために別の候補を残しておけます。学習データのノイズに過剰に合わせることもありません。パープレキシティが悪化するのに BLEU が向上する理由は、ふつうこのように解釈されています。
#
# ## 6. 勾配チェック
#
# この章のすべての関数を、float64 で、ランダムな上流勾配を使ってチェックします（`mt.gradcheck`）。

# %%
def leaf(shape):
    return mt.Tensor(rng.standard_normal(shape), requires_grad=True)


for axis in (0, 1, 2):
    assert mt.gradcheck(lambda t: F.softmax(t, axis=axis), [leaf((2, 3, 4))])
assert mt.gradcheck(F.log_softmax, [leaf((3, 5))])
targets = np.array([[1, 2, 0], [4, 0, 3]])
for eps in (0.0, 0.1):
    for pad in (None, 0):
        assert mt.gradcheck(lambda t: F.cross_entropy(t, targets, eps, pad), [leaf((2, 3, 5))])
print("all gradient checks passed")

# %% [markdown]
# ## Exercises
#
# {{exercises}}

# %% [markdown] ja
# ## 演習
#
# {{exercises}}
