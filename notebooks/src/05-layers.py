# %% [markdown]
# # Chapter 5 — Layers: LayerNorm, Linear, the feed-forward network, Modules (§3.1, §3.3)
#
# Every Transformer sub-layer is wrapped as $\mathrm{LayerNorm}(x + \mathrm{Sublayer}(x))$ (§3.1),
# and one of the two sub-layers of each layer is the position-wise feed-forward network
# $\mathrm{FFN}(x) = \max(0, xW_1 + b_1)W_2 + b_2$ (§3.3, eq. 2). This notebook
#
# 1. derives the layer-norm backward step by step and checks each step,
# 2. shows the FFN as two convolutions with kernel size 1, numerically,
# 3. looks at Xavier initialisation, the Module system, dropout and the embedding's backward,
# 4. trains a small MLP built from these layers on 2-D spirals.

# %% [markdown] ja
# # 第 5 章 — 層：LayerNorm、Linear、フィードフォワードネットワーク、Module（§3.1、§3.3）
#
# Transformer のサブレイヤはどれも $\mathrm{LayerNorm}(x + \mathrm{Sublayer}(x))$ の形で包まれています（§3.1）。また、各層の 2 つのサブレイヤのうち 1 つは位置ごとのフィードフォワードネットワーク $\mathrm{FFN}(x) = \max(0, xW_1 + b_1)W_2 + b_2$ です（§3.3、式 (2)）。このノートブックでは次のことを行います。
#
# 1. 層正規化の逆伝播を一歩ずつ導出し、各ステップを確かめます。
# 2. FFN がカーネルサイズ 1 の 2 つの畳み込みであることを数値で示します。
# 3. Xavier 初期化、Module の仕組み、ドロップアウト、埋め込みの逆伝播を見ます。
# 4. これらの層で作った小さな MLP を、2 次元の渦巻きで学習させます。

# %%
import numpy as np

import minitransformer as mt
import minitransformer.functional as F
import minitransformer.nn as nn

from minitransformer.notebook_support import QUICK
rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. Layer normalization
#
# For one row $x \in \mathbb{R}^D$: $\mu = \frac1D\sum_i x_i$, $\sigma^2 = \frac1D\sum_i (x_i-\mu)^2$
# (the biased variance), $\hat x = (x-\mu)/\sqrt{\sigma^2+\epsilon}$, and $y = \gamma\odot\hat x + \beta$.
# Each row, each token, is normalized on its own — unlike batch norm, nothing depends on the other
# sentences in the batch or on the padding.

# %% [markdown] ja
# ## 1. 層正規化
#
# 1 つの行 $x \in \mathbb{R}^D$ について、$\mu = \frac1D\sum_i x_i$、$\sigma^2 = \frac1D\sum_i (x_i-\mu)^2$（偏りのある分散）、$\hat x = (x-\mu)/\sqrt{\sigma^2+\epsilon}$、そして $y = \gamma\odot\hat x + \beta$ です。各行、つまり各トークンは、それぞれ単独で正規化されます。バッチ正規化とは違い、バッチ内のほかの文やパディングの影響を一切受けません。

# %%
x = mt.Tensor(5.0 + 3.0 * rng.standard_normal((4, 16)))
x_hat = F.layer_norm(x, eps=0.0).numpy()
print("row means    ", np.round(x_hat.mean(axis=1), 12))
print("row variances", np.round(x_hat.var(axis=1), 12))
assert np.allclose(x_hat.mean(axis=1), 0, atol=1e-12) and np.allclose(x_hat.var(axis=1), 1, rtol=1e-12)

