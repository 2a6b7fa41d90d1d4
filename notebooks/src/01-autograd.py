# %% [markdown]
# # Chapter 1 — Autograd from scratch
#
# Training a Transformer means computing the gradient of one number (the loss) with respect to
# millions of parameters. This notebook builds the machine that does it, step by step:
#
# 1. the chain rule on scalars, by hand;
# 2. a twenty-line scalar autograd, to see the idea without arrays, then the same with arrays;
# 3. the real engine: `mt.Tensor` and `mt.Function`, and a picture of the graph they record;
# 4. the numerical gradient, and why we check in float64;
# 5. defining a new op in a few lines;
# 6. gradient checks of everything we built.
#
# The prose version is `chapters/01-autograd.md`.

# %% [markdown] ja
# # 第 1 章 — ゼロから作る自動微分
#
# Transformer を学習させるとは、1 つの数（損失）の、数百万個のパラメータについての勾配を計算することです。このノートブックでは、それを行う仕組みを一歩ずつ作っていきます。
#
# 1. スカラーでの連鎖律を手で計算する
# 2. 配列を使わずに考え方だけを見るための、20 行のスカラー自動微分と、同じものの配列版
# 3. 本物のエンジン：`mt.Tensor` と `mt.Function`、そしてそれらが記録するグラフの図
# 4. 数値勾配と、float64 でチェックする理由
# 5. 数行で新しい演算を定義する
# 6. 作ったものすべての勾配チェック
#
# 文章版は `chapters/ja/01-autograd.md` です（英語版は `chapters/01-autograd.md`）。

# %% [markdown]
# ### How these notebooks run
#
# The first code cell of every notebook is a setup cell written by `tools/build_notebooks.py`: it makes
# sure the `minitransformer` imported is the one in this repository, and names the classroom exercises
# the notebook runs that you have not solved yet. What is not the lesson (the quick mode that tests use,
# saving the book's figures, the layout code of a drawing) lives in one small module,
# `minitransformer/notebook_support.py`, so that every other cell teaches one step. This is the only
# notebook that shows it:

# %% [markdown] ja
# ### ノートブックの動かし方
#
# どのノートブックでも、最初のコードセルは `tools/build_notebooks.py` が書き込むセットアップ用のセルです。このセルは、import される `minitransformer` がこのリポジトリのものであることを確かめます。また、ノートブックが実行する教室の演習のうち、まだ解いていないものを表示します。学習内容でないもの（クイックモード、本の図の保存、図のレイアウトのコード）は、小さなモジュール `minitransformer/notebook_support.py` にまとめてあります。そのため、ほかのセルはどれも 1 つのステップだけを教えます。このモジュールを見せるのは、このノートブックだけです。

# %%
import math

import matplotlib.pyplot as plt
import numpy as np

import minitransformer as mt
from minitransformer import notebook_support

print(notebook_support.__doc__)
rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. The chain rule on scalars
#
# Take one neuron, $y = \tanh(w x + b)$. Name the intermediate values:
# $u = w x$, $v = u + b$, $y = \tanh v$. Each step has a simple local derivative, and the chain
# rule multiplies them along the path from $y$ back to each input:
#
# $$\frac{\partial y}{\partial w} = \frac{\partial y}{\partial v}\,\frac{\partial v}{\partial u}\,
# \frac{\partial u}{\partial w} = (1 - \tanh^2 v)\cdot 1 \cdot x .$$

# %% [markdown] ja
# ## 1. スカラーでの連鎖律
#
# ニューロンを 1 つ、$y = \tanh(w x + b)$ を考えます。途中の値に $u = w x$、$v = u + b$、$y = \tanh v$ と名前を付けましょう。どのステップにも簡単な局所的な微分があり、連鎖律は、$y$ から各入力へ戻る経路に沿ってそれらを掛け合わせます。
#
# $$\frac{\partial y}{\partial w} = \frac{\partial y}{\partial v}\,\frac{\partial v}{\partial u}\,
# \frac{\partial u}{\partial w} = (1 - \tanh^2 v)\cdot 1 \cdot x .$$

# %%
x, w, b = 0.5, -1.2, 0.3
u = w * x
v = u + b
y = math.tanh(v)

dy_dv = 1 - y ** 2          # d tanh(v)/dv
dy_du = dy_dv * 1.0         # dv/du = 1
dy_db = dy_dv * 1.0         # dv/db = 1
dy_dw = dy_du * x           # du/dw = x
dy_dx = dy_du * w           # du/dx = w
print(f"y = {y:.6f}   dy/dw = {dy_dw:.6f}   dy/dx = {dy_dx:.6f}   dy/db = {dy_db:.6f}")

