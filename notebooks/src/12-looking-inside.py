# %% [markdown]
# # Chapter 12 — Looking inside, and the paper's results (§6.2, Tables 2 and 3)
#
# The built-in corpus writes both sentences of a pair from one meaning, so it knows which English
# word became which Japanese word. That turns "this head aligns words" into a number. In this notebook we
# 1. read the gold word alignment of a pair and map it onto subwords,
# 2. score hand-made attention matrices (a perfect diagonal, uniform attention),
# 3. draw every head of a trained model for one sentence: encoder, decoder, cross,
# 4. score every cross-attention head against the gold alignment, and the heads' average,
# 5. ask whether encoder heads find a verb's object better than a fixed offset does,
# 6. run Table 3 at small scale (quick mode here; the full table is in `benchmarks/quality/results/`),
# 7. count FLOPs by formula, next to the paper's Table 2,
# 8. gradient-check the attention layer whose weights we read, with its weights kept.

# %% [markdown] ja
# # 第 12 章 — モデルの内部を見る、そして論文の結果（§6.2、論文の表 2 と表 3）
#
# 組み込みのコーパスは、1 つの意味から対の両方の文を書き出すので、どの英単語がどの日本語の単語になったかを知っています。そのおかげで、「このヘッドは単語をアラインしている」という主張を数値にできます。このノートブックでは次のことを行います。
# 1. 対の正解の単語アライメントを読み、それをサブワードに写します。
# 2. 手で作ったアテンション行列（完全な対角行列、一様なアテンション）を採点します。
# 3. 学習済みモデルのすべてのヘッドを、1 つの文について描きます（エンコーダ、デコーダ、クロスアテンション）。
# 4. クロスアテンションのすべてのヘッドとヘッドの平均を、正解アライメントに照らして採点します。
# 5. エンコーダのヘッドが、固定オフセットよりもうまく動詞の目的語を見つけるかを調べます。
# 6. 小さな規模で論文の表 3 を実行します（ここではクイックモードです。表全体は `benchmarks/quality/results/` にあります）。
# 7. FLOPs を式で数えて、論文の表 2 と並べます。
# 8. 重みを読み出すのに使うアテンション層を、重みを保持したまま勾配チェックします。

# %%
import json
import sys
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import minitransformer as mt
from minitransformer.data.grammar.alignment import word_spans
from minitransformer.data.run_data import load_data
from minitransformer.flops import encoder_layer_flops, training_flops
from minitransformer.alignment_scores import (AlignmentTally, alignment_accuracy, alignment_error_rate, attention_mass,
                                              offset_baseline)
from minitransformer.attention_maps import attention_maps
from minitransformer.nn import init
from minitransformer.nn.attention import MultiHeadAttention, record_attention
from minitransformer.nn.transformer import TransformerConfig
from minitransformer.plot import attention_grid
from minitransformer.presets import PRESETS
from minitransformer.training.trainer import TrainOptions, train
from minitransformer.translator import Translator

from minitransformer.notebook_support import QUICK
ROOT = Path.cwd() if (Path.cwd() / "benchmarks").is_dir() else Path.cwd().parent

# %% [markdown]
# ## 1. The gold alignment of a pair
#
# `corpus.alignment(english)` gives pairs (English word, Japanese word). Articles, "that" and the
# Japanese case particles render no shared piece of meaning and stay unaligned; a verb group links
# as a phrase ("ate" ↔ "食べ ました").

# %% [markdown] ja
# ## 1. 対の正解アライメント
#
# `corpus.alignment(english)` は（英単語、日本語の単語）の対を返します。冠詞、"that"、日本語の格助詞は、両言語に共通する意味の部品を表さないので、アラインしません。動詞群は句としてリンクします（"ate" ↔「食べ ました」）。

# %%
preset = "toy" if QUICK else "small"
corpus = load_data(None, "en-ja", PRESETS[preset]["corpus"])
english, japanese = next((en, ja) for en, ja in corpus.test if " that " in en)
en_words, ja_words = english.split(), japanese.split()
print(english, "\n", japanese)
for i, j in corpus.alignment(english):
    print(f"  {en_words[i]:>10} ↔ {ja_words[j]}")
print("verb → object:", [(en_words[v], en_words[o]) for v, o in corpus.verb_objects[english]])

# %% [markdown]
# ## 2. Scores on hand-made attention
#
# Accuracy: the share of gold-linked output rows whose strongest source is a gold partner. Mass: the
# mean weight on the gold partners. AER (Och & Ney): 0 is perfect. A uniform row over S sources puts
# |G_t| / S on its partners.