# %% [markdown]
# ### The backward, step by step
#
# Let $g = g_y \odot \gamma$ be the gradient arriving at $\hat x$ and write $s = 1/\sigma$ with
# $\sigma = \sqrt{\sigma^2 + \epsilon}$. Then $\hat x_i = (x_i - \mu)\,s$ depends on $x_k$ three ways:
#
# * directly: $\partial \hat x_i/\partial x_k \ni s\,\delta_{ik}$;
# * through the mean: $\partial \mu/\partial x_k = 1/D$, giving $-s/D$;
# * through the scale: $\partial s/\partial x_k = -s^3 (x_k-\mu)/D = -s^2 \hat x_k / D$,
#   giving $(x_i-\mu)\cdot(-s^2\hat x_k/D) = -s\,\hat x_i \hat x_k / D$.
#
# (The mean's effect on $\sigma$ vanishes because $\sum_i (x_i-\mu) = 0$.) Contract with $g$:
#
# $$g_{x,k} = \sum_i g_i \frac{\partial \hat x_i}{\partial x_k}
#            = s\Bigl(g_k - \frac1D\sum_i g_i - \hat x_k\,\frac1D\sum_i g_i \hat x_i\Bigr)
#            = \frac1\sigma\bigl(g - \mathrm{mean}(g) - \hat x\odot\mathrm{mean}(g\odot\hat x)\bigr)_k .$$
#
# For the parameters, $g_\gamma = \sum g_y\odot\hat x$ and $g_\beta = \sum g_y$, summed over every
# row (token). We check the three terms with autograd itself: $x$ enters the composed version below
# three times (itself, the mean, the scale), and letting autograd follow one entry at a time, while the
# other two see $x$ as a constant, gives each term; the three add up to the whole gradient.

# %% [markdown] ja
# ### 逆伝播を一歩ずつ
#
# $\hat x$ に届く勾配を $g = g_y \odot \gamma$ とし、$\sigma = \sqrt{\sigma^2 + \epsilon}$ として $s = 1/\sigma$ と書きます。すると $\hat x_i = (x_i - \mu)\,s$ は、3 通りの仕方で $x_k$ に依存します。
#
# * 直接：$\partial \hat x_i/\partial x_k \ni s\,\delta_{ik}$
# * 平均を通して：$\partial \mu/\partial x_k = 1/D$ より $-s/D$
# * スケールを通して：$\partial s/\partial x_k = -s^3 (x_k-\mu)/D = -s^2 \hat x_k / D$ より $(x_i-\mu)\cdot(-s^2\hat x_k/D) = -s\,\hat x_i \hat x_k / D$
#
# （平均が $\sigma$ に及ぼす影響は、$\sum_i (x_i-\mu) = 0$ なので消えます。）$g$ を掛けて $i$ について和を取ると、次のようになります。
#
# $$g_{x,k} = \sum_i g_i \frac{\partial \hat x_i}{\partial x_k}
#            = s\Bigl(g_k - \frac1D\sum_i g_i - \hat x_k\,\frac1D\sum_i g_i \hat x_i\Bigr)
#            = \frac1\sigma\bigl(g - \mathrm{mean}(g) - \hat x\odot\mathrm{mean}(g\odot\hat x)\bigr)_k .$$
#
# パラメータについては $g_\gamma = \sum g_y\odot\hat x$、$g_\beta = \sum g_y$ で、すべての行（トークン）について和を取ります。3 つの項を自動微分そのもので確かめましょう。下の組み合わせ版には $x$ が 3 回（そのまま、平均、スケール）入っています。一度に 1 か所だけを自動微分にたどらせ、残りの 2 か所には $x$ を定数として見せると、それぞれの項が得られ、3 つを足すと勾配全体になります。

# %%
def composed_layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    centered = x - mean
    variance = (centered * centered).mean(axis=-1, keepdims=True)
    return centered / (variance + eps).sqrt() * weight + bias


data, w, b = rng.standard_normal((3, 8)), rng.standard_normal(8), rng.standard_normal(8)
gy = rng.standard_normal((3, 8))
leaves = [mt.Tensor(a.copy(), requires_grad=True) for a in (data, w, b)]
composed_layer_norm(*leaves).backward(gy)

# the three terms, one path at a time: x enters the composed layer norm three times (itself, the mean, the
# scale); in each run autograd follows one of them and the other two see x as a constant
def one_path(path):
    x, constant = mt.Tensor(data.copy(), requires_grad=True), mt.Tensor(data)
    numerator = x if path == "direct" else constant
    mean = (x if path == "mean" else constant).mean(axis=-1, keepdims=True)
    scaled = x if path == "scale" else constant
    centered = scaled - scaled.mean(axis=-1, keepdims=True)
    sigma = ((centered * centered).mean(axis=-1, keepdims=True) + 1e-5).sqrt()
    ((numerator - mean) / sigma * mt.Tensor(w) + mt.Tensor(b)).backward(gy)
    return x.grad