# %% [markdown]
# Notice the order: we started at the output with $\partial y/\partial y = 1$ and walked
# *backwards*, reusing $\partial y/\partial v$ for all three inputs. That is reverse-mode
# differentiation: one backward sweep gives the gradient with respect to *every* input, which is
# what we need when there is one loss and many parameters.
#
# ## 2. A scalar autograd in twenty lines
#
# Automating the sweep needs two things: every value remembers which values it was computed from
# (the **graph**), and every operation knows its local derivative (its **backward**).

# %% [markdown] ja
# 順序に注目してください。出力の $\partial y/\partial y = 1$ から出発して*逆向き*にたどり、$\partial y/\partial v$ を 3 つの入力すべてで使い回しました。これがリバースモードの微分です。1 回の逆向きのスイープで*すべての*入力についての勾配が得られます。損失が 1 つでパラメータの多いときに必要なのは、まさにこれです。
#
# ## 2. 20 行のスカラー自動微分
#
# スイープを自動化するには 2 つのものが必要です。各値が、自分がどの値から計算されたかを覚えていること（**グラフ**）と、各演算が自分の局所的な微分を知っていること（**backward**）です。

# %%
class Scalar:
    """A number that remembers how it was computed."""

    def __init__(self, value, parents=(), local_grads=()):
        self.value, self.grad = value, 0.0
        self.parents, self.local_grads = parents, local_grads  # ∂self/∂parent for each parent

    def __add__(self, other):
        return Scalar(self.value + other.value, (self, other), (1.0, 1.0))

    def __mul__(self, other):
        return Scalar(self.value * other.value, (self, other), (other.value, self.value))

    def tanh(self):
        t = math.tanh(self.value)
        return Scalar(t, (self,), (1 - t * t,))

    def backward(self):
        order, seen = [], set()

        def visit(node):  # topological order: a node after everything it depends on
            if id(node) not in seen:
                seen.add(id(node))
                for parent in node.parents:
                    visit(parent)
                order.append(node)

        visit(self)
        self.grad = 1.0
        for node in reversed(order):  # consumers before producers
            for parent, local in zip(node.parents, node.local_grads):
                parent.grad += node.grad * local  # the chain rule; += because a value may be used twice


# %%
sx, sw, sb = Scalar(x), Scalar(w), Scalar(b)
sy = (sw * sx + sb).tanh()
sy.backward()
print(f"dy/dw = {sw.grad:.6f}   dy/dx = {sx.grad:.6f}   dy/db = {sb.grad:.6f}")
assert abs(sw.grad - dy_dw) < 1e-12 and abs(sx.grad - dy_dx) < 1e-12 and abs(sb.grad - dy_db) < 1e-12

# %% [markdown]
# ### The same idea with arrays
#
# Before the real engine, one step between: `Scalar`'s idea with NumPy arrays and three operations. Each
# operation now stores, for each input, a small function that turns the gradient of its output into
# the gradient of that input: for $Y = AB$, $\partial L/\partial A = G B^\top$ and
# $\partial L/\partial B = A^\top G$, where $G = \partial L/\partial Y$ has $Y$'s shape.

# %% [markdown] ja
# ### 同じ考え方を配列で
#
# 本物のエンジンの前に、その間の一歩を置きます。`Scalar` の考え方を NumPy 配列と 3 つの演算で書いたものです。各演算は、入力ごとに、出力の勾配をその入力の勾配に変える小さな関数を持ちます。$Y = AB$ なら $\partial L/\partial A = G B^\top$、$\partial L/\partial B = A^\top G$ です。ここで $G = \partial L/\partial Y$ は $Y$ と同じ形です。

