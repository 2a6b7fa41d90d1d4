# %% [markdown]
# # Chapter 9 — The encoder and the decoder (§3.1, §3.4, Table 3)
#
# The pieces of chapters 4–8 assemble into the model of Figure 1 of the paper: an encoder of $N$
# identical layers (self-attention, feed-forward), a decoder of $N$ layers (masked self-attention,
# encoder–decoder attention, feed-forward), each sub-layer wrapped as
# $\mathrm{LayerNorm}(x + \mathrm{Dropout}(\mathrm{Sublayer}(x)))$, token embeddings scaled by
# $\sqrt{d_{model}}$ plus positional encodings at the bottom, and a linear map to vocabulary logits at
# the top, sharing its matrix with the embeddings. In this notebook we
# 1. build a model and look at it,
# 2. count the parameters of the paper's base model, by the code and by a formula, and explain why
#    Table 3 says 65 M,
# 3. check what the masks promise: no peeking at future target tokens, no influence of padding,
# 4. decode incrementally with a key/value cache and measure what it saves,
# 5. compare post-LN and pre-LN at initialisation,
# 6. gradient-check a whole tiny model on the label-smoothed loss.

# %% [markdown] ja
# # 第 9 章 — エンコーダとデコーダ（§3.1、§3.4、論文の表 3）
#
# 第 4–8 章の部品を組み立てると、論文の図 1 のモデルになります。$N$ 個の同一の層（セルフアテンション、フィードフォワード）からなるエンコーダと、$N$ 個の層（マスク付きセルフアテンション、エンコーダ・デコーダアテンション、フィードフォワード）からなるデコーダです。各サブレイヤは $\mathrm{LayerNorm}(x + \mathrm{Dropout}(\mathrm{Sublayer}(x)))$ の形で包まれ、一番下では $\sqrt{d_{model}}$ 倍したトークンの埋め込みに位置エンコーディングを足し、一番上では埋め込みと行列を共有する線形写像で語彙上のロジットを出します。このノートブックでは次のことを行います。
# 1. モデルを組み立てて眺めます。
# 2. 論文のベースモデルのパラメータ数を、コードと式の両方で数え、論文の表 3 が 65 M とする理由を説明します。
# 3. マスクが約束すること、つまり未来の目的言語トークンを覗き見しないこと、パディングが影響しないことを確かめます。
# 4. キーとバリューのキャッシュ（KV キャッシュ）を使って逐次的にデコードし、それで何が節約できるかを測ります。
# 5. 初期化の時点での post-LN と pre-LN を比べます。
# 6. 小さなモデル全体について、ラベルスムージングした損失で勾配チェックをします。

# %%
import time

import matplotlib.pyplot as plt
import numpy as np

import minitransformer as mt
import minitransformer.functional as F
import minitransformer.nn as nn

from minitransformer.notebook_support import QUICK
rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. Assemble

# %% [markdown] ja
# ## 1. 組み立てる

# %%
config = nn.TransformerConfig.tiny(vocab=20)
model = nn.Transformer(config)
print(config)
print(model.decoder.layers[0])
print(model.parameter_report())

src = np.array([[4, 5, 6, 7, 8], [9, 10, 11, 0, 0]])          # pad id 0
tgt_in = np.array([[1, 12, 13, 14], [1, 15, 16, 0]])
logits = model(src, tgt_in)
print("logits", logits.shape)

# %% [markdown]
# ## 2. Counting the base model
#
# Write the count out. With $d = d_{model}$, every Linear with a bias and every LayerNorm with a gain
# and a bias:
#
# * one attention sub-layer: $W^Q, W^K, W^V, W^O$, each $d\times d$ plus $d$ biases: $4(d^2 + d)$;
# * the feed-forward network: $(d\,d_{ff} + d_{ff}) + (d_{ff}\,d + d)$;
# * one LayerNorm: $2d$;
# * encoder layer: attention + FFN + 2 LayerNorms; decoder layer: 2 attentions + FFN + 3 LayerNorms;
# * embeddings: one shared $V\times d$ matrix (source, target and output, §3.4).

