# %% [markdown]
# # Chapter 2 — Tensors and broadcasting
#
# Chapter 1 differentiated scalars. A Transformer works on tensors of shape (batch, tokens,
# features), and three array features need care in backward:
#
# 1. **broadcasting** — a bias of shape (d,) added to every token: its gradient must be *summed back*;
# 2. **matrix products** — the backward of $Y = AB$ follows from one shape argument;
# 3. **indexing** — reading rows of an embedding table; repeated rows must *accumulate*.
#
# The prose version is `chapters/02-tensors-broadcasting.md`.

# %% [markdown] ja
# # 第 2 章 — テンソルとブロードキャスト
#
# 第 1 章ではスカラーを微分しました。Transformer は形状 (batch, tokens, features) のテンソルを扱い、配列の 3 つの機能が逆伝播で工夫を要します。
#
# 1. **ブロードキャスト** — 形状 (d,) のバイアスがすべてのトークンに足されるとき、その勾配は*和をとって戻さ*なければなりません。
# 2. **行列積** — $Y = AB$ の逆伝播は、形状についての 1 つの議論から導かれます。
# 3. **インデックス参照** — 埋め込みの表から行を読み出すとき、重複した行の勾配は*累積*されなければなりません。
#
# 文章版は `chapters/ja/02-tensors-broadcasting.md` です（英語版は `chapters/02-tensors-broadcasting.md`）。

# %%
import numpy as np

import minitransformer as mt
from minitransformer.ops import unbroadcast

rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. Broadcasting, and why gradients must be unbroadcast
#
# NumPy lines shapes up from the right; an axis of size 1 (or a missing leading axis) is
# stretched to match. A bias $b \in \mathbb{R}^{4}$ added to activations $X \in \mathbb{R}^{2\times3\times4}$
# is used $2\cdot3 = 6$ times:

# %% [markdown] ja
# ## 1. ブロードキャストと、勾配を unbroadcast しなければならない理由
#
# NumPy は形状を右からそろえます。サイズ 1 の軸（または先頭に足りない軸）は、相手に合わせて引き伸ばされます。アクティベーション $X \in \mathbb{R}^{2\times3\times4}$ に足されたバイアス $b \in \mathbb{R}^{4}$ は、$2\cdot3 = 6$ 回使われます。

# %%
X = mt.Tensor(rng.standard_normal((2, 3, 4)), requires_grad=True)
b = mt.Tensor(np.zeros(4), requires_grad=True)
Y = X + b
print("X", X.shape, "+ b", b.shape, "→ Y", Y.shape)

# %% [markdown]
# Each $b_j$ contributed to 6 outputs $Y_{\dots j}$, so by the multivariable chain rule its gradient
# is the sum of the 6 upstream gradients:
# $\frac{\partial L}{\partial b_j} = \sum_{n,t} \frac{\partial L}{\partial Y_{ntj}}$.
# The upstream gradient has Y's shape (2, 3, 4); returning it unchanged for $b$ would be a shape
# error at best and a silent bug at worst. `unbroadcast` sums over exactly the axes broadcasting
# added or stretched:

# %% [markdown] ja
# 各 $b_j$ は 6 つの出力 $Y_{\dots j}$ に寄与したので、多変数の連鎖律により、その勾配は 6 つの上流勾配の和になります：$\frac{\partial L}{\partial b_j} = \sum_{n,t} \frac{\partial L}{\partial Y_{ntj}}$。上流勾配は Y の形状 (2, 3, 4) を持っています。それを $b$ の勾配としてそのまま返せば、よくて形状のエラー、悪ければ気づかれないバグになります。`unbroadcast` は、ブロードキャストが追加した軸と引き伸ばした軸について、過不足なく和をとります。

# %%
G = rng.standard_normal(Y.shape)
Y.backward(G)
print("b.grad", b.grad.shape, "  X.grad", X.grad.shape)
np.testing.assert_allclose(b.grad, G.sum(axis=(0, 1)))
np.testing.assert_allclose(unbroadcast(G, (1, 3, 1)), G.sum(axis=(0, 2), keepdims=True))  # stretched size-1 axes
np.testing.assert_allclose(unbroadcast(G, ()), G.sum())

# %% [markdown]
# The engine also guards the rule: a backward that returns a gradient of the wrong shape is
# refused, with the name of the culprit.

# %% [markdown] ja
# エンジンもこの規則を見張っています。誤った形状の勾配を返す backward は、原因の Function の名前を添えたエラーになります。

