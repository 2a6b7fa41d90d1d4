# %% [markdown]
# # Chapter 8 — Positional encoding (§3.5, Table 3 row (E))
#
# Self-attention treats its input as a *set*: chapter 7 showed that permuting the positions only
# permutes the outputs. The Transformer therefore adds to each token's embedding a vector that
# depends on the token's position. The paper's encoding, for position $pos$ and feature pair $i$:
#
# $$PE_{(pos,\,2i)} = \sin\!\left(pos/10000^{2i/d_{model}}\right),\qquad
#   PE_{(pos,\,2i+1)} = \cos\!\left(pos/10000^{2i/d_{model}}\right).$$
#
# In this notebook we
# 1. draw the encoding,
# 2. show numerically that moving $k$ positions is a fixed linear map — a rotation — of the encoding
#    (the paper's reason for choosing it),
# 3. train a small model on a task that needs word order, with sinusoidal, learned and no
#    positional information (Table 3 row (E): learned and sinusoidal give nearly identical results),
# 4. gradient-check the positional layers.

# %% [markdown] ja
# # 第 8 章 — 位置エンコーディング（§3.5、論文の表 3 の (E) 行）
#
# セルフアテンションは入力を*集合*として扱います。第 7 章で見たように、位置を並べ替えても出力が並べ替わるだけです。そこで Transformer は、各トークンの埋め込みに、そのトークンの位置で決まるベクトルを足します。位置 $pos$、特徴量のペア $i$ に対する論文の位置エンコーディングは次のとおりです。
#
# $$PE_{(pos,\,2i)} = \sin\!\left(pos/10000^{2i/d_{model}}\right),\qquad
#   PE_{(pos,\,2i+1)} = \cos\!\left(pos/10000^{2i/d_{model}}\right).$$
#
# このノートブックでは次のことを行います。
# 1. 位置エンコーディングを描きます。
# 2. $k$ 位置ずらすことが、位置エンコーディングに対する固定した線形写像、つまり回転であることを数値で示します（論文がこれを選んだ理由です）。
# 3. 語順を必要とするタスクで小さなモデルを、正弦波、学習される位置、位置情報なしの 3 通りで学習させます（論文の表 3 の (E) 行：学習される位置と正弦波はほぼ同一の結果になります）。
# 4. 位置の層の勾配チェックをします。

# %%
import matplotlib.pyplot as plt
import numpy as np

import minitransformer as mt
import minitransformer.functional as F
import minitransformer.nn as nn
from minitransformer.nn.positional import sinusoidal_table

from minitransformer.notebook_support import QUICK, save_figure
rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. The encoding as a picture
#
# Each column pair $(2i, 2i+1)$ is a sine and a cosine of the same angular frequency
# $\omega_i = 10000^{-2i/d_{model}}$. The wavelengths $2\pi/\omega_i$ form a geometric progression
# from $2\pi$ (column 0, changing every position) to almost $10000\cdot 2\pi$ (the last columns,
# nearly constant over any sentence). Like the digits of a clock, the fast columns tell nearby
# positions apart and the slow ones tell far-apart positions apart.

# %% [markdown] ja
# ## 1. 位置エンコーディングを絵で見る
#
# 列の各ペア $(2i, 2i+1)$ は、同じ角周波数 $\omega_i = 10000^{-2i/d_{model}}$ の sin と cos です。波長 $2\pi/\omega_i$ は、$2\pi$（列 0。位置ごとに変わります）から、ほぼ $10000\cdot 2\pi$（最後のほうの列。どんな文の長さにわたってもほとんど一定です）までの等比数列をなします。時計の桁のように、速い列は近くの位置を区別し、遅い列は遠く離れた位置を区別します。

# %%
table = sinusoidal_table(100, 128)
fig, axes = plt.subplots(1, 2, figsize=(11, 3.4), gridspec_kw={"width_ratios": [2, 1]})
image = axes[0].imshow(table, aspect="auto", cmap="RdBu", vmin=-1, vmax=1)
axes[0].set_xlabel("feature (even: sin, odd: cos)")
axes[0].set_ylabel("position")
axes[0].set_title("PE for 100 positions, d_model = 128")
fig.colorbar(image, ax=axes[0])
for column in (0, 10, 40, 100):
    axes[1].plot(table[:, column], label=f"column {column}")