# %% [markdown] ja
# ## 2. ベースモデルを数える
#
# 数え方を書き出します。$d = d_{model}$ とし、どの Linear もバイアスを持ち、どの LayerNorm もゲインとバイアスを持つとします。
#
# * アテンションのサブレイヤ 1 つ：$W^Q, W^K, W^V, W^O$ がそれぞれ $d\times d$ と $d$ 個のバイアスで、$4(d^2 + d)$
# * フィードフォワードネットワーク：$(d\,d_{ff} + d_{ff}) + (d_{ff}\,d + d)$
# * LayerNorm 1 つ：$2d$
# * エンコーダ層：アテンション + FFN + LayerNorm 2 つ。デコーダ層：アテンション 2 つ + FFN + LayerNorm 3 つ
# * 埋め込み：共有された 1 つの $V\times d$ 行列（原言語、目的言語、出力。§3.4）

# %%
def formula(vocab, d, d_ff, n, tied=True):
    attention = 4 * (d * d + d)
    feed_forward = (d * d_ff + d_ff) + (d_ff * d + d)
    layer_norm = 2 * d
    encoder_layer = attention + feed_forward + 2 * layer_norm
    decoder_layer = 2 * attention + feed_forward + 3 * layer_norm
    embeddings = vocab * d if tied else 3 * vocab * d
    return embeddings + n * (encoder_layer + decoder_layer)


base = nn.Transformer(nn.TransformerConfig.base(vocab=37000))
print(base.parameter_report())
by_code, by_formula = base.num_parameters(), formula(37000, 512, 2048, 6)
print(f"\nby the code: {by_code:,}   by the formula: {by_formula:,}")
assert by_code == by_formula
del base

# %% [markdown]
# **63,082,496**, not the 65 M of Table 3. Where could 2 M parameters come from?
#
# * Biases and LayerNorms are not it: all of them together are only
#   $6\,(4608 + 2048 + 6656 + 3072) = 98{,}304$ numbers.
# * Untied embeddings would overshoot: a separate source matrix adds $37000\cdot 512 = 18.9$ M.
# * The vocabulary size is the likely answer. Table 3 lists the size of many variants; subtract our
#   count *without* embeddings and divide by $d_{model}$ to get the number of embedding rows each
#   reported total implies (assuming one shared matrix):

# %% [markdown] ja
# **63,082,496** であり、論文の表 3 の 65 M ではありません。2 M のパラメータはどこから来るのでしょうか。
#
# * バイアスと LayerNorm ではありません。すべて合わせても $6\,(4608 + 2048 + 6656 + 3072) = 98{,}304$ 個の数にすぎません。
# * 埋め込みを共有しないと多すぎます。原言語用の行列を別に持つと $37000\cdot 512 = 18.9$ M 増えます。
# * 語彙の大きさがおそらく答えです。論文の表 3 は多くの変種の大きさを挙げています。そこから本書の数え方で埋め込み*を除いた*パラメータ数を引き、$d_{model}$ で割ると、報告された各合計が示唆する埋め込みの行数が得られます（共有された行列が 1 つだと仮定します）。

# %%
table3 = [  # (row, N, d_model, d_ff, reported parameters in millions)
    ("base", 6, 512, 2048, 65), ("(C) N=2", 2, 512, 2048, 36), ("(C) N=4", 4, 512, 2048, 50),
    ("(C) N=8", 8, 512, 2048, 80), ("(C) d_model=256", 6, 256, 2048, 28),
    ("(C) d_model=1024", 6, 1024, 2048, 168), ("(C) d_ff=1024", 6, 512, 1024, 53),
    ("(C) d_ff=4096", 6, 512, 4096, 90), ("big", 6, 1024, 4096, 213),
]
print(f"{'Table 3 row':18s}{'reported':>9s}{'ours, V=37000':>15s}{'implied V':>11s}")
implied = []
for row, n, d, d_ff, reported in table3:
    without_embeddings = formula(0, d, d_ff, n)
    rows = (reported * 1e6 - without_embeddings) / d
    implied.append(rows)
    print(f"{row:18s}{reported:>8d}M{formula(37000, d, d_ff, n) / 1e6:>14.1f}M{rows / 1e3:>10.1f}k")