# %% [markdown] ja
# ## 2. 手で作ったアテンションの採点
#
# 正解率：正解リンクを持つ出力の行のうち、最も強い原文の位置が正解の相手である行の割合です。質量：正解の相手に置かれた重みの平均です。AER（Och & Ney）：0 が完全です。S 個の原文の位置にわたる一様な行は、相手の上に |G_t| / S を置きます。

# %%
diagonal = [(i, i) for i in range(5)]
print("diagonal: ", alignment_accuracy(np.eye(5), diagonal), attention_mass(np.eye(5), diagonal),
      alignment_error_rate(np.eye(5), diagonal))
uniform = np.full((5, 5), 0.2)
print("uniform:  mass", attention_mass(uniform, diagonal), "= 1/5")
assert attention_mass(uniform, diagonal) == 0.2 and alignment_accuracy(np.eye(5), diagonal) == 1.0

# %% [markdown]
# ## 3. Every head of a trained model
#
# In full mode we use the default run (`python -m minitransformer train`) if it exists; otherwise, and
# in quick mode, we train a small model here. The weights are read from the attention layers after one
# forward pass (`record_attention`), not passed back through return values.

# %% [markdown] ja
# ## 3. 学習済みモデルのすべてのヘッド
#
# フルモードでは、既定の学習（`python -m minitransformer train`）の結果があればそれを使います。なければ、またクイックモードでは、ここで小さなモデルを学習します。重みは 1 回の順伝播の後にアテンション層から読み出します（`record_attention`）。戻り値で受け渡すことはしません。

# %%
default_run = ROOT / "runs" / "enja"
if not QUICK and (default_run / "final").is_dir():
    translator = Translator.load(default_run)
else:
    run_dir = Path(tempfile.mkdtemp()) / "run"
    steps = 40 if QUICK else None
    train(TrainOptions(out=str(run_dir), preset=preset, steps=steps, average=1, evaluate=False, quiet=True))
    translator = Translator.load(run_dir)
config = translator.model.config
sentence = "the dog that the boy found ate the cake ."
maps = attention_maps(translator, sentence)
print("output:", " ".join(maps.output))
for kind in ("encoder", "decoder", "cross"):
    print(f"{kind:8}", maps.weights[kind].shape, "(layers, heads, queries, keys)")
queries, keys, query_ids, key_ids = maps.labels("cross")
figure = attention_grid(maps.weights["cross"], keys, queries, title="encoder–decoder attention",
                        src_ids=key_ids, tgt_ids=query_ids)
figure

# %% [markdown]
# ## 4. Every cross-attention head against the gold alignment
#
# The decoder is fed the reference translation (teacher forcing), so the pair's gold links apply.
# The positional baseline aligns output position t with source position t·S/T.

# %% [markdown] ja
# ## 4. クロスアテンションのすべてのヘッドを正解アライメントと比べる
#
# デコーダには参照訳を入力する（教師強制）ので、対の正解リンクがそのまま当てはまります。位置のベースラインは、出力位置 t を原文の位置 t·S/T にアラインします。