# %%
class ArrayValue:
    """Scalar with NumPy arrays: each parent comes with a function from the output's gradient to its own."""

    def __init__(self, data, parents=(), backward_fns=()):
        self.data, self.grad = np.asarray(data, dtype=np.float64), None
        self.parents, self.backward_fns = parents, backward_fns

    def __matmul__(self, other):  # Y = A B:  ∂L/∂A = G Bᵀ,  ∂L/∂B = Aᵀ G
        return ArrayValue(self.data @ other.data, (self, other),
                          (lambda g: g @ other.data.T, lambda g: self.data.T @ g))

    def tanh(self):  # Y = tanh(A):  ∂L/∂A = G ⊙ (1 − Y²)
        y = np.tanh(self.data)
        return ArrayValue(y, (self,), (lambda g: g * (1 - y * y),))

    def sum(self):  # L = Σ A:  every entry gets G
        return ArrayValue(self.data.sum(), (self,), (lambda g: g * np.ones_like(self.data),))

    def backward(self):
        order, seen = [], set()

        def visit(node):
            if id(node) not in seen:
                seen.add(id(node))
                for parent in node.parents:
                    visit(parent)
                order.append(node)

        visit(self)
        self.grad = np.ones_like(self.data)
        for node in reversed(order):
            for parent, backward_fn in zip(node.parents, node.backward_fns):
                g = backward_fn(node.grad)  # the chain rule, one array at a time
                parent.grad = g if parent.grad is None else parent.grad + g

# %%
X_data, W_data = rng.standard_normal((4, 3)), rng.standard_normal((3, 2))
X_small, W_small = ArrayValue(X_data), ArrayValue(W_data)
(X_small @ W_small).tanh().sum().backward()

X_mt = mt.Tensor(X_data, requires_grad=True)
W_mt = mt.Tensor(W_data, requires_grad=True)
(X_mt @ W_mt).tanh().sum().backward()
np.testing.assert_allclose(W_small.grad, W_mt.grad, rtol=1e-12)
np.testing.assert_allclose(X_small.grad, X_mt.grad, rtol=1e-12)
print("∂L/∂W from ArrayValue:\n", W_small.grad.round(4), "\nthe same as mt.Tensor's")

# %% [markdown]
# `minitransformer/tensor.py` is this class grown up: an operation is a `Function` class with a `forward`
# and a `backward` instead of a pair of lambdas; gradients of broadcast inputs are summed back to their
# shape (chapter 2); arrays can live on a GPU (chapter 3); `no_grad()` records nothing; the graph is
# freed after backward; and the order is found with a stack rather than recursion.

# %% [markdown] ja
# `minitransformer/tensor.py` は、このクラスを育てたものです。演算は 2 つのラムダの組ではなく、`forward` と `backward` を持つ `Function` クラスになります。ブロードキャストされた入力の勾配は、元の形に足し戻されます（第 2 章）。配列は GPU の上にも置けます（第 3 章）。`no_grad()` の中では何も記録しません。逆伝播の後にはグラフを解放します。順序は再帰ではなくスタックで求めます。

# %% [markdown]
# Two details carry over to the real engine. The `+=` in `backward`: when a value feeds two
# consumers, its gradient is the *sum* of what each consumer sends back (the multivariable chain
# rule). And the **topological order**: a node's gradient is complete only after every consumer
# has contributed, so we process consumers first. (The recursive `visit` above would hit Python's
# recursion limit on a deep graph; the engine uses an explicit stack instead.)
#
# ## 3. The engine: Tensor and Function
#
# `mt.Tensor` is the same idea with arrays. A `Function` does one operation on raw NumPy arrays:
# `forward` computes the output and keeps what `backward` will need with
# `self.save_for_backward(...)`; `backward` reads it back from `self.saved_arrays`, receives
# $\partial L/\partial\text{output}$ and returns $\partial L/\partial\text{input}$ for each input.

# %% [markdown] ja
# 本物のエンジンにも引き継がれる細部が 2 つあります。1 つは `backward` の中の `+=` です。ある値が 2 つの利用先に渡されるとき、その勾配は各利用先から返ってくるものの*和*になります（多変数の連鎖律）。もう 1 つは**トポロジカル順序**です。あるノードの勾配は、すべての利用先が寄与を終えてはじめて完成するので、利用先を先に処理します。（上の再帰的な `visit` は、深いグラフでは Python の再帰上限に達してしまいます。エンジンは代わりに明示的なスタックを使います。）
#
# ## 3. エンジン：Tensor と Function
#
# `mt.Tensor` は同じ考え方を配列で実現したものです。`Function` は生の NumPy 配列に対して 1 つの演算を施します。`forward` は出力を計算し、`backward` が必要とするものを `self.save_for_backward(...)` で取っておきます。`backward` はそれを `self.saved_arrays` から読み戻し、$\partial L/\partial\text{output}$ を受け取って、各入力について $\partial L/\partial\text{input}$ を返します。