# %% [markdown]
# The base model and every variant of row (C) imply one shared matrix of about 40–42 thousand rows
# (the totals are rounded to 1 M, i.e. ±2 k rows at $d_{model} = 512$). So the paper most likely
# counted exactly our parts — one shared embedding, biases, LayerNorms — with the vocabulary its
# byte-pair encoder actually produced, which §5.1 describes only as "about 37000 tokens". The big
# model is the odd one out (≈ 36 k rows), so not every number in the table was computed the same way.
#
# ## 3. What the masks promise
#
# Changing a *future* target token must not change any earlier logit (the decoder's causal mask,
# §3.2.3), and a sentence must get the same logits alone as padded inside a batch (the padding mask).

# %% [markdown] ja
# ベースモデルと (C) 行のすべての変種は、約 4 万–4 万 2 千行の共有された 1 つの行列を示唆します（合計は 1 M 単位に丸められており、これは $d_{model} = 512$ で ±2 k 行に相当します）。したがって論文はおそらく、本書とまったく同じ部品（共有された 1 つの埋め込み、バイアス、LayerNorm）を数えたのでしょう。語彙の大きさには、論文のバイトペアエンコーディングが実際に生成した値を使ったと考えられます。§5.1 はその語彙を「約 37000 トークン」としか書いていません。ビッグモデルだけは外れていて（≈ 36 k 行）、表のすべての数が同じ方法で計算されたわけではないことがわかります。
#
# ## 3. マスクが約束すること
#
# *未来の*目的言語トークンを変えても、それより前のロジットは 1 つも変わってはいけません（デコーダの因果マスク、§3.2.3）。また、ある文は単独でもバッチの中でパディングされていても、同じロジットを得なければなりません（パディングマスク）。

# %%
model64 = nn.Transformer(nn.TransformerConfig.tiny(vocab=20, dropout=0.0)).to(np.float64)
before = model64(src, tgt_in).numpy()
changed = tgt_in.copy()
changed[0, 2] = 19
after = model64(src, changed).numpy()
print("max change at positions 0-1:", np.abs(after[0, :2] - before[0, :2]).max(),
      "  at positions 2-3:", np.abs(after[0, 2:] - before[0, 2:]).max().round(3))
alone = model64(src[1:, :3], tgt_in[1:, :3]).numpy()
print("sentence 2 alone vs padded in the batch:", np.abs(alone[0] - before[1, :3]).max())
assert np.abs(after[0, :2] - before[0, :2]).max() == 0 and np.abs(alone[0] - before[1, :3]).max() < 1e-12

# %% [markdown]
# ## 4. Incremental decoding with a cache
#
# At inference the decoder writes one token at a time, and each new token is fed back. Without a
# cache, step $t$ runs the decoder over all $t$ positions again. But under the causal mask an
# earlier position never changes once computed — so keep each layer's keys and values:
# self-attention appends one position per step, cross-attention projects the encoder output once.
# Step $t$ then costs $O(t)$ (one query against $t$ keys) instead of $O(t^2)$.
#
#     cache = model.init_cache()
#     for t in range(T):
#         logits_t = model.decode_step(ids[:, t], memory, src_mask, cache)   # (B, V)

# %% [markdown] ja
# ## 4. キャッシュを使った逐次デコード
#
# 推論時、デコーダは一度に 1 トークンずつ書き、新しいトークンを入力に戻します。キャッシュがなければ、ステップ $t$ は $t$ 個すべての位置についてデコーダをもう一度実行します。しかし因果マスクの下では、以前の位置は一度計算されれば決して変わりません。そこで各層のキーとバリューを保持しておきます。セルフアテンションではステップごとに 1 つの位置を追加し、クロスアテンションではエンコーダの出力を一度だけ射影します。するとステップ $t$ のコストは $O(t^2)$ ではなく $O(t)$（1 つのクエリと $t$ 個のキー）になります。
#
#     cache = model.init_cache()
#     for t in range(T):
#         logits_t = model.decode_step(ids[:, t], memory, src_mask, cache)   # (B, V)

# %%
memory, src_mask = model64.encode(src)
full = model64.decode(tgt_in, memory, src_mask).numpy()
cache = model64.init_cache()
with mt.no_grad():
    steps = np.stack([model64.decode_step(tgt_in[:, t], memory, src_mask, cache).numpy()
                      for t in range(tgt_in.shape[1])], axis=1)
print("max |cached steps − full pass| =", np.abs(steps - full).max())
assert np.abs(steps - full).max() < 1e-10

