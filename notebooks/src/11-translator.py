# %% [markdown]
# # Chapter 11 — A small translator (§5, §6.1)
#
# Everything comes together: text pairs become subword ids, the model trains on batches of tokens with
# label smoothing, Adam and the warm-up schedule, and beam search turns it into a translator that we
# score with BLEU. In this notebook we
# 1. look at the built-in English–Japanese corpus and its held-out split,
# 2. learn a shared BPE vocabulary (§5.1),
# 3. train a translator with `minitransformer.training.trainer` (a short run in quick mode),
# 4. compare greedy search and beam search with the length penalty (§6.1),
# 5. compute BLEU by hand for one sentence, and for the corpus,
# 6. average the last checkpoints (§6.1),
# 7. look at the encoder–decoder attention of one sentence,
# 8. gradient-check the translation loss on real subword ids,
# 9. tokenize raw Japanese without spaces, and score one set of outputs three ways.

# %% [markdown] ja
# # 第 11 章 — 小さな翻訳器（§5、§6.1）
#
# ここですべてがつながります。テキストの対はサブワードの id になります。モデルは、トークン数で区切ったバッチ、ラベルスムージング、Adam、ウォームアップのスケジュールを使って学習し、ビームサーチによって翻訳器になります。その翻訳器を BLEU で採点します。このノートブックでは次のことをします。
# 1. 組み込みの英日コーパスと、そのホールドアウト用の分割を見ます。
# 2. 共有の BPE 語彙を学習します（§5.1）。
# 3. `minitransformer.training.trainer` で翻訳器を学習します（クイックモードでは短い学習）。
# 4. 貪欲デコードと、長さペナルティ付きのビームサーチを比べます（§6.1）。
# 5. 1 つの文について、そしてコーパス全体について、BLEU を手で計算します。
# 6. 最後のいくつかのチェックポイントを平均します（§6.1）。
# 7. 1 つの文のエンコーダ・デコーダアテンションを見ます。
# 8. 実際のサブワードの id で、翻訳の損失の勾配チェックをします。
# 9. 空白のない生の日本語をトークン化し、1 組の出力を 3 通りに採点します。

# %%
import math
import tempfile
import warnings
from collections import Counter
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import minitransformer as mt
import minitransformer.functional as F
from minitransformer import checkpoint as ckpt
from minitransformer.bleu import corpus_bleu, corpus_bleu_score, sentence_bleu
from minitransformer.chrf import corpus_chrf
from minitransformer.data.bpe import BPETokenizer
from minitransformer.data.raw_bpe import RawBPETokenizer
from minitransformer.data.grammar import make_builtin_corpus
from minitransformer.decode import beam_search, greedy_decode, length_penalty
from minitransformer.nn.transformer import Transformer, TransformerConfig
from minitransformer.plot import attention_heatmap
from minitransformer.training.trainer import TrainOptions, train
from minitransformer.translator import Translator

from minitransformer.notebook_support import QUICK

# %% [markdown]
# ## 1. The corpus
#
# The built-in corpus is generated from a small grammar with a real lexicon, so it needs no download.
# English is SVO, Japanese SOV with particles; relative clauses move in front of their noun. Each
# English sentence has exactly one translation. Besides train/dev/test there is `test_heldout`:
# sentences with word *combinations* (a subject with a verb, an adjective with a noun) that never occur
# together in training, although each word does.

# %% [markdown] ja
# ## 1. コーパス
#
# 組み込みコーパスは本物の語彙目録を持つ小さな文法から生成されるので、ダウンロードはいりません。英語は SVO、日本語は助詞を伴う SOV で、関係節は名詞の前に移ります。英語の文にはどれもちょうど 1 つの訳があります。train/dev/test のほかに `test_heldout` があります。これは、単語の*組み合わせ*（主語と動詞、形容詞と名詞）が学習データで一度も一緒に現れない文です。ただし、それぞれの単語は学習データに現れます。

# %%
corpus = make_builtin_corpus(n_train=4000 if QUICK else 20000)
print(corpus.sizes())
for en, ja in corpus.train[:4]:
    print(f"{en}\n  {ja}")
print("held out, e.g.:", corpus.reserved[:3])
print("held-out sentence:", corpus.test_heldout[0])