# %%
xt = mt.Tensor(np.array([0.5]), requires_grad=True, name="x")
wt = mt.Tensor(np.array([-1.2]), requires_grad=True, name="w")
bt = mt.Tensor(np.array([0.3]), requires_grad=True, name="b")
yt = (wt * xt + bt).tanh()
print(yt)
yt.sum().backward()
print("dy/dw", wt.grad, " dy/dx", xt.grad, " dy/db", bt.grad)
np.testing.assert_allclose([wt.grad[0], xt.grad[0], bt.grad[0]], [dy_dw, dy_dx, dy_db])

# %% [markdown]
# ### A picture of the graph
#
# Every Tensor made by a Function keeps that Function in `.creator`, and the Function keeps its
# inputs in `.inputs`. Following those two links from the output back to the leaves recovers the
# whole computation. Below, $y = \tanh(w x + b)\cdot x$: note that $x$ is used twice, so two
# arrows leave it, and backward will add two contributions into `x.grad`.

# %% [markdown] ja
# ### グラフの図
#
# Function が作った Tensor は、その Function を `.creator` に持ち、Function は自分の入力を `.inputs` に持っています。この 2 本のリンクを出力から葉までたどれば、計算全体を復元できます。下の例は $y = \tanh(w x + b)\cdot x$ です。$x$ が 2 回使われているので、$x$ からは 2 本の矢印が出ており、逆伝播では `x.grad` に 2 つの寄与が足し込まれます。

# %%
def graph_of(output):
    """Nodes (tensors and functions) and edges (producer → consumer) reachable from ``output``."""
    nodes, edges, stack, seen = [], [], [output], set()
    while stack:
        tensor = stack.pop()
        if id(tensor) in seen:
            continue
        seen.add(id(tensor))
        nodes.append(tensor)
        function = tensor.creator
        if function is not None:
            nodes.append(function)
            edges.append((function, tensor))
            for parent in function.inputs:
                edges.append((parent, function))
                stack.append(parent)
    return nodes, edges


x_leaf = mt.Tensor(np.array([0.5]), requires_grad=True, name="x")
w_leaf = mt.Tensor(np.array([-1.2]), requires_grad=True, name="w")
b_leaf = mt.Tensor(np.array([0.3]), requires_grad=True, name="b")
y_out = (w_leaf * x_leaf + b_leaf).tanh() * x_leaf
nodes, edges = graph_of(y_out)
print(len(nodes), "nodes,", len(edges), "edges")
figure = notebook_support.draw_graph(nodes, edges, "y = tanh(w·x + b) · x   (blue: leaves, yellow: Functions)")
notebook_support.save_figure(figure, "01-computational-graph.png", dpi=110)
plt.show()

# %% [markdown]
# `backward()` walks this picture from right to left. Let us check the rule "a tensor used twice
# gets the sum": $\partial y/\partial x = \tanh(v) + x\,(1-\tanh^2 v)\,w$.

# %% [markdown] ja
# `backward()` はこの図を右から左へたどります。「2 回使われたテンソルは和を受け取る」という規則を確かめてみましょう。期待される値は $\partial y/\partial x = \tanh(v) + x\,(1-\tanh^2 v)\,w$ です。

# %%
y_out.sum().backward()
t = math.tanh(-1.2 * 0.5 + 0.3)
expected = t + 0.5 * (1 - t * t) * -1.2
print("x.grad =", x_leaf.grad, "  by hand:", expected)
np.testing.assert_allclose(x_leaf.grad, [expected])

# %% [markdown]
# After `backward()` the graph is freed: each Function drops its `inputs` and its `saved_arrays`,
# so a second call raises instead of silently counting twice. `retain_graph=True` keeps it; then gradients
# **accumulate** into `.grad`, which is why training loops reset gradients every step.

# %% [markdown] ja
# `backward()` の後、グラフは解放されます。各 Function は `inputs` と `saved_arrays` を手放すので、2 回目の呼び出しは黙って 2 回分を数えるのではなく、例外を送出します。`retain_graph=True` を指定するとグラフが残ります。その場合、勾配は `.grad` に**累積**されます。学習ループが毎ステップ勾配をリセットするのはこのためです。

# %%
mul = y_out.creator
print(f"{mul}: inputs {mul.inputs}, saved_arrays {mul.saved_arrays}")
try:
    y_out.sum().backward()
except RuntimeError as error:
    print("RuntimeError:", error)

z = (w_leaf * x_leaf).sum()
x_leaf.grad = None
z.backward(retain_graph=True)
first = x_leaf.grad.copy()
z.backward()
print("after one backward:", first, " after two:", x_leaf.grad)
np.testing.assert_allclose(x_leaf.grad, 2 * first)