# %%
tok = translator.tokenizer
tallies = {(l, h): AlignmentTally() for l in range(config.n_layers) for h in range(config.n_heads)}
average, diagonal_tally = AlignmentTally(), AlignmentTally()
for en, ja in corpus.test[:20 if QUICK else 200]:
    cross = attention_maps(translator, en, output_ids=tok.encode(ja)).weights["cross"][:, :, :-1]
    links = corpus.subword_alignment(tok, en)
    for (l, h), tally in tallies.items():
        tally.add(cross[l, h], links)
    average.add(cross.mean(axis=(0, 1)), links)
    T, S = cross.shape[2:]
    diagonal_tally.add(np.eye(S)[[min(S - 1, t * S // T) for t in range(T)]], links)
for (l, h), tally in tallies.items():
    print(f"layer {l + 1} head {h + 1}: accuracy {tally.scores()['accuracy']:.3f}")
print(f"mean of all heads: {average.scores()['accuracy']:.3f}, diagonal baseline: "
      f"{diagonal_tally.scores()['accuracy']:.3f}")

# %% [markdown]
# ## 5. Encoder heads and a grammatical relation
#
# From the first subword of an English verb, does a head's strongest attention land on its object's
# head noun? Compared with the best fixed offset ("always look k subwords to the right").

# %% [markdown] ja
# ## 5. エンコーダのヘッドと文法関係
#
# 英語の動詞の最初のサブワードから見て、ヘッドの最も強いアテンションは、その目的語の主要部の名詞に落ちるでしょうか。最良の固定オフセット（「常に k サブワード右を見る」）と比べます。

# %%
hits = np.zeros((config.n_layers, config.n_heads))
offsets, total = [], 0
for en, _ in corpus.test[:20 if QUICK else 200]:
    spans = word_spans(tok, en)
    pairs = [(spans[v][0], spans[o]) for v, o in corpus.verb_objects[en]]   # verb's first subword, object's span
    if not pairs:
        continue
    encoder = attention_maps(translator, en, output_ids=[]).weights["encoder"]
    for row, span in pairs:
        hits += np.isin(encoder[:, :, row, :].argmax(axis=-1), list(span))
    offsets += [(row, span[0]) for row, span in pairs]
    total += len(pairs)
print("per head (layers × heads):\n", np.round(hits / max(total, 1), 3))
print("best fixed offset to the object's first subword, share right:", offset_baseline(offsets))

# %% [markdown]
# ## 6. Table 3 at small scale
#
# `benchmarks/quality/table3.py --quick` trains each row's model for a few steps: seconds, numbers without
# meaning, but the whole path. The full table (several seeds per row) is read from its results file.

# %% [markdown] ja
# ## 6. 小さな規模で再現する論文の表 3
#
# `benchmarks/quality/table3.py --quick` は各行のモデルを数ステップだけ学習します。数秒で終わり、数値に意味はありませんが、処理の全体を端から端まで実行します。表全体（1 行あたり複数のシード）は結果ファイルから読み込みます。

# %%
sys.path.insert(0, str(ROOT / "benchmarks" / "quality"))
import table3  # noqa: E402

quick_out = Path(tempfile.mkdtemp()) / "table3-quick.json"
table3.main(["--quick", "--out", str(quick_out)])
full = ROOT / "benchmarks" / "quality" / "results" / "table3.json"
if full.is_file():
    table3.print_table(json.loads(full.read_text()))

# %% [markdown]
# ## 7. FLOPs by formula, and the paper's Table 2
#
# Table 2 reports 27.3 / 38.1 BLEU (base, EN–DE / EN–FR) and 28.4 / 41.8 (big), at 3.3·10¹⁸ and
# 2.3·10¹⁹ training FLOPs: hours × GPUs × an estimate of each GPU's sustained rate. Ours are counted.

# %% [markdown] ja
# ## 7. 式で数える FLOPs と論文の表 2
#
# 論文の表 2 は、BLEU 27.3 / 38.1（ベース、英–独 / 英–仏）と 28.4 / 41.8（ビッグ）を、学習 FLOPs 3.3·10¹⁸ と 2.3·10¹⁹ で報告しています。これは時間 × GPU の数 × 各 GPU の持続性能の見積もりです。本書の FLOPs は実際に数えたものです。

# %%
print("one encoder layer of the default model, per source token (S = 12):",
      f"{encoder_layer_flops(128, 512, 12):,} FLOPs")
default = TransformerConfig.small(1000)
tokens = 2400 * 1000                     # an upper bound: 2,400 steps of at most 1,000 tokens a side
bound = training_flops(default, tokens, tokens, 12, 13)     # mean lengths of about 12 and 13 subwords
print(f"default run ≤ {bound:.2e} FLOPs; the paper's base model used about {3.3e18 / bound:,.0f} times more")
heads_file = ROOT / "benchmarks" / "quality" / "results" / "heads.json"
if heads_file.is_file():
    print(f"counted over the run's real tokens: {json.loads(heads_file.read_text())['flops']['training_flops']:.2e}")

# %% [markdown]
# ## 8. Gradient check of the attention layer we read
#
# Keeping the weights must not change the layer: the same output, the same gradients. The check runs in
# float64 on a small multi-head attention layer, cross-attention shaped (queries from one sequence, keys
# and values from another), with a random upstream gradient.

# %% [markdown] ja
# ## 8. 読み出しに使うアテンション層の勾配チェック
#
# 重みを保持しても、層は変わってはいけません。出力と勾配が同じでなければなりません。チェックは float64 で、小さなマルチヘッドアテンション層に対して行います。形はクロスアテンションと同じ（クエリはある系列から、キーとバリューは別の系列から）で、上流勾配はランダムです。

# %%
init.set_seed(0)
layer = MultiHeadAttention(8, 2).to(np.float64)
rng = np.random.default_rng(0)
query = mt.Tensor(rng.standard_normal((2, 3, 8)), requires_grad=True)
memory = mt.Tensor(rng.standard_normal((2, 4, 8)), requires_grad=True)
upstream = rng.standard_normal((2, 3, 8))


def attended(query, memory, *weights):
    return (layer(query, memory) * upstream).sum()


plain = layer(query, memory).numpy()
with record_attention(layer):
    kept = layer(query, memory).numpy()
    assert mt.gradcheck(attended, [query, memory, layer.w_q.weight, layer.w_k.weight, layer.w_v.weight])
assert np.array_equal(plain, kept) and layer.attention_weights.shape == (2, 2, 3, 4)
print("gradcheck passed with the weights kept; weights (B, h, T, S):", layer.attention_weights.shape)