axes[1].set_xlabel("position")
axes[1].set_title("a few columns")
axes[1].legend(fontsize=8)
fig.tight_layout()
save_figure(fig, "08-encoding.png", dpi=80)
plt.show()

# %% [markdown]
# ## 2. $PE(pos + k)$ is a fixed linear function of $PE(pos)$
#
# The paper chose the sinusoid because "for any fixed offset $k$, $PE_{pos+k}$ can be represented as
# a linear function of $PE_{pos}$" (§3.5), which it hypothesised would make attending by relative
# position easy. The angle-addition formulas say which linear function:
#
# $$\begin{pmatrix}\sin((p+k)\omega)\\ \cos((p+k)\omega)\end{pmatrix} =
#   \begin{pmatrix}\cos k\omega & \sin k\omega\\ -\sin k\omega & \cos k\omega\end{pmatrix}
#   \begin{pmatrix}\sin p\omega\\ \cos p\omega\end{pmatrix}$$
#
# — a rotation by $k\omega_i$ in every column pair: a block-diagonal matrix $R(k)$ that depends on
# $k$ but **not** on $pos$. The table stores $PE_{pos}$ as a *row*, so the map acts as
# $PE_{pos}R(k)^\top = PE_{pos+k}$ (the formula is for column vectors). We build $R(k)^\top$ from the
# formula, and separately *fit* one linear map by
# least squares to all positions at once; both reproduce every shifted row to rounding error. (The
# fitted matrix need not equal $R(k)^\top$ entry by entry: over 200 positions the slowest columns barely
# move, so many matrices fit those columns equally well.)

# %% [markdown] ja
# ## 2. $PE(pos + k)$ は $PE(pos)$ の固定した線形関数
#
# 論文が正弦波を選んだのは、「任意の固定したずれ $k$ について、$PE_{pos+k}$ は $PE_{pos}$ の線形関数として表せる」（§3.5）からで、それによって相対位置に基づく注目が容易になるだろうという仮説を立てていました。どんな線形関数なのかは、加法定理からわかります。
#
# $$\begin{pmatrix}\sin((p+k)\omega)\\ \cos((p+k)\omega)\end{pmatrix} =
#   \begin{pmatrix}\cos k\omega & \sin k\omega\\ -\sin k\omega & \cos k\omega\end{pmatrix}
#   \begin{pmatrix}\sin p\omega\\ \cos p\omega\end{pmatrix}$$
#
# つまり、列の各ペアでの角度 $k\omega_i$ の回転です。これは $k$ に依存し、$pos$ には依存**しない**ブロック対角行列 $R(k)$ です。表は $PE_{pos}$ を*行*として保持しているので、写像は $PE_{pos}R(k)^\top = PE_{pos+k}$ として作用します（式は列ベクトルについてのものです）。式から $R(k)^\top$ を組み立て、それとは別に、すべての位置に 1 つの線形写像を最小二乗法で*当てはめ*ます。どちらも、ずらしたすべての行を丸め誤差の範囲で再現します。（当てはめた行列が成分ごとに $R(k)^\top$ と一致する必要はありません。200 個の位置では最も遅い列はほとんど動かないので、それらの列に同じくらいよく合う行列がたくさんあるからです。）

# %%
d_model, length = 16, 200
table = sinusoidal_table(length, d_model)