direct, through_mean, through_scale = (one_path(path) for path in ("direct", "mean", "scale"))
np.testing.assert_allclose(direct + through_mean + through_scale, leaves[0].grad, rtol=1e-10)

# and the fused Function computes the same
fused = [mt.Tensor(a.copy(), requires_grad=True) for a in (data, w, b)]
F.layer_norm(*fused).backward(gy)
for a, c in zip(fused, leaves):
    np.testing.assert_allclose(a.grad, c.grad, rtol=1e-10)
print("size of each term:", [float(np.abs(t).mean().round(3)) for t in (direct, through_mean, through_scale)])

# %% [markdown]
# Now each term against its own formula. Contracted with $g$, the three Jacobian pieces $s\,\delta_{ik}$,
# $-s/D$ and $-s\,\hat x_i\hat x_k/D$ give $s\,g$, $-s\,\mathrm{mean}(g)$ and
# $-s\,\hat x\odot\mathrm{mean}(g\odot\hat x)$. We compute the three from the formulas alone and compare each
# with the path that autograd followed above; then, for one row, we write the Jacobian out as a $D\times D$
# matrix, $J = s\,(I - \tfrac1D\mathbf{1}\mathbf{1}^\top - \tfrac1D\hat x\hat x^\top)$, and multiply.

# %% [markdown] ja
# 次に、各項をそれぞれの式と比べます。ヤコビ行列の 3 つの部分 $s\,\delta_{ik}$、$-s/D$、$-s\,\hat x_i\hat x_k/D$ を $g$ と縮約すると、$s\,g$、$-s\,\mathrm{mean}(g)$、$-s\,\hat x\odot\mathrm{mean}(g\odot\hat x)$ になります。この 3 つを式だけから計算し、上で自動微分がたどった経路とそれぞれ比べます。続いて 1 行について、ヤコビ行列を $D\times D$ の行列 $J = s\,(I - \tfrac1D\mathbf{1}\mathbf{1}^\top - \tfrac1D\hat x\hat x^\top)$ として書き出し、掛け算します。

# %%
D = data.shape[-1]
s = 1 / np.sqrt(data.var(axis=-1, keepdims=True) + 1e-5)                 # 1/σ, one per row
x_hat_rows = (data - data.mean(axis=-1, keepdims=True)) * s
g = gy * w                                                               # the gradient that reaches x̂
term_direct = s * g                                                      # s·δ_ik
term_mean = np.broadcast_to(-s * g.sum(axis=-1, keepdims=True) / D, g.shape)   # −s/D, the same for every k
term_scale = -s * x_hat_rows * (g * x_hat_rows).sum(axis=-1, keepdims=True) / D   # −s·x̂_i x̂_k/D
for label, formula, path in [("direct", term_direct, direct), ("mean", term_mean, through_mean),
                             ("scale", term_scale, through_scale)]:
    np.testing.assert_allclose(formula, path, rtol=1e-9, atol=1e-12)
    print(f"{label:6s} formula = autograd's path: largest difference {np.abs(formula - path).max():.1e}")
np.testing.assert_allclose(term_direct + term_mean + term_scale, fused[0].grad, rtol=1e-9)

row = 0                                                                  # one row's Jacobian, written out
J = s[row] * (np.eye(D) - np.ones((D, D)) / D - np.outer(x_hat_rows[row], x_hat_rows[row]) / D)
np.testing.assert_allclose(g[row] @ J, fused[0].grad[row], rtol=1e-9)
print("g @ J for row 0 equals the engine's gradient")

# %% [markdown]
# ### A known variant
#
# A popular annotated implementation of the paper normalizes with the *unbiased* standard deviation
# (dividing by $D-1$) and adds $\epsilon$ outside the square root: $(x-\mu)/(\mathrm{std}+\epsilon)$.
# It is a different function. The difference is a factor $\sqrt{(D-1)/D}$, about $1/(2D)$ relative:
# negligible at $d_{model} = 512$, visible for tiny $D$, and it matters when loading weights trained
# with one definition into the other.

