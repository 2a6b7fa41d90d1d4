# %% [markdown]
# # Chapter 10 — Training (§5.3, §5.4, eq. 3)
#
# Chapters 1–9 built a model that computes logits and their gradients. This notebook makes it learn:
# 1. Adam, written out by hand and compared with `mt.optim.Adam` (§5.3: β1 = 0.9, β2 = 0.98, ε = 1e-9),
# 2. the learning-rate schedule of eq. 3, warm-up then decay, for several $d_{model}$ and warm-ups,
# 3. gradient clipping by the global norm,
# 4. batches by tokens instead of by sentences (§5.1), and how much padding that saves,
# 5. a **copy task**: before any translation, the model must learn to copy its input — to ~100 %,
# 6. gradient checks of the training loss on a tiny model.

# %% [markdown] ja
# # 第 10 章 — 学習（§5.3、§5.4、式 (3)）
#
# 第 1 章から第 9 章までで、ロジットとその勾配を計算するモデルができました。このノートブックでは、そのモデルを学習させます。
# 1. Adam を手で書き下し、`mt.optim.Adam` と比べます（§5.3：β1 = 0.9、β2 = 0.98、ε = 1e-9）。
# 2. 式 (3) の学習率スケジュール（ウォームアップのあと減衰）を、いくつかの $d_{model}$ とウォームアップで描きます。
# 3. 全体ノルムによる勾配のクリッピングを見ます。
# 4. 文の数ではなくトークン数で区切るバッチ（§5.1）と、それで節約できるパディングの量を調べます。
# 5. **コピータスク**：翻訳の前段階として、モデルは入力のコピーをほぼ 100 % まで学べなければなりません。
# 6. 小さなモデルで学習損失の勾配チェックをします。

# %%
import math
import time

import matplotlib.pyplot as plt
import numpy as np

import minitransformer as mt
import minitransformer.functional as F
from minitransformer.data.batching import make_batches
from minitransformer.data.grammar import make_builtin_corpus
from minitransformer.decode import greedy_decode
from minitransformer.nn.transformer import Transformer, TransformerConfig
from minitransformer.optim import Adam, NoamSchedule, clip_grad_norm

from minitransformer.notebook_support import QUICK, save_figure
rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. Adam by hand
#
# Adam keeps two running averages per weight: of the gradient $g$ (the first moment $m$) and of its
# square (the second moment $v$). Both start at zero, so early on they are biased towards zero; dividing
# by $1-\beta^t$ removes that bias:
#
# $$m_t = \beta_1 m_{t-1} + (1-\beta_1) g_t,\qquad v_t = \beta_2 v_{t-1} + (1-\beta_2) g_t^2,$$
# $$\theta_t = \theta_{t-1} - \mathrm{lr}\cdot\frac{m_t/(1-\beta_1^t)}{\sqrt{v_t/(1-\beta_2^t)} + \epsilon}.$$
#
# The step is about lr in size whatever the scale of the gradient: Adam divides the gradient by its own
# running RMS. The paper's β2 = 0.98 (instead of the usual 0.999) makes $v$ forget faster.

# %% [markdown] ja
# ## 1. 手で書く Adam
#
# Adam は重みごとに 2 つの移動平均を持ちます。勾配 $g$ の移動平均（1 次モーメント $m$）と、その 2 乗の移動平均（2 次モーメント $v$）です。どちらもゼロから始まるので、最初のうちはゼロの側に偏っています。$1-\beta^t$ で割ると、その偏りが取り除けます。
#
# $$m_t = \beta_1 m_{t-1} + (1-\beta_1) g_t,\qquad v_t = \beta_2 v_{t-1} + (1-\beta_2) g_t^2,$$
# $$\theta_t = \theta_{t-1} - \mathrm{lr}\cdot\frac{m_t/(1-\beta_1^t)}{\sqrt{v_t/(1-\beta_2^t)} + \epsilon}.$$
#
# 勾配のスケールがどうであれ、1 ステップの大きさはおよそ lr になります。Adam は勾配を、その勾配自身の移動 RMS で割るからです。論文の β2 = 0.98（よく使われる 0.999 の代わり）では、$v$ が早く過去を忘れます。

# %%
theta0 = rng.standard_normal(4)
grads = [rng.standard_normal(4) for _ in range(5)]
lr, (b1, b2), eps = 0.01, (0.9, 0.98), 1e-9

theta, m, v = theta0.copy(), np.zeros(4), np.zeros(4)
for t, g in enumerate(grads, start=1):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    theta -= lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)