# %%
from minitransformer.ops import Add  # noqa: E402


class AddWithoutUnbroadcast(Add):
    def backward(self, gy):
        return gy, gy


try:
    AddWithoutUnbroadcast()(X, b).sum().backward()
except ValueError as error:
    print("ValueError:", error)

# %% [markdown]
# ## 2. The backward of a matrix product
#
# For $Y = AB$ with $A$ of shape $(n, k)$ and $B$ of shape $(k, m)$, the gradient
# $\partial L/\partial A$ must have $A$'s shape $(n, k)$ and can only be built from the upstream
# gradient $G = \partial L/\partial Y$ of shape $(n, m)$ and from $B$ (shape $(k, m)$).
# Matching shapes leaves one candidate, $G B^\top$: $(n, m)\cdot(m, k) = (n, k)$. Likewise
# $\partial L/\partial B = A^\top G$: $(k, n)\cdot(n, m)$.
#
# Shapes suggest; an element-wise derivation proves. $Y_{ij} = \sum_p A_{ip} B_{pj}$, so
# $\partial Y_{ij} / \partial A_{ip} = B_{pj}$ and
# $\frac{\partial L}{\partial A_{ip}} = \sum_j G_{ij} B_{pj} = (G B^\top)_{ip}$.
# Let us confirm both against central differences.

# %% [markdown] ja
# ## 2. 行列積の逆伝播
#
# $A$ の形状が $(n, k)$、$B$ の形状が $(k, m)$ である $Y = AB$ について、勾配 $\partial L/\partial A$ は $A$ の形状 $(n, k)$ を持たなければならず、形状 $(n, m)$ の上流勾配 $G = \partial L/\partial Y$ と $B$（形状 $(k, m)$）からしか作れません。形状を合わせると候補は $G B^\top$ ただ 1 つに絞られます：$(n, m)\cdot(m, k) = (n, k)$。同様に $\partial L/\partial B = A^\top G$ です：$(k, n)\cdot(n, m)$。
#
# 形状から見当をつけ、要素ごとの導出で証明します。$Y_{ij} = \sum_p A_{ip} B_{pj}$ なので $\partial Y_{ij} / \partial A_{ip} = B_{pj}$ となり、$\frac{\partial L}{\partial A_{ip}} = \sum_j G_{ij} B_{pj} = (G B^\top)_{ip}$ です。両方を中心差分と比べて確かめてみましょう。

# %%
A = mt.Tensor(rng.standard_normal((2, 3)), requires_grad=True)
B = mt.Tensor(rng.standard_normal((3, 4)), requires_grad=True)
G = rng.standard_normal((2, 4))
(A @ B).backward(G)
np.testing.assert_allclose(A.grad, G @ B.data.T)
np.testing.assert_allclose(B.grad, A.data.T @ G)
numeric_A = mt.numerical_gradient(lambda A, B: A @ B, [A, B], 0, G, eps=1e-6)
print("max |G Bᵀ − numeric| =", np.abs(A.grad - numeric_A).max())

# %% [markdown]
# With batches, `matmul` broadcasts the leading axes like any elementwise op: a weight of shape
# (d, d) multiplies activations of shape (batch, tokens, d). The weight was reused for every
# batch element, so its gradient is summed over the batch — the same unbroadcast rule.

# %% [markdown] ja
# バッチがある場合、`matmul` は要素ごとの演算と同じように先頭の軸をブロードキャストします。形状 (d, d) の重みが、形状 (batch, tokens, d) のアクティベーションに掛けられるのです。重みはバッチのすべての要素で使い回されたので、その勾配はバッチについて和をとったものになります。これも同じ unbroadcast の規則です。

# %%
acts = mt.Tensor(rng.standard_normal((2, 5, 3)), requires_grad=True)   # (B, T, d)
W = mt.Tensor(rng.standard_normal((3, 4)), requires_grad=True)        # (d, d_out), shared
out = acts @ W                                                         # (B, T, d_out)
G = rng.standard_normal(out.shape)
out.backward(G)
per_example = np.stack([acts.data[i].T @ G[i] for i in range(2)])      # one Aᵀ G per batch element
np.testing.assert_allclose(W.grad, per_example.sum(axis=0))
print("W.grad", W.grad.shape, "= Σ over the batch of Aᵀ G")

# %% [markdown]
# ## 3. Indexing: the backward of a read is a scatter-add
#
# An embedding layer reads rows of a table: `table[ids]`. The backward writes each upstream row
# back where it was read. When a token id occurs twice, that row was read twice, and both
# gradients must **add** — an assignment `grad[ids] = G` would keep only the last one.