# %% [markdown] ja
# ### よく知られた変種
#
# 論文の注釈付き実装として人気のあるものは、*不偏*標準偏差（$D-1$ で割る）で正規化し、$\epsilon$ を平方根の外で足しています。つまり $(x-\mu)/(\mathrm{std}+\epsilon)$ です。これは別の関数です。違いは $\sqrt{(D-1)/D}$ 倍、相対的に約 $1/(2D)$ です。$d_{model} = 512$ では無視できますが、ごく小さな $D$ では目に見えます。また、一方の定義で学習した重みを他方に読み込むときには問題になります。

# %%
for dim in (4, 512):
    row = rng.standard_normal((1000, dim))
    ours = F.layer_norm(mt.Tensor(row)).numpy()
    variant = (row - row.mean(1, keepdims=True)) / (row.std(1, ddof=1, keepdims=True) + 1e-5)
    print(f"D={dim:4d}: mean relative difference {np.abs(ours - variant).mean() / np.abs(ours).mean():.2e}")

# %% [markdown]
# ## 2. Linear layers and Xavier initialisation
#
# `nn.Linear(in, out)` stores $W$ as (in, out) so that $y = xW + b$ reads like the paper. An input
# of any leading shape — (batch, time, $d_{model}$) — is folded into one matrix of rows, so forward
# and backward are each a single matrix product. The Module only owns $W$ and $b$; the Function
# with the hand-written backward is `F.linear` (`minitransformer/functional/linear.py`), for
# Functions live in `functional/` and Modules in `nn/`.
#
# Xavier/Glorot initialisation draws $W \sim U(-a, a)$ with $a = \sqrt{6/(n_{in}+n_{out})}$, so
# $\mathrm{Var}(W) = 2/(n_{in}+n_{out})$. For a square layer that is $1/n$, and then
# $\mathrm{Var}(xW) = n\,\mathrm{Var}(x)\mathrm{Var}(W) = \mathrm{Var}(x)$: signals keep their size
# going forward, and gradients going backward. Too large a scale explodes, too small vanishes:

# %% [markdown] ja
# ## 2. 線形層と Xavier 初期化
#
# `nn.Linear(in, out)` は $W$ を (in, out) の形で保持するので、$y = xW + b$ が論文どおりに読めます。先頭の形状が何であっても（(batch, time, $d_{model}$) など）入力は行を並べた 1 つの行列に折りたたまれるので、順伝播と逆伝播はそれぞれ 1 回の行列積で済みます。Module は $W$ と $b$ を所有するだけで、手書きの逆伝播を持つ Function は `F.linear`（`minitransformer/functional/linear.py`）です。Function は `functional/` に、Module は `nn/` に置くからです。
#
# Xavier/Glorot 初期化は $W \sim U(-a, a)$、$a = \sqrt{6/(n_{in}+n_{out})}$ から引くので、$\mathrm{Var}(W) = 2/(n_{in}+n_{out})$ です。正方行列の層ではこれは $1/n$ で、すると $\mathrm{Var}(xW) = n\,\mathrm{Var}(x)\mathrm{Var}(W) = \mathrm{Var}(x)$ となります。信号は順方向に、勾配は逆方向に、大きさを保ったまま伝わります。スケールが大きすぎれば発散し、小さすぎれば消えてしまいます。

# %%
def activation_stds(init_fn, depth=10, width=256):
    h = mt.Tensor(rng.standard_normal((64, width)).astype(np.float32))
    stds = []
    for _ in range(depth):
        layer = nn.Linear(width, width)
        init_fn(layer.weight)
        h = layer(h)
        stds.append(float(h.numpy().std()))
    return stds


for name, init_fn in [("xavier", nn.init.xavier_uniform),
                      ("N(0, 1)", lambda p: nn.init.normal(p, std=1.0)),
                      ("N(0, 0.01²)", lambda p: nn.init.normal(p, std=0.01))]:
    stds = activation_stds(init_fn)
    print(f"{name:12s} std after layers 1, 5, 10: {stds[0]:.3g}, {stds[4]:.3g}, {stds[9]:.3g}")
xavier = activation_stds(nn.init.xavier_uniform)
assert 0.5 < xavier[-1] < 2.0