p = mt.Tensor(theta0.copy(), requires_grad=True)
adam = Adam([p], lr=lr, betas=(b1, b2), eps=eps)
for g in grads:
    p.grad = g.copy()
    adam.step()
print("by hand :", theta)
print("mt.optim:", p.data)
assert np.allclose(theta, p.data, rtol=1e-12)

# %% [markdown]
# ## 2. The schedule of eq. 3
#
# $$\mathrm{lrate} = d_{model}^{-0.5}\cdot\min(\mathrm{step}^{-0.5},\ \mathrm{step}\cdot\mathrm{warmup}^{-1.5})$$
#
# The two branches meet at step = warmup: before it the rate grows linearly, after it it decays as
# $1/\sqrt{\mathrm{step}}$. The peak is $(d_{model}\cdot\mathrm{warmup})^{-0.5}$, 7.0e-4 for the base model
# with warmup 4000. Wider models get smaller rates.

# %% [markdown] ja
# ## 2. 式 (3) のスケジュール
#
# $$\mathrm{lrate} = d_{model}^{-0.5}\cdot\min(\mathrm{step}^{-0.5},\ \mathrm{step}\cdot\mathrm{warmup}^{-1.5})$$
#
# 2 つの枝は step = warmup で交わります。それより前は学習率が線形に増え、それより後は $1/\sqrt{\mathrm{step}}$ に比例して減衰します。最大値は $(d_{model}\cdot\mathrm{warmup})^{-0.5}$ で、warmup 4000 のベースモデルでは 7.0e-4 です。幅の広いモデルほど学習率は小さくなります。

# %%
def rates(d_model, warmup, factor=1.0, steps=20000):
    schedule = NoamSchedule(mt.optim.SGD([mt.Tensor(np.zeros(1), requires_grad=True)]), d_model, warmup, factor)
    return [schedule.step() for _ in range(steps)]


curves = [(f"d_model={d}, warmup={w}", rates(d, w)) for d, w in [(512, 4000), (512, 8000), (256, 4000), (1024, 4000)]]
for label, values in curves:
    peak = int(np.argmax(values)) + 1
    print(f"{label:<28} peak at step {peak:>5}: {max(values):.2e}")
assert int(np.argmax(curves[0][1])) + 1 == 4000
assert math.isclose(max(curves[0][1]), (512 * 4000) ** -0.5, rel_tol=1e-12)

fig, ax = plt.subplots(figsize=(6.5, 3.4))
for label, values in curves:
    ax.plot(np.arange(1, len(values) + 1), values, label=label)
ax.set_xlabel("step")
ax.set_ylabel("learning rate")
ax.set_title("eq. (3): linear warm-up, then 1/sqrt(step)")
ax.legend(fontsize=8)
ax.grid(alpha=0.3)
fig.tight_layout()
save_figure(fig, "10-noam-schedule.png", dpi=80, bbox_inches=None)
plt.show()

# %% [markdown]
# ### Cooling down a run that knows its end
#
# Eq. 3 never reaches zero. The `medium` preset of chapter 11 ($d_{model}$ 256, warm-up 800) is still at a
# third of its peak after the 7,500 steps an hour of two CPU cores buys. `--cooldown F` multiplies the rate
# by `cooldown_factor(progress, F)`: 1 until the last fraction F of the run, then a straight line to 0.

# %% [markdown] ja
# ### 終わりを知っている学習のクールダウン
#
# 式 (3) はゼロに届きません。第 11 章の `medium` プリセット（$d_{model}$ 256、ウォームアップ 800）は、2 つの CPU コアで 1 時間に進める 7,500 ステップの後でも、最大値の 3 分の 1 にいます。`--cooldown F` は学習率に `cooldown_factor(progress, F)` を掛けます。係数は学習の最後の割合 F までは 1 で、そこから 0 まで直線で下がります。

# %%
from minitransformer.optim import cooldown_factor

steps = 7500
eq_3 = rates(256, 800, steps=steps)
cooled = [rate * cooldown_factor((k - 1) / steps, 0.2) for k, rate in enumerate(eq_3, start=1)]
print(f"peak {max(eq_3):.2e}; at the last step: eq. 3 {eq_3[-1]:.2e}, cooled down {cooled[-1]:.2e}")
assert cooled[:6000] == eq_3[:6000]                  # the first four fifths are eq. 3 itself
assert cooled[-1] < eq_3[-1] / 1000                  # the last step takes almost no step at all