# %% [markdown] ja
# ## 3. インデックス参照：読み出しの逆伝播は scatter-add
#
# 埋め込み層は表の行を読み出します：`table[ids]`。backward は上流の各行を、それが読み出された場所へ書き戻します。あるトークン id が 2 回現れると、その行は 2 回読まれたことになり、2 つの勾配を**足し合わせ**なければなりません。代入 `grad[ids] = G` では最後の 1 つしか残りません。

# %%
table = mt.Tensor(rng.standard_normal((5, 3)), requires_grad=True)   # vocabulary of 5, d = 3
ids = np.array([4, 1, 4, 4])                                        # token 4 appears three times
rows = table[ids]                                                   # (4, 3)
G = rng.standard_normal(rows.shape)
rows.backward(G)

assigned = np.zeros((5, 3))
assigned[ids] = G                     # the wrong adjoint: the last write wins
added = np.zeros((5, 3))
np.add.at(added, ids, G)              # scatter-add: every read sends its gradient home
print("row 4 by assignment:", assigned[4].round(3), "\nrow 4 by scatter-add:", added[4].round(3))
np.testing.assert_allclose(table.grad, added)
np.testing.assert_allclose(table.grad[4], G[0] + G[2] + G[3])

# %% [markdown]
# Basic indexing (ints and slices) never reads a position twice, so plain assignment is correct
# there; the engine's `GetItem.backward` picks the cheaper path when it can.
#
# ## 4. Reductions: where does the gradient of a max go?
#
# `sum` copies the upstream gradient to every element it summed, `mean` copies it divided by the
# count. `max` sends it to the winner; with ties we split it equally among the winners, which keeps
# the total gradient right and makes the function symmetric in its tied arguments.

# %% [markdown] ja
# 基本的なインデックス参照（整数とスライス）では、同じ位置が 2 回読まれることはないので、そこでは普通の代入で正しく計算できます。エンジンの `GetItem.backward` は、可能なときは安いほうの経路を選びます。
#
# ## 4. 縮約：max の勾配はどこへ行くのか
#
# `sum` は上流勾配を、和をとったすべての要素へコピーします。`mean` は個数で割ってコピーします。`max` は勾配を最大値の要素に送ります。同点の場合は、最大値をとった要素の間で均等に分けます。こうすると勾配の合計が正しく保たれ、関数は同点の引数について対称になります。

# %%
x = mt.Tensor([[1.0, 3.0, 3.0], [0.0, 5.0, 2.0]], requires_grad=True)
x.max(axis=1).backward(np.array([1.0, 1.0]))
print(x.grad)
np.testing.assert_allclose(x.grad, [[0, 0.5, 0.5], [0, 1, 0]])

# %% [markdown]
# ## 5. Gradient checks
#
# Everything above, checked in float64: broadcasting in both directions, batched and broadcast
# matmul, indexing with repeated ids, and reductions.

# %% [markdown] ja
# ## 5. 勾配チェック
#
# ここまでのすべてを float64 でチェックします。両方向のブロードキャスト、バッチ化された行列積とブロードキャストされる行列積、重複した ids を含むインデックス参照、そして縮約です。

# %%
def leaf(*shape):
    return mt.Tensor(rng.standard_normal(shape), requires_grad=True)


checks = {
    "bias broadcast": (lambda X, b: (X + b) * X, [leaf(2, 3, 4), leaf(4)]),
    "size-1 axes stretch": (lambda a, b: a * b, [leaf(2, 1, 4), leaf(3, 1)]),
    "matmul 2-D": (lambda A, B: A @ B, [leaf(2, 3), leaf(3, 4)]),
    "matmul shared weight": (lambda X, W: X @ W, [leaf(2, 5, 3), leaf(3, 4)]),
    "matmul broadcast batch": (lambda A, B: A @ B, [leaf(2, 1, 2, 3), leaf(3, 3, 2)]),
    "embedding lookup": (lambda T: T[ids] * 2.0, [leaf(5, 3)]),
    "mean and max": (lambda x: x.mean(axis=-1) + x.max(axis=0).sum(), [leaf(3, 4)]),
}
for name, (fn, inputs) in checks.items():
    assert mt.gradcheck(fn, inputs)
    print(f"gradcheck passed: {name}")


# %% [markdown]
# ## Exercises
#
# {{exercises}}

# %% [markdown] ja
# ## 演習
#
# {{exercises}}