# %% [markdown]
# ## 3. The FFN is two convolutions with kernel size 1 (§3.3)
#
# "Another way of describing this is as two convolutions with kernel size 1." A 1-D convolution over
# the positions with a kernel of width $k$ mixes $k$ neighbouring positions; with $k = 1$ it mixes
# none and applies the same matrix at every position — exactly what the FFN does. We write a plain
# convolution and compare.

# %% [markdown] ja
# ## 3. FFN はカーネルサイズ 1 の 2 つの畳み込み（§3.3）
#
# 論文はこれを「カーネルサイズ 1 の 2 つの畳み込み」とも言い表しています。位置方向の 1 次元畳み込みは、幅 $k$ のカーネルで $k$ 個の隣り合う位置を混ぜます。$k = 1$ なら何も混ぜず、すべての位置に同じ行列を適用します。これはまさに FFN がしていることです。素朴な畳み込みを書いて比べてみましょう。

# %%
def conv1d(x, kernel, bias):
    """x (B, T, C_in), kernel (k, C_in, C_out) -> (B, T − k + 1, C_out), 'valid' positions only."""
    k = kernel.shape[0]
    steps = x.shape[1] - k + 1
    return sum(x[:, j:j + steps] @ kernel[j] for j in range(k)) + bias


ffn = nn.FeedForward(d_model=8, d_ff=32).to(np.float64)
x = rng.standard_normal((2, 5, 8))
w1, b1, w2, b2 = (p.data for p in (ffn.linear1.weight, ffn.linear1.bias, ffn.linear2.weight, ffn.linear2.bias))
as_convolutions = conv1d(np.maximum(0, conv1d(x, w1[None], b1)), w2[None], b2)
np.testing.assert_allclose(ffn(mt.Tensor(x)).numpy(), as_convolutions, rtol=1e-12)

# positions never mix: change position 3 only, and only position 3 of the output changes
changed = x.copy()
changed[:, 3] += 1.0
delta = np.abs(ffn(mt.Tensor(changed)).numpy() - ffn(mt.Tensor(x)).numpy()).sum(axis=(0, 2))
print("output change per position:", np.round(delta, 6))
assert (delta[[0, 1, 2, 4]] == 0).all() and delta[3] > 0

# %% [markdown]
# ## 4. Modules
#
# A `Module` registers every `Parameter` or `Module` assigned to it, in assignment order. That single
# rule gives us names, `parameters()` for the optimizer, `state_dict()` for checkpoints, `to()` for
# devices and dtypes, and `train()`/`eval()` for dropout.

# %% [markdown] ja
# ## 4. Module
#
# `Module` は、自分に代入された `Parameter` や `Module` をすべて、代入された順に登録します。このたった 1 つの規則から、多くのものが得られます。パラメータの名前と、オプティマイザのための `parameters()`、チェックポイントのための `state_dict()` があります。さらに、デバイスと dtype のための `to()` と、ドロップアウトのための `train()`/`eval()` もあります。

# %%
class MLP(nn.Module):
    """x (N, 2) -> class scores (N, classes) through two ReLU hidden layers."""

    def __init__(self, hidden=64, classes=3):
        super().__init__()
        self.l1 = nn.Linear(2, hidden)
        self.l2 = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.out(F.relu(self.l2(F.relu(self.l1(x)))))


nn.init.set_seed(0)
model = MLP()
print(model)
print([(name, p.shape) for name, p in model.named_parameters()])
print("parameters:", model.num_parameters())

# %% [markdown]
# ### Dropout: unchanged on average in training, the identity in evaluation
#
# `train()` and `eval()` matter for one layer of this chapter: dropout (§5.4). In training each entry is
# kept with probability $1-p$ and scaled by $1/(1-p)$, so its expected value is
# $E[y] = (1-p)\cdot\frac{x}{1-p} + p\cdot 0 = x$. We draw many masks and average: the average comes
# close to $x$, within a few standard errors. In evaluation mode dropout returns its input unchanged.

# %% [markdown] ja
# ### ドロップアウト：学習では平均が変わらず、評価では恒等写像
#
# `train()` と `eval()` が効くのは、この章の層ではドロップアウト（§5.4）です。学習中は各要素が確率 $1-p$ で残され、$1/(1-p)$ 倍されます。したがって期待値は $E[y] = (1-p)\cdot\frac{x}{1-p} + p\cdot 0 = x$ です。多くのマスクを引いて平均すると、平均は標準誤差の数倍以内で $x$ に近づきます。評価モードのドロップアウトは入力をそのまま返します。

