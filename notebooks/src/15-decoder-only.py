# %% [markdown]
# # Chapter 15 — The decoder alone: a language model
#
# Drop the encoder and the encoder–decoder attention from the translator, and what is left predicts
# each token from the ones before it: a language model. In this notebook we
# 1. build `nn.LanguageModel` from the translator's parts and check that **token $t$ changes no logit
#    before $t$**,
# 2. train it with teacher forcing on a shifted text and report nats per token, perplexity and
#    **bits per character** on a held-out tail,
# 3. draw the distributions that **temperature, top-k and top-p** cut, and sample with each,
# 4. generate with and without the **KV cache** and get the same tokens,
# 5. check that with **RoPE** a score depends only on the distance between query and key,
# 6. end with the gradient checks of the whole model and of RoPE in float64.

# %% [markdown] ja
# # 第 15 章 — デコーダだけで：言語モデル
#
# 翻訳器からエンコーダとエンコーダ・デコーダアテンションを取り除くと、残った部分は各トークンをそれより前のトークンから予測します。これが言語モデルです。このノートブックでは次のことを行います。
# 1. 翻訳器の部品から `nn.LanguageModel` を組み立て、**トークン $t$ を変えても $t$ より前のロジットは変わらない**ことを確かめます。
# 2. 1 つずらしたテキストで教師強制によって学習し、取り分けておいた末尾で、トークンあたりのナット、パープレキシティ、**文字あたりのビット数**を報告します。
# 3. **温度、top-k、top-p** が切り取る分布を描き、それぞれでサンプリングします。
# 4. **KV キャッシュ**ありとなしで生成し、同じトークンが得られることを確かめます。
# 5. **RoPE** では、スコアがクエリとキーの距離だけで決まることを確かめます。
# 6. 最後に、モデル全体と RoPE の勾配を float64 で確認します。

# %%
import math
import matplotlib.pyplot as plt
import numpy as np

import minitransformer as mt
import minitransformer.nn as nn
from minitransformer.functional.rotary import rotary
from minitransformer.generate import generate, next_token_probabilities, window_start
from minitransformer.training.lm import (CharTokenizer, bits_per_character, builtin_text, evaluate, sample_batch,
                                         split_text)

from minitransformer.notebook_support import QUICK
rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. The model from the translator's parts
#
# Each block is an encoder layer — self-attention, then the FFN — under the causal mask. Pre-LN blocks
# and a final LayerNorm; the output projection is the embedding matrix, transposed (§3.4).

# %% [markdown] ja
# ## 1. 翻訳器の部品から作るモデル
#
# 各ブロックは、因果マスクをかけたエンコーダ層（セルフアテンションのあとに FFN）です。Pre-LN のブロックと最後の LayerNorm を使い、出力の射影は埋め込み行列を転置したものです（§3.4）。

# %%
tiny = nn.LanguageModel(nn.LanguageModelConfig(vocab_size=20, d_model=16, n_heads=2, d_ff=32, n_layers=2,
                                               context=16)).to(np.float64)
print(tiny.parameter_report())
ids = rng.integers(0, 20, size=(1, 10))
before = tiny(ids).data
for t in (0, 4, 9):
    changed = ids.copy()
    changed[0, t] = (changed[0, t] + 1) % 20
    after = tiny(changed).data
    earlier = np.abs(after[0, :t] - before[0, :t]).max() if t else 0.0
    later = np.abs(after[0, t:] - before[0, t:]).max()
    print(f"token {t} changed: largest change before it {earlier:.1e}, from it on {later:.1e}")
    assert earlier == 0 and later > 0

# %% [markdown]
# ## 2. Teacher forcing on a shifted text
#
# A window of $n + 1$ tokens gives $n$ predictions at once: the first $n$ tokens go in, the same tokens
# shifted by one are the targets. The text here is the built-in corpus's English side, one sentence
# a line, in characters.

# %% [markdown] ja
# ## 2. 1 つずらしたテキストでの教師強制
#
# $n + 1$ 個のトークンのウィンドウから、$n$ 個の予測が一度に得られます。最初の $n$ 個のトークンを入力し、同じトークンを 1 つずらしたものを目標にします。ここでのテキストは組み込みコーパスの英語側で、1 行に 1 文、文字単位です。

# %%
text = builtin_text(1500 if QUICK else 5000)
tokenizer = CharTokenizer(text)
context = 32
split = split_text(text, tokenizer, context)
inputs, targets = sample_batch(split.train, 2, context, rng)
print(f"{len(text):,} characters, {len(tokenizer)} distinct; {len(split.train):,} to train on, "
      f"{len(split.val):,} held out")
print("in:     ", repr(tokenizer.decode(inputs[0])))
print("target: ", repr(tokenizer.decode(targets[0])))

# %%
config = nn.LanguageModelConfig(vocab_size=len(tokenizer), d_model=64, n_heads=4, d_ff=256, n_layers=2,
                                context=context)
model = nn.LanguageModel(config)
optimizer = mt.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.99), eps=1e-8)
steps = 150 if QUICK else 1500
history = []
for step in range(steps):
    x, y = sample_batch(split.train, 16, context, rng)
    optimizer.zero_grad()
    loss = model.loss(x, y)
    loss.backward()
    mt.optim.clip_grad_norm(model.parameters(), 1.0)
    optimizer.step()
    history.append(loss.item())
val = evaluate(model, split.val, context, max_windows=100)
print(f"uniform guess: {math.log(len(tokenizer)):.3f} nats/token")
print(f"held-out tail: {val:.3f} nats/token, perplexity {math.exp(val):.2f}, "
      f"{bits_per_character(val, split):.3f} bits/character")
assert val < math.log(len(tokenizer))