def rotation(k):
    r = np.zeros((d_model, d_model))
    for i in range(d_model // 2):
        angle = k * 10000.0 ** (-2 * i / d_model)
        r[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[np.cos(angle), -np.sin(angle)],   # R(k)ᵀ, for row vectors:
                                               [np.sin(angle), np.cos(angle)]]    # PE(pos+k) = PE(pos) R(k)ᵀ
    return r


for k in (1, 5, 50):
    before, after = table[:length - k], table[k:]
    by_formula = np.abs(before @ rotation(k) - after).max()
    fitted, *_ = np.linalg.lstsq(before, after, rcond=None)
    by_fit = np.abs(before @ fitted - after).max()
    print(f"k = {k:2d}: max |PE(pos) R(k)ᵀ − PE(pos+k)| over all positions {by_formula:.1e}; "
          f"best-fitting linear map: {by_fit:.1e}")
    assert by_formula < 1e-9 and by_fit < 1e-8

# %% [markdown]
# A consequence: since each $R(k)$ is a rotation, the dot product $PE(pos)\cdot PE(pos+k) =
# \sum_i \cos(k\omega_i)$ depends only on the distance $k$ — the same for every $pos$:

# %% [markdown] ja
# その帰結として、各 $R(k)$ は回転なので、内積 $PE(pos)\cdot PE(pos+k) = \sum_i \cos(k\omega_i)$ は距離 $k$ だけで決まり、どの $pos$ でも同じです。

# %%
dots = np.array([[table[p] @ table[p + k] for k in range(40)] for p in (0, 30, 120)])
print("PE(pos)·PE(pos+k) for k = 0..5 at pos = 0, 30, 120:\n", dots[:, :6].round(6))
np.testing.assert_allclose(dots[0], dots[1], atol=1e-9)

# %% [markdown]
# ## 3. Learned or sinusoidal? (Table 3 row (E))
#
# The paper also tried learned positional embeddings — one trained vector per position — and
# "found that the two versions produced nearly identical results" (Table 3 row (E): 4.92 perplexity and
# 25.7 BLEU against 4.92 and 25.8 for the base model). It kept the sinusoid because it might
# extrapolate to sentences longer than any seen in training; the paper does not test that.
#
# Our small experiment: **reverse** a sequence of random tokens. A model without positional
# information sees the same set of input tokens whatever their order, so it cannot know which one to
# write first; with either encoding it can.

# %% [markdown] ja
# ## 3. 学習される位置か、正弦波か（論文の表 3 の (E) 行）
#
# 論文は、学習される位置埋め込み（位置ごとに 1 つ、学習するベクトル）も試し、「2 つの版はほぼ同一の結果を出した」と報告しています。論文の表 3 の (E) 行はパープレキシティ 4.92、BLEU 25.7 で、ベースモデルは 4.92 と 25.8 です。論文が正弦波を残した理由は、学習中に見たどの文よりも長い文に外挿できる可能性があることです。ただし、論文はそれを検証していません。
#
# 本書の小さな実験は、ランダムなトークンの系列を**逆順に並べる**ことです。位置の情報を持たないモデルは、入力トークンの順序がどうであっても同じ集合を見るので、どれを最初に書けばよいかを知ることができません。どちらかの位置エンコーディングがあればそれがわかります。

# %%
PAD, BOS, EOS, VOCAB, LENGTH = 0, 1, 2, 12, 6


def reverse_batch(size, generator):
    src = generator.integers(3, VOCAB, (size, LENGTH))
    target = src[:, ::-1]
    tgt_in = np.concatenate([np.full((size, 1), BOS), target], axis=1)
    tgt_out = np.concatenate([target, np.full((size, 1), EOS)], axis=1)
    return src, tgt_in, tgt_out


class NoPositions(nn.Module):
    """Adds nothing: the ablation without positional information."""

    def forward(self, x, offset=0):
        return x


def train(positional, steps, seed=0):
    config = nn.TransformerConfig.tiny(VOCAB, d_model=32, n_heads=4, d_ff=64, n_layers=1, dropout=0.0,
                                       max_len=16, seed=seed,
                                       positional="sinusoidal" if positional == "none" else positional)
    model = nn.Transformer(config)
    if positional == "none":
        model.src_positional, model.tgt_positional = NoPositions(), NoPositions()
    optimizer = mt.optim.Adam(model.parameters(), lr=3e-3)
    data = np.random.default_rng(seed)
    losses = []
    for _ in range(steps):
        src, tgt_in, tgt_out = reverse_batch(64, data)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(src, tgt_in).reshape(-1, VOCAB), tgt_out.reshape(-1), ignore_index=PAD)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    src, tgt_in, tgt_out = reverse_batch(500, np.random.default_rng(1234))      # held-out
    with mt.no_grad():
        accuracy = (model(src, tgt_in).numpy().argmax(-1) == tgt_out).mean()
    return losses, accuracy