# %%
p_drop, n_masks = 0.1, 20000
x_row = rng.standard_normal(6)
many = F.dropout(mt.Tensor(np.tile(x_row, (n_masks, 1))), p_drop, generator=F.Generator(0)).numpy()  # a mask a row
print("dropped fraction:", (many == 0).mean().round(4), " (p =", p_drop, ")")
print("x          ", np.round(x_row, 3))
print("mean over masks", np.round(many.mean(axis=0), 3))
standard_error = np.abs(x_row) * np.sqrt(p_drop / (1 - p_drop)) / np.sqrt(n_masks)
assert (np.abs(many.mean(axis=0) - x_row) < 5 * standard_error).all()

layer = nn.Dropout(p_drop)
layer.eval()
x_eval = mt.Tensor(x_row)
assert layer(x_eval) is x_eval                    # evaluation: the identity, nothing rescaled
layer.train()
print("training mode, one draw:", np.round(layer(x_eval).numpy(), 3))

# %% [markdown]
# ### The embedding: read rows forward, add rows backward
#
# An embedding is a table $W$ of shape (vocabulary, $d$); forward reads the row of each token id,
# $y_t = W_{\mathrm{id}_t}$. Backward sends each position's gradient back into the row it read, and a
# token used twice gets the *sum* of its two gradients: a **scatter-add**. On a table of 4 rows, with
# id 2 used twice, we write the sum out as a loop and compare it with the engine.

# %% [markdown] ja
# ### 埋め込み：順伝播では行を読み、逆伝播では行に足す
#
# 埋め込みは形が（語彙、$d$）の表 $W$ です。順伝播では各トークン ID の行 $y_t = W_{\mathrm{id}_t}$ を読みます。逆伝播では、各位置の勾配を、その位置が読んだ行へ送り返します。2 回使われたトークンは 2 つの勾配の*和*を受け取ります。これが **scatter-add** です。4 行の表で ID 2 を 2 回使い、この和をループで書き出してエンジンと比べます。

# %%
table = mt.Tensor(rng.standard_normal((4, 3)), requires_grad=True)
ids = np.array([2, 0, 2])
looked_up = F.embedding(ids, table)
np.testing.assert_array_equal(looked_up.numpy(), table.data[ids])    # forward: rows 2, 0, 2
g_rows = rng.standard_normal((3, 3))
looked_up.backward(g_rows)

by_hand = np.zeros((4, 3))
for position, token in enumerate(ids):                                # scatter-add: row += gradient
    by_hand[token] += g_rows[position]
print("gradient of the table:\n", np.round(table.grad, 3))
np.testing.assert_allclose(table.grad, by_hand)
np.testing.assert_allclose(table.grad[2], g_rows[0] + g_rows[2])       # id 2: the sum of its two uses
assert not table.grad[[1, 3]].any()                                   # rows never read get nothing

# %% [markdown]
# ## 5. Training an MLP on spirals
#
# Three interleaved spirals in the plane: not linearly separable, easy for a small MLP. We train
# with a few lines of Adam written right here (the package's optimizers come in chapter 10) and
# require the loss to fall at least tenfold.

# %% [markdown] ja
# ## 5. 渦巻きで MLP を学習させる
#
# 平面上で絡み合った 3 本の渦巻きです。線形分離はできませんが、小さな MLP には簡単です。ここで直接書いた数行の Adam で学習させ（パッケージのオプティマイザは第 10 章で登場します）、損失が少なくとも 10 分の 1 に下がることを確かめます。

# %%
def spirals(n_per_class, classes=3, noise=0.2, seed=0):
    r = np.random.default_rng(seed)
    points, labels = [], []
    for c in range(classes):
        t = np.linspace(0.0, 1.0, n_per_class)
        angle = 4.0 * t + 2 * np.pi * c / classes + r.normal(0, noise, n_per_class)
        points.append(np.stack([t * np.sin(angle), t * np.cos(angle)], axis=1))
        labels.append(np.full(n_per_class, c))
    return np.concatenate(points).astype(np.float32), np.concatenate(labels)