fig, ax = plt.subplots(figsize=(6.5, 3.0))
ax.plot(np.arange(1, steps + 1), eq_3, label="eq. (3)")
ax.plot(np.arange(1, steps + 1), cooled, label="eq. (3), last fifth cooled down")
ax.set_xlabel("step")
ax.set_ylabel("learning rate")
ax.legend(fontsize=8)
ax.grid(alpha=0.3)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 3. Clipping by the global norm
#
# One bad batch can produce a huge gradient. Clipping rescales *all* gradients together, so that their
# joint L2 norm is at most `max_norm`; the direction of the update is unchanged.

# %% [markdown] ja
# ## 3. 全体ノルムによるクリッピング
#
# 1 つの悪いバッチが巨大な勾配を生むことがあります。クリッピングは*すべての*勾配をまとめて縮め、それらを合わせた L2 ノルムを `max_norm` 以下に抑えます。更新の向きは変わりません。

# %%
a = mt.Tensor(np.zeros(2), requires_grad=True)
b = mt.Tensor(np.zeros(1), requires_grad=True)
a.grad, b.grad = np.array([30.0, 0.0]), np.array([40.0])
norm = clip_grad_norm([a, b], max_norm=1.0)
print("norm before:", norm, " after:", math.sqrt((a.grad ** 2).sum() + (b.grad ** 2).sum()))
print("gradients:", a.grad, b.grad, "(same direction, 3:4)")

# %% [markdown]
# ## 4. Batches by tokens
#
# §5.1: "Sentence pairs were batched together by approximate sequence length. Each training batch
# contained a set of sentence pairs containing approximately 25000 source tokens and 25000 target
# tokens." A batch is a rectangle: every row is padded to the longest sentence in it. Random batches
# waste much of the rectangle on padding; batches of similar lengths waste little, and a budget in
# *tokens* keeps the work per step about constant (many short sentences, or few long ones).

# %% [markdown] ja
# ## 4. トークン数で区切るバッチ
#
# §5.1 には「文対は、おおよその系列長ごとにまとめてバッチにした。各学習バッチには、原言語側約 25000 トークンと目的言語側約 25000 トークンを含む文対の集合が入っていた」とあります。バッチは長方形です。どの行も、その中の最長の文の長さまでパディングで埋められます。ランダムなバッチでは長方形の多くがパディングに費やされますが、長さの近い文を集めたバッチではわずかで済みます。さらに予算を*トークン数*で決めると、1 ステップあたりの仕事量がほぼ一定に保てます（短い文がたくさんか、長い文が少しか）。

# %%
corpus = make_builtin_corpus(n_train=2000 if QUICK else 20000, n_dev=10, n_test=10, n_heldout=10)
words = sorted({w for en, ja in corpus.train for w in (en + " " + ja).split()})
word_id = {w: i + 4 for i, w in enumerate(words)}
examples = [([word_id[w] for w in en.split()], [word_id[w] for w in ja.split()]) for en, ja in corpus.train]


def padding_share(batches):
    real = sum(b.n_src_tokens for b in batches)
    return 1 - real / sum(b.src.size for b in batches)