# %%
small = nn.Transformer(nn.TransformerConfig.small(vocab=1000)).eval()
source = rng.integers(3, 1000, (4, 30))
length = 24 if QUICK else 120
tokens = rng.integers(3, 1000, (4, length))
with mt.no_grad():
    memory, src_mask = small.encode(source)
    cache = small.init_cache()
    cached, uncached = [], []
    for t in range(length):
        start = time.perf_counter()
        small.decode_step(tokens[:, t], memory, src_mask, cache)
        cached.append(time.perf_counter() - start)
        start = time.perf_counter()
        small.decode(tokens[:, :t + 1], memory, src_mask)                  # re-run the whole prefix
        uncached.append(time.perf_counter() - start)
fig, ax = plt.subplots(figsize=(6, 3.2))
ax.plot(1e3 * np.array(uncached), label="no cache: decode the whole prefix")
ax.plot(1e3 * np.array(cached), label="decode_step with the cache")
ax.set_xlabel("step t")
ax.set_ylabel("ms per step")
ax.set_title("small model, batch 4")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()
print(f"total: {sum(uncached):.2f} s without the cache, {sum(cached):.2f} s with it")

# %% [markdown]
# ## 5. Residual connections: the identity path in the gradient
#
# $y = x + F(x)$ gives $\partial L/\partial x = \partial L/\partial y + (\partial L/\partial y)\,\partial F/\partial x$:
# the gradient from above reaches the input unchanged, as one term of the sum. We stack $N$
# feed-forward sub-layers four ways, send a random gradient of norm 1 into the top, and look at the
# gradient at the bottom: its norm, and its cosine with the gradient we sent (1: passed down unchanged).
# `benchmarks/book/chapter_figures.py` runs the same measurement for the table in chapter 9.

# %% [markdown] ja
# ## 5. 残差接続：勾配の中の恒等写像の経路
#
# $y = x + F(x)$ から $\partial L/\partial x = \partial L/\partial y + (\partial L/\partial y)\,\partial F/\partial x$ が得られます。上から来た勾配は、和の 1 つの項として、そのまま入力に届きます。$N$ 個のフィードフォワードのサブレイヤを 4 通りの方法で積み重ね、一番上にノルム 1 のランダムな勾配を送り込み、一番下での勾配を見ます。見るのはそのノルムと、送り込んだ勾配とのコサイン類似度（1 ならそのまま下へ渡されたこと）です。`benchmarks/book/chapter_figures.py` は、第 9 章の表のために同じように測定します。

# %%
def input_gradient(layer, depth, d=32):
    nn.init.set_seed(0)                                      # the same weights for every variant
    blocks = [(nn.FeedForward(d, 4 * d), nn.LayerNorm(d)) for _ in range(depth)]
    for ffn, norm in blocks:
        for p in list(ffn.parameters()) + list(norm.parameters()):
            p.data = p.data.astype(np.float64)
    r = np.random.default_rng(0)
    x = mt.Tensor(r.standard_normal((64, d)), requires_grad=True)
    h = x
    for ffn, norm in blocks:
        h = layer(ffn, norm, h)
    top = r.standard_normal(h.shape)
    top /= np.linalg.norm(top)
    (h * mt.Tensor(top)).sum().backward()
    g = np.asarray(x.grad)
    return np.linalg.norm(g), (g * top).sum() / np.linalg.norm(g)


variants = {"no residual: LN(F(x))": lambda f, n, h: n(f(h)),
            "post-LN: LN(x + F(x))": lambda f, n, h: n(h + f(h)),
            "pre-LN: x + F(LN(x))": lambda f, n, h: h + f(n(h))}
depths = (2, 6) if QUICK else (2, 6, 12, 24)
for name, layer in variants.items():
    cells = [input_gradient(layer, n) for n in depths]
    print(f"{name:24s}", "  ".join(f"N={n}: ‖g‖ {g:.3g}, cos {c:+.2f}" for n, (g, c) in zip(depths, cells)))

# %% [markdown]
# ## 6. Post-LN and pre-LN at initialisation
#
# The paper normalises after the residual sum (post-LN). The later "pre-LN" variant normalises the
# input of each sub-layer, $x + \mathrm{Dropout}(\mathrm{Sublayer}(\mathrm{LayerNorm}(x)))$, and adds
# one LayerNorm at the top of each stack (`norm_first=True`). Xiong et al. (2020) showed that at
# initialisation post-LN's gradients are largest for the parameters near the output, which is why it
# needs a learning-rate warm-up (eq. 3), while pre-LN's gradients are of similar size in every layer
# and it trains without warm-up. We look at the gradient norm of each decoder layer's FFN weights.