# %% [markdown]
# Inside `mt.no_grad()` nothing is recorded: the result has no creator, so no memory is held for a
# backward that will never come (evaluation, parameter updates).

# %% [markdown] ja
# `mt.no_grad()` の中では何も記録されません。結果は creator を持たないので、決して来ることのない逆伝播のためにメモリを抱え込むこともありません（評価やパラメータの更新の場合）。

# %%
with mt.no_grad():
    frozen = (w_leaf * x_leaf).tanh()
print(frozen, "creator:", frozen.creator)
assert frozen.creator is None and not frozen.requires_grad

# %% [markdown]
# ## 4. The numerical gradient
#
# How do we know a backward is right? Compare it with the definition of the derivative. The
# **central difference** $\frac{f(x+\varepsilon) - f(x-\varepsilon)}{2\varepsilon}$ has error
# $O(\varepsilon^2)$ (the $\varepsilon^2$ terms of the two Taylor expansions cancel), against
# $O(\varepsilon)$ for the one-sided difference. But $\varepsilon$ cannot shrink forever: the
# subtraction $f(x+\varepsilon) - f(x-\varepsilon)$ cancels leading digits, and the rounding error
# grows like $u/\varepsilon$, where $u$ is the unit roundoff of the dtype.

# %% [markdown] ja
# ## 4. 数値勾配
#
# backward が正しいことは、どうすればわかるでしょうか。微分の定義と比べればよいのです。**中心差分** $\frac{f(x+\varepsilon) - f(x-\varepsilon)}{2\varepsilon}$ の誤差は $O(\varepsilon^2)$ です（2 つのテイラー展開の $\varepsilon^2$ の項が打ち消し合います）。片側差分では $O(\varepsilon)$ です。しかし、$\varepsilon$ をどこまでも小さくはできません。引き算 $f(x+\varepsilon) - f(x-\varepsilon)$ で上位の桁が打ち消し合い、丸め誤差が $u/\varepsilon$ のように大きくなるからです。ここで $u$ はその dtype の単位丸め誤差です。

# %%
def central_difference(f, x0, eps, dtype):
    x0 = dtype(x0)
    return (f(x0 + dtype(eps)) - f(x0 - dtype(eps))) / dtype(2 * eps)


exact = 1 - np.tanh(0.7) ** 2
epsilons = np.logspace(-12, -1, 23)
errors = {dtype.__name__: [abs(central_difference(np.tanh, 0.7, e, dtype) - exact) for e in epsilons]
          for dtype in (np.float32, np.float64)}

fig, ax = plt.subplots(figsize=(6, 3.5))
for name, err in errors.items():
    ax.loglog(epsilons, np.maximum(err, 1e-17), marker="o", ms=3, label=name)
ax.set_xlabel("ε")
ax.set_ylabel("|central difference − exact|")
ax.set_title("d tanh(x)/dx at x = 0.7")
ax.legend()
plt.show()
best = {name: float(np.min(err)) for name, err in errors.items()}
print("best error:", best)
assert best["float64"] < 1e-9 < best["float32"]  # float32 is orders of magnitude worse

# %% [markdown]
# Both curves are V-shaped: truncation error ($\propto \varepsilon^2$) on the right, rounding error
# ($\propto u/\varepsilon$) on the left. In float64 the bottom of the V lies around $10^{-12}$; in
# float32 ($u \approx 6\cdot10^{-8}$ instead of $1\cdot10^{-16}$) it is about a million times higher
# and sits at a much larger $\varepsilon$. A check in float32 would have to tolerate errors as large
# as the mistakes it is looking for. That is why `mt.gradcheck` insists on float64 inputs.
#
# `mt.gradcheck(fn, inputs)` perturbs every element of every input that requires a gradient and
# compares the central difference of $L = \sum G \odot \text{fn}(\dots)$ with what `backward()`
# computes, for a *random* upstream gradient $G$ (a constant $G = 1$ would miss mistakes in
# directions that sum to zero, such as softmax's).