steps = 40 if QUICK else 600
results = {name: train(name, steps) for name in ("sinusoidal", "learned", "none")}
fig, ax = plt.subplots(figsize=(6, 3.2))
for name, (losses, accuracy) in results.items():
    smooth = np.convolve(losses, np.ones(10) / 10, mode="valid")
    ax.plot(smooth, label=f"{name}: held-out token accuracy {accuracy:.1%}")
    print(f"{name:10s}  final loss {np.mean(losses[-10:]):.3f}   held-out token accuracy {accuracy:.1%}")
ax.set_xlabel("step")
ax.set_ylabel("cross-entropy (moving average)")
ax.set_title("reversing 6 tokens: which positional encoding?")
ax.legend(fontsize=8)
fig.tight_layout()
save_figure(fig, "08-learned-vs-sinusoidal.png", dpi=90)
plt.show()

# %% [markdown]
# Both encodings learn the task almost perfectly. Without positions the model does much worse, but
# better than a blind guess, and the reason is instructive. The encoder sees the source as a *bag*: it
# cannot know which token came last. The decoder still knows which tokens it has already written, so
# it can pick among the source tokens not yet used (and the causal mask even lets it infer how far
# along it is: attending uniformly over $t$ earlier positions gives weights $1/t$). Picking among the
# remaining tokens gets the last one right for free, the one before it half the time, and so on —
# roughly the accuracy we see. This is the small-scale version of row (E): what matters is that
# position information is there, much less how it is encoded.

# %% [markdown] ja
# どちらの位置エンコーディングでも、モデルはこのタスクをほぼ完璧に学習します。位置がないとずっと悪くなりますが、それでも当てずっぽうよりは良く、その理由は示唆に富んでいます。エンコーダは原文を*袋*として見るので、どのトークンが最後に来たのかを知ることができません。一方で、デコーダは自分がすでに書いたトークンを知っているので、まだ使っていない原文のトークンの中から選べます。因果マスクのおかげで、どこまで進んだかを推し量ることさえできます（$t$ 個の以前の位置に一様に注目すると、重みは $1/t$ になるからです）。残りのトークンの中から選べば、最後のトークンは自動的に正解し、その 1 つ前は半分の確率で正解し、というように続きます。本書で観測される正解率は、おおよそこの程度です。これは (E) 行の小規模版です。重要なのは位置の情報があることで、それがどうエンコードされているかはずっと小さな問題です。

# %%
for name, (losses, accuracy) in results.items():   # quick mode too: every variant learns something
    assert np.mean(losses[-10:]) < np.mean(losses[:10]), name
if not QUICK:                                         # the claim above needs the full 600 steps
    assert min(results["sinusoidal"][1], results["learned"][1]) > 0.9 > results["none"][1] + 0.25

# %% [markdown]
# ## 4. Gradient checks (float64)
#
# The sinusoidal encoding has no parameters; the gradient flows through the addition to the input.
# The learned one is a table read by slicing; its gradient lands on the rows that were used.

# %% [markdown] ja
# ## 4. 勾配チェック（float64）
#
# 正弦波の位置エンコーディングにはパラメータがありません。勾配は足し算を通って入力に流れます。学習される位置エンコーディングは、スライスで読み出す表です。その勾配は、使われた行に届きます。

# %%
nn.init.set_seed(0)
sinusoidal = nn.PositionalEncoding(6, max_len=10).to(np.float64)
learned = nn.LearnedPositionalEncoding(6, max_len=10).to(np.float64)
x = mt.Tensor(rng.standard_normal((2, 4, 6)), requires_grad=True)
assert mt.gradcheck(lambda x: sinusoidal(x, offset=3) * sinusoidal(x, offset=3), [x])
assert mt.gradcheck(lambda x, table: learned(x, offset=3) * learned(x, offset=3), [x, learned.weight])
print("gradcheck passed for both encodings; rows used by offset 3:",
      np.flatnonzero(np.abs(learned.weight.grad).sum(1)).tolist())

# %% [markdown]
# ## Exercises
#
# {{exercises}}

# %% [markdown] ja
# ## 演習
#
# {{exercises}}