by_length = make_batches(examples, max_tokens=1000, pad_id=0, shuffle=True, seed=0)
order = rng.permutation(len(examples))
random_batches = [make_batches([examples[i] for i in order[j:j + len(examples) // len(by_length)]],
                               max_tokens=10 ** 9, pad_id=0, shuffle=False)[0]
                  for j in range(0, len(order), len(examples) // len(by_length))]
print(f"{len(by_length)} length-bucketed batches: {100 * padding_share(by_length):.1f}% of the source slots are padding")
print(f"{len(random_batches)} random batches:         {100 * padding_share(random_batches):.1f}% padding")
sizes = [(len(b), b.src.shape[1]) for b in by_length[:5]]
print("first batches (sentences, padded length):", sizes)
assert padding_share(by_length) < padding_share(random_batches)

# %% [markdown]
# ## 5. A copy task first
#
# Before translating, make sure the whole machine — model, loss, backward, Adam, schedule, decoding —
# can learn *something*. The simplest task with the right shape: the output is the input. Random
# sequences of 8 symbols from 10; the decoder must reproduce them and then emit eos. A model that fails
# this has a bug, not a lack of data.

# %% [markdown] ja
# ## 5. まずはコピータスク
#
# 翻訳を始める前に、仕組み全体（モデル、損失、逆伝播、Adam、スケジュール、デコード）が*何か*を学習できることを確かめます。正しい形をした最も簡単なタスクは、出力が入力そのものであるタスクです。10 種類の記号からなる長さ 8 のランダムな系列を使い、デコーダはそれを再現してから eos を出さなければなりません。これに失敗するモデルには、データ不足ではなくバグがあります。

# %%
V, L = 13, 8                      # ids 0-2: pad, bos, eos; symbols 3..12
BOS, EOS = 1, 2
config = TransformerConfig(src_vocab_size=V, tgt_vocab_size=V, d_model=32, n_heads=2, d_ff=64, n_layers=1,
                           dropout=0.0, max_len=32, seed=0)
model = Transformer(config)
optimizer = Adam(model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9)
schedule = NoamSchedule(optimizer, d_model=32, warmup=100, factor=1.0)
data_rng = np.random.default_rng(1)


def copy_batch(n):
    x = data_rng.integers(3, V, size=(n, L))                                   # (n, L)
    tgt_in = np.concatenate([np.full((n, 1), BOS), x], axis=1)                 # (n, L + 1): bos x
    tgt_out = np.concatenate([x, np.full((n, 1), EOS)], axis=1)                # (n, L + 1): x eos
    return x, tgt_in, tgt_out


def copy_accuracy(n=200):
    model.eval()
    x, _, _ = copy_batch(n)
    outputs = greedy_decode(model, x, BOS, EOS, max_len=L + 1)
    model.train()
    return float(np.mean([np.mean(np.array((out + [0] * L)[:L]) == row) for out, row in zip(outputs, x)]))

# %%
steps = 200 if QUICK else 600
losses, accuracies = [], []
started = time.time()
for step in range(1, steps + 1):
    src, tgt_in, tgt_out = copy_batch(64)
    loss = F.cross_entropy(model(src, tgt_in).reshape(-1, V), tgt_out.reshape(-1), ignore_index=0)
    optimizer.zero_grad()
    loss.backward()
    clip_grad_norm(optimizer.params, 1.0)
    schedule.step()
    optimizer.step()
    losses.append(loss.item())
    if step % 50 == 0:
        accuracies.append((step, copy_accuracy()))
        print(f"step {step:4d}  loss {np.mean(losses[-50:]):.3f}  copy accuracy {accuracies[-1][1]:.3f}")
print(f"{steps} steps in {time.time() - started:.1f} s")
final_accuracy = copy_accuracy(500)
print("token accuracy on 500 new sequences:", final_accuracy)
assert final_accuracy >= 0.95, final_accuracy

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3))
ax1.plot(losses)
ax1.set_yscale("log")
ax1.set_xlabel("step")
ax1.set_title("copy task: training loss")
ax2.plot(*zip(*accuracies), marker="o")
ax2.set_xlabel("step")
ax2.set_ylim(0, 1.02)
ax2.set_title("token accuracy (greedy decoding)")
fig.tight_layout()
plt.show()

x, _, _ = copy_batch(1)
print("input :", x[0].tolist())
print("output:", greedy_decode(model.eval(), x, BOS, EOS, max_len=L + 1)[0])

# %% [markdown]
# ### Why the warm-up?
#
# With post-LN (the paper's layout, chapter 9) the gradients of the top layers are large at
# initialisation; a full-size step at once can throw the model into a region it does not recover from.
# Compare the same copy task with the schedule and with its peak rate from step 1 (quick mode runs 60
# steps of each, the full notebook 300).

# %% [markdown] ja
# ### なぜウォームアップするのか
#
# post-LN（論文の配置、第 9 章）では、初期化の時点で上の層の勾配が大きくなっています。いきなり最大の大きさのステップを取ると、モデルが二度と戻ってこられない領域に放り出されることがあります。同じコピータスクを、スケジュールありの場合と、最初のステップから最大の学習率を使う場合とで比べます（クイックモードではそれぞれ 60 ステップ、フルモードでは 300 ステップです）。

# %%
def warmup_run(constant_lr, steps):
    """Loss per step of the copy task on a 3-layer post-LN model: eq. 3 (constant_lr None) or a constant rate."""
    m = Transformer(TransformerConfig(src_vocab_size=V, tgt_vocab_size=V, d_model=64, n_heads=4, d_ff=128,
                                      n_layers=3, dropout=0.0, max_len=32, seed=0))
    opt = Adam(m.parameters(), lr=constant_lr or 0.0)
    sched = None if constant_lr else NoamSchedule(opt, d_model=64, warmup=200, factor=4.0)
    history = []
    for _ in range(steps):
        src, tgt_in, tgt_out = copy_batch(64)
        loss = F.cross_entropy(m(src, tgt_in).reshape(-1, V), tgt_out.reshape(-1), ignore_index=0)
        opt.zero_grad()
        loss.backward()
        if sched:
            sched.step()
        opt.step()
        history.append(loss.item())
    return history


# %%
warmup_steps = 60 if QUICK else 300
peak = 4.0 * (64 * 200) ** -0.5
with_warmup, constant = warmup_run(None, warmup_steps), warmup_run(peak, warmup_steps)
fig, ax = plt.subplots(figsize=(6, 3))
ax.plot(with_warmup, label="warm-up 200 steps (eq. 3, factor 4)")
ax.plot(constant, label=f"constant {peak:.1e} from step 1")
ax.set_yscale("log")
ax.set_xlabel("step")
ax.set_ylabel("loss")
ax.legend()
fig.tight_layout()
plt.show()
print(f"mean loss of the last 20 steps: with warm-up {np.mean(with_warmup[-20:]):.3f}, "
      f"constant rate {np.mean(constant[-20:]):.3f}")

# %% [markdown]
# ## 6. Gradient checks
#
# The training loss of §5.4 — cross-entropy against the label-smoothed target distribution, padding
# ignored — through a whole tiny model, in float64 with dropout off. Checked with respect to the shared
# embedding (source, target and output projection at once) and the FFN weights of the decoder.

# %% [markdown] ja
# ## 6. 勾配チェック
#
# §5.4 の学習損失（ラベルスムージングした正解分布に対する交差エントロピーで、パディングは無視）を、小さなモデル全体を通して、ドロップアウトを切った float64 で調べます。共有された埋め込み（原言語側、目的言語側、出力の射影を一度に）と、デコーダのフィードフォワードネットワークの重みについて勾配をチェックします。

# %%
tiny = Transformer(TransformerConfig(src_vocab_size=9, tgt_vocab_size=9, d_model=4, n_heads=2, d_ff=8,
                                     n_layers=1, dropout=0.0, max_len=8)).to(np.float64)
src, tgt_in, tgt_out = np.array([[3, 4, 5, 0]]), np.array([[1, 6, 7]]), np.array([[6, 7, 2]])


def training_loss(*parameters):
    logits = tiny(src, tgt_in)                                                  # (1, 3, 9)
    return F.cross_entropy(logits.reshape(-1, 9), tgt_out.reshape(-1), label_smoothing=0.1, ignore_index=0)


checked = [tiny.embedding.weight, tiny.decoder.layers[0].feed_forward.linear1.weight]
assert mt.gradcheck(training_loss, checked)
print("gradcheck of the label-smoothed loss through the model: passed for",
      sum(p.size for p in checked), "parameters")

logits = mt.Tensor(rng.standard_normal((5, 7)), requires_grad=True)
targets = np.array([1, 4, 0, 6, 2])
assert mt.gradcheck(lambda z: F.cross_entropy(z, targets, label_smoothing=0.1, ignore_index=0), [logits])
print("gradcheck of the label-smoothed loss w.r.t. the logits: passed")

# %% [markdown]
# The trainer computes that loss with the output projection and the loss as one Function,
# `model.loss(src, tgt_in, tgt_out, label_smoothing)` (`F.linear_cross_entropy`), which never keeps an
# (N, V) array after forward (the chapter shows how, and `tests/functional/test_linear_loss.py` proves it equal
# to the two-step loss, bit for bit). Like every Function, it passes its own gradient check, with respect
# to the input, the weight and the bias:

# %% [markdown] ja
# 学習のプログラムはこの損失を、出力の射影と損失を 1 つにした Function で計算します。呼び出すのは `model.loss(src, tgt_in, tgt_out, label_smoothing)`（`F.linear_cross_entropy`）です。これは順伝播のあとに (N, V) の配列を残しません。その仕組みは章で説明し、2 段階で計算する損失とビット単位で等しいことは `tests/functional/test_linear_loss.py` が確かめます。ほかの Function と同じく、入力、重み、バイアスについて、それ自身の勾配チェックに通ります。

# %%
x, w, b = (mt.Tensor(rng.standard_normal(shape), requires_grad=True) for shape in ((2, 3, 4), (4, 7), (7,)))
ids = np.array([[1, 4, 0], [6, 2, 0]])
assert mt.gradcheck(lambda x, w, b: F.linear_cross_entropy(x, w, ids, b, label_smoothing=0.1, ignore_index=0),
                    [x, w, b])
print("gradcheck of linear_cross_entropy w.r.t. x, W and b: passed")

# %% [markdown]
# ## Exercises
#
# {{exercises}}

# %% [markdown] ja
# ## 演習
#
# {{exercises}}