# %% [markdown]
# ## 2. One BPE vocabulary for both languages
#
# §5.1: sentences were "encoded using byte-pair encoding, which has a shared source-target vocabulary".
# BPE starts from characters and merges the most frequent adjacent pair again and again. Frequent words
# become one token; rare ones stay split into pieces, so no word is ever out of vocabulary. A shared
# vocabulary is what allows the tied embeddings of §3.4.

# %% [markdown] ja
# ## 2. 両言語で 1 つの BPE 語彙
#
# §5.1：文は「バイトペアエンコーディングを使って符号化した。語彙は原言語と目的言語で共有される」。BPE は文字から始め、隣り合う対のうち最も頻度の高いものを何度も併合します。頻出する単語は 1 つのトークンになり、まれな単語は断片に分かれたまま残るので、語彙にない単語というものはありません。語彙を共有しているからこそ、§3.4 の重みを共有した埋め込みが可能になります。

# %%
texts = [s for pair in corpus.train for s in pair]
tokenizer = BPETokenizer.train(texts, vocab_size=1000)
print("vocabulary:", tokenizer.vocab_size, "tokens; first merges:", tokenizer.merges[:6])
for sentence in ["the teacher that was reading the dictionary laughed .", "先生 は 辞書 を 読ん で い ました 。"]:
    print(tokenizer.tokens(sentence))
lengths = Counter(len(tokenizer.encode(en)) - len(en.split()) for en, _ in corpus.train)
print("extra tokens per English sentence from splitting words:", dict(sorted(lengths.items())[:5]))
assert tokenizer.decode(tokenizer.encode(corpus.train[0][1])) == corpus.train[0][1]

# %% [markdown]
# ## 3. Training
#
# `train()` runs the loop of chapter 10 on this corpus: batches by tokens, the label-smoothed loss
# (ε = 0.1, §5.4), gradient clipping, Adam with eq. 3, a checkpoint every few hundred steps, dev loss
# and dev BLEU after each epoch, then the average of the last checkpoints and test BLEU with beam
# search. From a shell the same run is `python -m minitransformer train`. Here, in quick mode, it is a
# short run of the `quick` preset: the numbers will be low, but every stage runs.

# %% [markdown] ja
# ## 3. 学習
#
# `train()` は、このコーパスで第 10 章のループを実行します。ループの中身は、トークン数で区切ったバッチ、ラベルスムージングした損失（ε = 0.1、§5.4）、勾配のクリッピング、式 (3) 付きの Adam です。さらに、数百ステップごとにチェックポイントを保存し、各エポックの後に開発セットの損失と BLEU を測ります。最後にチェックポイントを平均し、ビームサーチでテストセットの BLEU を求めます。シェルからは、同じ学習を `python -m minitransformer train` で実行できます。ここではクイックモードで `quick` プリセットの短い学習をします。数値は低くなりますが、すべての段階が動きます。

# %%
run_dir = Path(tempfile.mkdtemp()) / "enja"
if QUICK:
    options = TrainOptions(out=str(run_dir), preset="quick", minutes=0.25, average=3, plot=False)
else:
    options = TrainOptions(out=str(run_dir), preset="small", average=5, plot=False)
summary = train(options)
print({k: summary[k] for k in ("steps", "train_seconds", "test_bleu", "test_heldout_bleu", "final_model")})
assert 0.0 <= summary["test_bleu"] <= 100.0 and summary["steps"] > 0

# %%
steps = np.arange(1, len(summary["losses"]) + 1)
fig, ax = plt.subplots(figsize=(6, 3))
ax.plot(steps, summary["losses"], alpha=0.4, label="training loss (label-smoothed)")
if summary["history"]:
    ax.plot([h["step"] for h in summary["history"]], [h["dev_loss"] for h in summary["history"]], "o-",
            label="dev cross-entropy")
ax.set_xlabel("step")
ax.set_yscale("log")
ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 4. Greedy search and beam search
#
# Greedy search takes the most probable token at every step. Beam search keeps the $k$ best prefixes
# (k = 4 in §6.1) and ranks finished hypotheses by $\log P(Y\mid X)/lp(Y)$ with
# $lp(Y) = ((5+|Y|)/6)^\alpha$, α = 0.6. Without the penalty, shorter outputs win because every extra
# token multiplies in a probability below one.