fig, ax = plt.subplots(figsize=(6, 3))
ax.plot(history, lw=0.8)
ax.set_xlabel("step")
ax.set_ylabel("training loss (nats/token)")
plt.show()

# %% [markdown]
# ## 3. Temperature, top-k and top-p
#
# The model's next-character distribution after a prompt, and what each control leaves of it:
# temperature reshapes it, top-k keeps the $k$ most likely, top-p keeps the smallest set whose
# probability reaches $p$.

# %% [markdown] ja
# ## 3. 温度、top-k、top-p
#
# プロンプトのあとの次の文字についてのモデルの分布と、各設定がそこから残すものです。温度は分布の形を変え、top-k は確率の高い $k$ 個を残し、top-p は確率の合計が $p$ に達する最小の集合を残します。

# %%
prompt = "the "
with mt.no_grad():
    logits = model(np.asarray([tokenizer.encode(prompt)])).data[0, -1]
cuts = {"τ = 1": {}, "τ = 0.5": dict(temperature=0.5), "τ = 2": dict(temperature=2.0),
        "top-k 5": dict(top_k=5), "top-p 0.9": dict(top_p=0.9)}
order = np.argsort(-logits)[:20]
fig, axes = plt.subplots(1, len(cuts), figsize=(14, 2.8), sharey=True)
for ax, (name, settings) in zip(axes, cuts.items()):
    probs = next_token_probabilities(logits, **settings)
    ax.bar(range(len(order)), probs[order])
    ax.set_xticks(range(len(order)), [repr(tokenizer.chars[i])[1:-1] or "␣" for i in order], fontsize=7)
    ax.set_title(f"{name}: {int((probs > 0).sum())} kept")
plt.show()
for name, settings in cuts.items():
    sample = tokenizer.decode(generate(model, tokenizer.encode(prompt), 60, seed=1, **settings))
    print(f"{name:>10}: {prompt + sample!r}")

# %% [markdown]
# ## 4. The KV cache
#
# With the cache, each step runs the model on one new position and reads the earlier keys and values;
# without it, on the whole window again. The tokens, and the logits to float rounding, are the same.

# %% [markdown] ja
# ## 4. KV キャッシュ
#
# キャッシュを使うと、各ステップはモデルを新しい 1 つの位置だけで動かし、それより前のキーとバリューを読み出します。使わないと、ウィンドウ全体でもう一度動かします。トークンは同じで、ロジットも浮動小数点の丸めの範囲で同じです。

# %%
length = 40 if QUICK else 200
cached, logits_cached = generate(model, tokenizer.encode(prompt), length, top_p=0.9, seed=3, return_logits=True)
plain, logits_plain = generate(model, tokenizer.encode(prompt), length, top_p=0.9, seed=3, use_cache=False,
                               return_logits=True)
print("same tokens:", cached == plain, "| largest logit difference:", f"{np.abs(logits_cached - logits_plain).max():.1e}")
assert cached == plain
lengths = range(len(prompt), len(prompt) + length)          # the text's length before each new token
starts = [window_start(n, context) for n in lengths]         # where the model's window begins
positions_plain = sum(n - s for n, s in zip(lengths, starts))
positions_cached = sum(n - s if i == 0 or s != starts[i - 1] else 1 for i, (n, s) in enumerate(zip(lengths, starts)))
print(f"positions run through the model: {positions_cached} with the cache, {positions_plain} without")

# %% [markdown]
# ## 5. RoPE: scores that depend on the distance only
#
# Turn one query vector and one key vector by the angles of their positions $m$ and $n$: the score
# $\langle R(m)q, R(n)k\rangle$ is constant along each diagonal $n - m$.

# %% [markdown] ja
# ## 5. RoPE：距離だけで決まるスコア
#
# 1 つのクエリベクトルと 1 つのキーベクトルを、その位置 $m$ と $n$ の角度で回します。スコア $\langle R(m)q, R(n)k\rangle$ は、各対角線 $n - m$ に沿って一定です。

# %%
q, k = rng.standard_normal(16), rng.standard_normal(16)
positions = 12
turned_q = rotary(mt.Tensor(np.tile(q, (positions, 1)))).data          # row m: q at position m
turned_k = rotary(mt.Tensor(np.tile(k, (positions, 1)))).data
scores = turned_q @ turned_k.T                                          # (m, n)
diagonals = [np.ptp(np.diagonal(scores, offset)) for offset in range(-positions + 1, positions)]
print(f"largest spread along a diagonal: {max(diagonals):.1e}")
assert max(diagonals) < 1e-10
fig, ax = plt.subplots(figsize=(3.4, 3))
ax.imshow(scores, cmap="coolwarm")
ax.set_xlabel("key position n")
ax.set_ylabel("query position m")
plt.show()

# %% [markdown]
# ## 6. Checking it
#
# The gradients of the whole model (learned positions and RoPE) and of the rotation itself, against
# central differences in float64.

# %% [markdown] ja
# ## 6. 確認
#
# モデル全体（学習される位置と RoPE）と回転そのものの勾配を、float64 の中心差分と比べます。

# %%
for positional in ("learned", "rope"):
    small = nn.LanguageModel(nn.LanguageModelConfig(vocab_size=11, d_model=8, n_heads=2, d_ff=16, n_layers=2,
                                                    context=8, positional=positional)).to(np.float64)
    window = rng.integers(0, 11, size=(2, 7))
    print(f"whole model, {positional} positions:",
          mt.gradcheck(lambda *p: small.loss(window[:, :-1], window[:, 1:]), small.parameters()))
x = mt.Tensor(rng.standard_normal((2, 2, 5, 6)), requires_grad=True)
print("RoPE:", mt.gradcheck(lambda x: rotary(x, offset=3), [x]))