# %% [markdown] ja
# どちらの曲線も V 字型です。右側は打ち切り誤差（$\propto \varepsilon^2$）、左側は丸め誤差（$\propto u/\varepsilon$）です。float64 では V の底はおよそ $10^{-12}$ にあります。float32 では（$u$ が $1\cdot10^{-16}$ ではなく $u \approx 6\cdot10^{-8}$ なので）底はおよそ 100 万倍高く、ずっと大きな $\varepsilon$ のところにあります。float32 でのチェックは、探している間違いと同じくらい大きな誤差を許容しなければならなくなります。`mt.gradcheck` が float64 の入力を要求するのはそのためです。
#
# `mt.gradcheck(fn, inputs)` は、勾配を必要とするすべての入力のすべての要素を摂動させ、$L = \sum G \odot \text{fn}(\dots)$ の中心差分を `backward()` の計算結果と比べます。$G$ は*ランダムな*上流勾配です（定数の $G = 1$ では、ソフトマックスのように和がゼロになる方向の間違いを見逃してしまいます）。

# %%
a = mt.Tensor(rng.standard_normal((3, 4)), requires_grad=True)
print("gradcheck:", mt.gradcheck(lambda a: (a * 2.0 + 1.0).tanh() * a, [a]))

# %% [markdown]
# ## 5. A new op in a few lines
#
# A Function subclass needs `forward` (arrays in, array out; `self.save_for_backward(...)` what
# backward needs) and `backward` (one gradient per input). The engine's own `Exp` is exactly this — re-derived here
# as `MyExp`: $\frac{d}{dx}e^x = e^x$, so the output is all backward needs.

# %% [markdown] ja
# ## 5. 数行で新しい演算を作る
#
# Function のサブクラスに必要なのは `forward` と `backward` の 2 つです。`forward` は配列を受け取って配列を返し、backward が必要とするものを `self.save_for_backward(...)` で取っておきます。`backward` は入力ごとに勾配を 1 つ返します。エンジン自身の `Exp` はまさにこの形をしています。ここではそれを `MyExp` として導き直します。$\frac{d}{dx}e^x = e^x$ なので、backward に必要なのは出力だけです。

# %%
class MyExp(mt.Function):
    def forward(self, x):
        y = mt.backend.xp_of(x).exp(x)  # numpy or cupy, whichever owns x
        self.save_for_backward(y)
        return y

    def backward(self, gy):
        (y,) = self.saved_arrays
        return gy * y  # d(e^x)/dx = e^x


class Sigmoid(mt.Function):
    """σ(x) = 1 / (1 + e^{−x});  dσ/dx = σ (1 − σ)."""

    def forward(self, x):
        y = 1 / (1 + mt.backend.xp_of(x).exp(-x))
        self.save_for_backward(y)
        return y

    def backward(self, gy):
        (y,) = self.saved_arrays
        return gy * y * (1 - y)


s = mt.Tensor(rng.standard_normal(5), requires_grad=True)
out = MyExp()(s)
print(out)
np.testing.assert_allclose(out.data, np.exp(s.data))

# %% [markdown]
# A wrong backward does not go unnoticed. Here is a sigmoid whose author forgot the factor
# $(1-\sigma)$:

# %% [markdown] ja
# 間違った backward は見過ごされません。次のシグモイドは、作者が因子 $(1-\sigma)$ を書き忘れたものです。

# %%
class BrokenSigmoid(Sigmoid):
    def backward(self, gy):
        (y,) = self.saved_arrays
        return gy * y


try:
    mt.gradcheck(lambda s: BrokenSigmoid()(s), [s])
except mt.GradcheckError as error:
    print("caught:", error)
    assert "is wrong at" in str(error)  # a wrong gradient, not a crash
else:
    raise AssertionError("gradcheck should have caught BrokenSigmoid")

# %% [markdown]
# ## 6. Gradient checks
#
# Everything differentiable in this notebook, checked in float64 against central differences.

# %% [markdown] ja
# ## 6. 勾配チェック
#
# このノートブックで作った微分可能なものすべてを、float64 で中心差分と比べてチェックします。

# %%
checks = {
    "neuron tanh(w x + b) x": (lambda x, w, b: (w * x + b).tanh() * x,
                               [mt.Tensor(rng.standard_normal((2, 3)), requires_grad=True) for _ in range(3)]),
    "MyExp": (lambda s: MyExp()(s), [mt.Tensor(rng.standard_normal((2, 3)), requires_grad=True)]),
    "Sigmoid": (lambda s: Sigmoid()(s * 3.0), [mt.Tensor(rng.standard_normal((2, 3)), requires_grad=True)]),
    "diamond exp(2x) + tanh(2x)": (lambda x: (x * 2.0).exp() + (x * 2.0).tanh(),
                                   [mt.Tensor(rng.standard_normal(4), requires_grad=True)]),
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