# %% [markdown] ja
# ## 4. 貪欲デコードとビームサーチ
#
# 貪欲デコードは、各ステップで最も確率の高いトークンを取ります。ビームサーチは最良の $k$ 個の接頭辞を保持し（§6.1 では k = 4）、完了した仮説を $\log P(Y\mid X)/lp(Y)$ で順位付けします。ここで $lp(Y) = ((5+|Y|)/6)^\alpha$、α = 0.6 です。このペナルティがないと短い出力が勝ってしまいます。トークンが 1 つ増えるたびに、1 より小さい確率が掛かるからです。

# %%
translator = Translator.load(run_dir)
model, tok = translator.model, translator.tokenizer
test_pairs = corpus.test[:100 if QUICK else 500]
sources = [tok.encode(en) for en, _ in test_pairs]
batch = np.zeros((len(sources), max(map(len, sources))), dtype=np.int64)
for row, ids in enumerate(sources):
    batch[row, :len(ids)] = ids

greedy = [tok.decode(ids) for ids in greedy_decode(model, batch, tok.bos_id, tok.eos_id)]
beams = beam_search(model, batch, tok.bos_id, tok.eos_id, beam_size=4, alpha=0.6, n_best=4)
beam = [tok.decode(h[0].tokens) for h in beams]
references = [ja for _, ja in test_pairs]
print(f"greedy     BLEU {corpus_bleu_score(greedy, references, tokenize='none').score:6.2f}")
print(f"beam 4     BLEU {corpus_bleu_score(beam, references, tokenize='none').score:6.2f}")
print("\n".join(f"  {h.score:7.3f}  {tok.decode(h.tokens)}" for h in beams[0]))
print("lp(|Y|) for |Y| = 1, 10, 20:", [round(length_penalty(n, 0.6), 3) for n in (1, 10, 20)])
assert [h.score for h in beams[0]] == sorted((h.score for h in beams[0]), reverse=True)

# %% [markdown]
# ## 5. BLEU
#
# BLEU compares n-grams (n = 1…4) of the output with the reference: each n-gram counts at most as often
# as the reference has it ("clipping"); the geometric mean of the four precisions is multiplied by a
# brevity penalty $\min(1, e^{1-r/c})$ for outputs shorter than the references. *Corpus* BLEU sums the
# counts over all sentences before dividing — it is not the mean of sentence scores.

# %% [markdown] ja
# ## 5. BLEU
#
# BLEU は出力の n-gram（n = 1…4）を参照訳と比べます。各 n-gram は参照訳に現れる回数までしか数えません（「クリッピング」）。4 つの適合率の幾何平均に、参照訳より短い出力に対する短文ペナルティ（brevity penalty）$\min(1, e^{1-r/c})$ を掛けます。*コーパス* BLEU は、割り算の前にすべての文の数を合計します。文ごとのスコアの平均ではありません。

# %%
hypothesis, reference = beam[0].split(), references[0].split()
precisions = []
for n in range(1, 5):
    grams = Counter(tuple(hypothesis[i:i + n]) for i in range(len(hypothesis) - n + 1))
    ref_grams = Counter(tuple(reference[i:i + n]) for i in range(len(reference) - n + 1))
    matched = sum(min(c, ref_grams[g]) for g, c in grams.items())
    precisions.append((matched, max(len(hypothesis) - n + 1, 0)))
print("reference :", " ".join(reference))
print("hypothesis:", " ".join(hypothesis))
print("clipped matches / n-grams:", precisions)
if all(m > 0 for m, _ in precisions):
    by_hand = 100 * min(1.0, math.exp(1 - len(reference) / len(hypothesis))) * \
        math.exp(sum(math.log(m / t) for m, t in precisions) / 4)
    print(f"by hand {by_hand:.2f}  library {sentence_bleu(beam[0], references[0], tokenize='none').score:.2f}")
    assert math.isclose(by_hand, sentence_bleu(beam[0], references[0], tokenize="none").score, rel_tol=1e-9)

# %% [markdown]
# ## 6. Averaging the last checkpoints
#
# §6.1: "For the base models, we used a single model obtained by averaging the last 5 checkpoints."
# Late in training the weights wander around a minimum; their average sits nearer its centre. `train()`
# keeps the average when it does at least as well as the last checkpoint on the dev set.