# %% [markdown] ja
# ## 6. 初期化の時点での post-LN と pre-LN
#
# 論文は残差の和の後で正規化します（post-LN）。後に登場した「pre-LN」という変種は、各サブレイヤの入力を正規化して $x + \mathrm{Dropout}(\mathrm{Sublayer}(\mathrm{LayerNorm}(x)))$ とし、各スタックの一番上に LayerNorm を 1 つ加えます（`norm_first=True`）。Xiong ら（2020）は次のことを示しました。初期化の時点での post-LN の勾配は出力に近いパラメータほど大きく、そのために学習率のウォームアップ（式 (3)）が必要になります。一方、pre-LN の勾配はどの層でも同じくらいの大きさで、ウォームアップなしで学習できます。各デコーダ層の FFN の重みの勾配ノルムを見てみましょう。

# %%
def layer_gradient_norms(norm_first, n_layers=6):
    cfg = nn.TransformerConfig.tiny(vocab=50, n_layers=n_layers, norm_first=norm_first, dropout=0.0)
    m = nn.Transformer(cfg)
    s = rng.integers(3, 50, (16, 12))
    t = rng.integers(3, 50, (16, 13))
    loss = F.cross_entropy(m(s, t[:, :-1]).reshape(-1, 50), t[:, 1:].reshape(-1), label_smoothing=0.1)
    loss.backward()
    return [float(np.linalg.norm(layer.feed_forward.linear2.weight.grad)) for layer in m.decoder.layers]


fig, ax = plt.subplots(figsize=(5, 3))
for norm_first, name in ((False, "post-LN (paper)"), (True, "pre-LN")):
    norms = layer_gradient_norms(norm_first)
    ax.plot(range(1, len(norms) + 1), norms, "o-", label=name)
    print(f"{name:16s}", np.round(norms, 4))
ax.set_xlabel("decoder layer")
ax.set_ylabel("‖grad of FFN W₂‖")
ax.set_title("gradients at initialisation")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 7. Gradient check of a whole model
#
# A 2 + 2-layer model with $d_{model} = 8$ and a vocabulary of 11, in float64, dropout off, on the
# training loss of §5.4 (label smoothing 0.1, padding ignored). Checking every parameter would take a
# while; we check four different kinds: the shared embedding (used three times: source, target,
# output), one $W^Q$, one LayerNorm gain, one FFN bias.

# %% [markdown] ja
# ## 7. モデル全体の勾配チェック
#
# $d_{model} = 8$、語彙 11 の 2 + 2 層のモデルを、float64、ドロップアウトなしで、§5.4 の学習の損失（ラベルスムージング 0.1、パディングは無視）についてチェックします。すべてのパラメータをチェックするとしばらく時間がかかるので、種類の異なる 4 つを確かめます。共有された埋め込み（原言語、目的言語、出力の 3 か所で使われます）、$W^Q$ の 1 つ、LayerNorm のゲインの 1 つ、FFN のバイアスの 1 つです。

# %%
tiny = nn.Transformer(nn.TransformerConfig.tiny(11, d_model=8, n_heads=2, d_ff=16, dropout=0.0)).to(np.float64)
src = np.array([[4, 5, 6, 7, 8], [9, 3, 4, 0, 0]])
tgt_in = np.array([[1, 5, 7, 9], [1, 6, 8, 0]])
tgt_out = np.array([[5, 7, 9, 2], [6, 8, 2, 0]])


def loss_fn(*params):
    logits = tiny(src, tgt_in)
    return F.cross_entropy(logits.reshape(-1, 11), tgt_out.reshape(-1), label_smoothing=0.1, ignore_index=0)


checked = [tiny.embedding.weight, tiny.decoder.layers[1].self_attn.w_q.weight,
           tiny.encoder.layers[0].norm2.weight, tiny.decoder.layers[0].feed_forward.linear1.bias]
assert mt.gradcheck(loss_fn, checked)
print("whole-model gradcheck passed for", sum(p.size for p in checked), "parameters")

# %% [markdown]
# ## Exercises
#
# {{exercises}}

# %% [markdown] ja
# ## 演習
#
# {{exercises}}