# %%
points, labels = spirals(100)
params = model.parameters()
moment1 = [np.zeros_like(p.data) for p in params]
moment2 = [np.zeros_like(p.data) for p in params]
lr, beta1, beta2 = 0.01, 0.9, 0.999
steps = 300 if QUICK else 1500
inputs = mt.Tensor(points)
losses = []
for step in range(1, steps + 1):
    model.zero_grad()
    loss = F.cross_entropy(model(inputs), labels)
    loss.backward()
    losses.append(loss.item())
    for p, m, v in zip(params, moment1, moment2):   # Adam, in place
        m *= beta1
        m += (1 - beta1) * p.grad
        v *= beta2
        v += (1 - beta2) * p.grad**2
        p.data -= lr * (m / (1 - beta1**step)) / (np.sqrt(v / (1 - beta2**step)) + 1e-8)

accuracy = (model(inputs).numpy().argmax(axis=1) == labels).mean()
print(f"loss {losses[0]:.3f} -> {losses[-1]:.4f} in {steps} steps; training accuracy {accuracy:.3f}")
assert losses[-1] < losses[0] / 10

# %%
import matplotlib.pyplot as plt

grid = np.linspace(-1.1, 1.1, 200)
gx, gy_ = np.meshgrid(grid, grid)
with mt.no_grad():
    regions = model(mt.Tensor(np.stack([gx.ravel(), gy_.ravel()], 1).astype(np.float32))).numpy().argmax(1)
fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.8))
left.contourf(gx, gy_, regions.reshape(gx.shape), alpha=0.3, levels=[-0.5, 0.5, 1.5, 2.5], cmap="brg")
left.scatter(points[:, 0], points[:, 1], c=labels, s=8, cmap="brg")
left.set_title("decision regions")
right.semilogy(losses)
right.set_xlabel("step")
right.set_ylabel("cross-entropy")
right.set_title("training loss")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 6. Gradient checks
#
# Every layer of this chapter, end to end, in float64 with a random upstream gradient, and the fused
# first layer of the FFN, `F.linear_relu` (max(0, x W + b) in one Function), on its own.

# %% [markdown] ja
# ## 6. 勾配チェック
#
# この章のすべての層を、端から端まで、float64 とランダムな上流勾配で確かめます。FFN の融合した第 1 層 `F.linear_relu`（max(0, x W + b) を 1 つの Function で計算します）も単独で確かめます。

# %%
def leaf(shape):
    return mt.Tensor(rng.standard_normal(shape), requires_grad=True)


def check(module, x):
    inputs = ([x] if isinstance(x, mt.Tensor) else []) + module.parameters()
    return mt.gradcheck(lambda *_: module(x), inputs)


x3 = leaf((2, 3, 4))
w, b = leaf(4), leaf(4)
assert mt.gradcheck(lambda x, w, b: F.layer_norm(x, w, b), [x3, w, b])
assert check(nn.Linear(4, 3).to(np.float64), leaf((2, 3, 4)))
assert check(nn.LayerNorm(4).to(np.float64), leaf((2, 3, 4)))
assert check(nn.FeedForward(4, 6).to(np.float64), leaf((2, 3, 4)))
assert mt.gradcheck(lambda x, w, b: F.linear_relu(x, w, b), [leaf((2, 3, 4)), leaf((4, 6)), leaf(6)])
# dropout and the residual x + dropout(y) (§5.4): a generator seeded anew at every call keeps the mask fixed
assert mt.gradcheck(lambda y: F.dropout(y, 0.3, generator=F.Generator(1)), [leaf((2, 3, 4))])
assert mt.gradcheck(lambda x, y: F.dropout_add(x, y, 0.3, generator=F.Generator(1)), [leaf((2, 3, 4)), leaf((2, 3, 4))])
assert check(nn.Embedding(5, 3).to(np.float64), np.array([[1, 1, 4], [0, 1, 2]]))   # repeated ids
small = MLP(hidden=5).to(np.float64)
assert check(small, leaf((4, 2)))
print("all gradient checks passed")

# %% [markdown]
# ## Exercises
#
# {{exercises}}

# %% [markdown] ja
# ## 演習
#
# {{exercises}}