# %% [markdown] ja
# ## 6. 最後のチェックポイントの平均
#
# §6.1：「ベースモデルについては、最後の 5 個のチェックポイントを平均して得た単一のモデルを使った。」学習の終わりごろ、重みは最小点の周りをさまよいます。その平均は中心の近くに位置します。`train()` は、開発セットで平均が最後のチェックポイント以上の成績を出したときに平均を採用します。

# %%
checkpoints = ckpt.list_checkpoints(run_dir)
print("checkpoints kept:", [p.name for p in checkpoints])
scores = {}
for name, weights in [("last", ckpt.load_checkpoint(checkpoints[-1]).weights),
                      (f"average of {len(checkpoints)}", ckpt.average_checkpoints(checkpoints))]:
    model.load_state_dict(weights)
    outputs = translator.translate([en for en, _ in test_pairs], beam_size=1)
    scores[name] = corpus_bleu_score(outputs, references, tokenize="none").score
print({k: round(v, 2) for k, v in scores.items()})

# %% [markdown]
# ## 7. Where the decoder looks
#
# The encoder–decoder attention of the last decoder layer, averaged over heads, for one test sentence.
# Japanese puts the verb last and the object before it, so the picture is not a diagonal.

# %% [markdown] ja
# ## 7. デコーダはどこを見ているか
#
# 1 つのテスト文について、最後のデコーダ層のエンコーダ・デコーダアテンションをヘッドで平均したものです。日本語では動詞が最後に、目的語がその前に来るので、図は対角線になりません。

# %%
translator = Translator.load(run_dir)
source = corpus.test[3][0]
weights, src_labels, tgt_labels, src_ids, tgt_ids = translator.cross_attention(source)
fig = attention_heatmap(weights, src_labels, tgt_labels, src_ids=src_ids, tgt_ids=tgt_ids, title=source)
fig

# %% [markdown]
# Typed text is read the way the corpus is written (lowercased, punctuation set apart: learned from
# the training words the tokenizer recorded), and what the model never saw is named in a
# `TranslationWarning` instead of being silently turned into invented Japanese.

# %% [markdown] ja
# 打ち込まれたテキストは、コーパスと同じ書き方で読み取られます（小文字にし、句読点を切り離します。その書き方は、トークナイザが記録した学習データの単語から学んだものです）。モデルが一度も見たことのない語を、作り出した日本語へ黙って置き換えることはありません。代わりに `TranslationWarning` がその語を示します。

# %%
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    typed = ["Did the small dog drink the milk yesterday?", "The xyzzy lost the 🐟."]
    for sentence, output in zip(typed, translator.translate(typed)):
        print(f"{sentence!r:48} -> {translator.writing.normalize(sentence)!r:48} -> {output}")
for warning in caught:
    print("warning:", warning.message)

# %% [markdown]
# ## 8. Gradient check on real subword ids
#
# The translation loss of §5.4 on two real sentence pairs (cut short and padded into one batch), in
# float64, through a tiny model. To keep the check small, the subword ids that occur in the batch are
# renumbered 0…k−1 (pad, bos, eos keep their ids), so the tied embedding has only k rows and every
# one of them is checked, together with one cross-attention projection.

# %% [markdown] ja
# ## 8. 実際のサブワードの id での勾配チェック
#
# §5.4 の翻訳の損失を、実際の 2 つの文対（短く切り、パディングして 1 つのバッチにしたもの）について、小さなモデルを通して float64 で調べます。チェックを小さく保つため、バッチに現れるサブワードの id を 0…k−1 に振り直します（pad、bos、eos の id はそのまま）。こうすると重みを共有した埋め込みは k 行しかなく、そのすべての行を、クロスアテンションの射影の 1 つと一緒にチェックできます。

# %%
pairs = corpus.train[:2]
ids = [(tok.encode(en)[:4], tok.encode(ja)[:3]) for en, ja in pairs]
used = sorted({tok.pad_id, tok.bos_id, tok.eos_id} | {i for s, t in ids for i in s + t})
compact = {old: new for new, old in enumerate(used)}                     # pad 0, bos 1, eos 2 stay put
src = np.array([[compact[i] for i in s] + [0] * (4 - len(s)) for s, _ in ids])         # (2, 4)
tgt_in = np.array([[compact[tok.bos_id]] + [compact[i] for i in t[:-1]] for _, t in ids])  # (2, 3)
tgt_out = np.array([[compact[i] for i in t] for _, t in ids])                        # (2, 3)
k = len(used)
tiny = Transformer(TransformerConfig(src_vocab_size=k, tgt_vocab_size=k, d_model=4, n_heads=2, d_ff=8,
                                     n_layers=1, dropout=0.0, max_len=8)).to(np.float64)


def translation_loss(*parameters):
    logits = tiny(src, tgt_in)                                                   # (2, 3, k)
    return F.cross_entropy(logits.reshape(-1, k), tgt_out.reshape(-1), label_smoothing=0.1, ignore_index=0)


checked = [tiny.embedding.weight, tiny.decoder.layers[0].cross_attn.w_k.weight]
assert mt.gradcheck(translation_loss, checked)
print(f"gradcheck passed: the tied embedding ({k} subwords × 4) and the cross-attention W_K")
print("subwords in the batch:", [tok.vocab[i] for i in used[3:]])

# %% [markdown]
# ## 9. Raw text: SentencePiece-style BPE, and BLEU three ways
#
# Real Japanese has no spaces. The raw-text BPE (`data/raw_bpe.py`) treats the space as a symbol of
# its own, "▁", merges across what would be word boundaries, and falls back to UTF-8 bytes for a
# character it never saw, so that decoding gives back the exact input. Here it learns from the
# corpus's Japanese with the spaces taken out.

# %% [markdown] ja
# ## 9. 生のテキスト：SentencePiece 風の BPE と、三通りの BLEU
#
# 実際の日本語には空白がありません。生のテキスト用の BPE（`data/raw_bpe.py`）は、空白を独立した記号 "▁" として扱い、単語の境目にあたる場所もまたいで併合します。一度も見なかった文字は、UTF-8 のバイトにフォールバックして表します。そのため、デコードすると入力が正確に戻ります。ここでは、コーパスの日本語から空白を取り除いたものでこのトークナイザを学習します。

# %%
raw_japanese = [ja.replace(" ", "") for _, ja in corpus.train[:2000]]
raw_tok = RawBPETokenizer.train(raw_japanese, vocab_size=600)
for sentence in raw_japanese[:2] + ["魑魅魍魎!"]:
    ids = raw_tok.encode(sentence)
    assert raw_tok.decode(ids) == sentence                              # exact, even for unseen characters
    print(sentence, "->", " ".join(raw_tok.tokens(sentence)))

# %% [markdown]
# BLEU counts n-grams of *tokens*. On Japanese without spaces, whitespace tokens are whole sentences:
# the same four outputs score 0 that way, and quite different numbers on words and on characters.
# chrF compares character n-grams and needs no segmenter.

# %% [markdown] ja
# BLEU は*トークン*の n-gram を数えます。空白のない日本語では、空白で区切ったトークンは文全体です。同じ 4 つの出力が、そのように数えると 0 になり、単語で数えるか文字で数えるかでかなり違う数値になります。chrF は文字の n-gram を比べるので、分かち書きの道具を必要としません。

# %%
references_raw = ["私は学生です。", "猫が魚を食べた。", "明日東京に行きます。", "この本はとても面白かった。"]
outputs_raw = ["私は先生です。", "猫が魚を食べました。", "明日東京へ行きます。", "この本はとても面白かった。"]
references_words = ["私 は 学生 です 。", "猫 が 魚 を 食べ た 。", "明日 東京 に 行き ます 。", "この 本 は とても 面白かっ た 。"]
outputs_words = ["私 は 先生 です 。", "猫 が 魚 を 食べ まし た 。", "明日 東京 へ 行き ます 。", "この 本 は とても 面白かっ た 。"]
print(f"BLEU on whitespace tokens: {corpus_bleu(outputs_raw, references_raw, tokenize='none'):6.2f}")
print(f"BLEU on words:             {corpus_bleu(outputs_words, references_words, tokenize='none'):6.2f}")
print(f"BLEU on characters:        {corpus_bleu(outputs_raw, references_raw, tokenize='char'):6.2f}")
print(f"chrF:                      {corpus_chrf(outputs_raw, references_raw):6.2f}")

# %% [markdown]
# ## Exercises
#
# {{exercises}}

# %% [markdown] ja
# ## 演習
#
# {{exercises}}
