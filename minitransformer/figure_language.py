"""The chapter figures in another language: one drawing, its labels translated just before it is saved.

Every figure of the book is drawn once, by code with English labels (a notebook
cell, a script under chapters/figures/, a benchmark). The Japanese edition's
figure is the same matplotlib Figure with its texts (titles, axis labels,
legends, annotations, categorical tick labels) replaced from ``TEXTS`` and drawn
with a Japanese font (matplotlib-fontja's IPAex Gothic, see ``fonts.cjk_font``),
so both editions show the same data:

    with saving_chapter_figures("ja"):     # chapters/figures/X.png -> chapters/figures/ja/X.png
        fig.savefig("chapters/figures/X.png")

A text with English words and no entry is an error naming it (``missing``), so
a label added to an English figure cannot slip into the Japanese one untranslated.
Token labels of attention maps (tick labels) are data and stay as they are.
"""
from __future__ import annotations

import contextlib
import re
from pathlib import Path

from .fonts import bundled_font, cjk_font

LANGUAGES = ("ja",)


class FigureLanguageError(ValueError):
    """A figure text with no translation, or a language without a table."""


# English text -> Japanese. Mathtext ($...$) and code-like names stay as they are.
TEXTS_JA: dict[str, str] = {
    # chapter 1: the computational graph, the numerical gradient
    "y = tanh(w·x + b) · x   (blue: leaves, yellow: Functions)": "y = tanh(w·x + b) · x   （青：葉テンソル、黄：Function）",
    "|central difference − exact|": "|中心差分 − 厳密値|",
    "d tanh(x)/dx at x = 0.7": "x = 0.7 における d tanh(x)/dx",
    # chapter 2
    "Broadcasting reuses a value; its gradient sums every use": "ブロードキャストは値を使い回す。その勾配はすべての使用箇所の和",
    "b (1, 4), stretched along axis 0": "b (1, 4)：軸 0 に沿って引き伸ばす",
    "x (3, 1), stretched along axis 1": "x (3, 1)：軸 1 に沿って引き伸ばす",
    "forward: y = x + b  (3, 4)": "順伝播：y = x + b  (3, 4)",
    "backward: g = ∂L/∂y  (3, 4)": "逆伝播：g = ∂L/∂y  (3, 4)",
    "unbroadcast(g, (1, 4)): column sums": "unbroadcast(g, (1, 4))：列ごとの和",
    "unbroadcast(g, (3, 1)): row sums": "unbroadcast(g, (3, 1))：行ごとの和",
    # chapters 4 and 5
    "probability": "確率",
    "layer": "層",
    "std of activations": "アクティベーションの標準偏差",
    "Xavier uniform": "Xavier 一様分布",
    # chapter 6
    "measured var(q·k)": "var(q·k) の測定値",
    "$d_k$ (footnote 4)": "dₖ（脚注 4）",     # no $math$ with kana: mathtext draws it in its own font
    "variance of the scores": "スコアの分散",
    "largest softmax weight (16 keys)": "ソフトマックスの最大の重み（キー 16 個）",
    "median gradient norm through the softmax": "ソフトマックスを通る勾配ノルムの中央値",
    "padding mask, sentence 2": "パディングマスク（文 2）",
    "causal mask": "因果マスク",
    "both, sentence 2": "両方（文 2）",
    "causal weights, sentence 1": "因果マスク付きの重み（文 1）",
    # chapter 13
    "singular values kept, as a share of n": "残す特異値の数（n に対する割合）",
    "share of the energy Σσ²": "エネルギー Σσ² に占める割合",
    "cumulative share": "累積の割合",
    "Encoder self-attention of the trained run": "学習済みモデルのエンコーダのセルフアテンション",
    "BigBird blocks": "BigBird のブロック",
    "Linformer, k = 256": "Linformer、k = 256",
    "LSH, 1 round": "LSH、1 ラウンド",
    "key position": "キーの位置",
    "query position": "クエリの位置",
    # chapter 7
    "number of heads h  (d_k = d_model / h)": "ヘッド数 h（dₖ = d_model / h）",
    "ms": "ミリ秒",
    "seconds": "秒",
    "tanh RNN (engine)": "tanh RNN（本書のエンジン）",        # notebook 7's own RNN
    "LSTM (engine)": "LSTM（本書のエンジン）",                # Table 1's recurrent row (chapter 6's LSTM)
    # chapter 11: the small_parallel_enja recipe
    "minutes of training": "学習時間（分）",
    "about 37: an attention LSTM on a GPU, self-reported": "約 37：GPU で学習したアテンション付き LSTM（自己申告）",
    "small_parallel_enja, preset medium, 2 CPU cores": "small_parallel_enja、medium プリセット、CPU 2 コア",
    "dev BLEU, greedy (en→ja)": "開発セットの BLEU、貪欲（英→日）",
    "dev BLEU, greedy (ja→en)": "開発セットの BLEU、貪欲（日→英）",
    "dev BLEU, greedy (en→ja), without the cool-down": "開発セットの BLEU、貪欲（英→日）、クールダウンなし",
    "cool-down (--cooldown)": "クールダウン（--cooldown）",
    "test BLEU, beam 4, final model (en→ja)": "テストセットの BLEU、ビーム 4、最終モデル（英→日）",
    "test BLEU, beam 4, final model (ja→en)": "テストセットの BLEU、ビーム 4、最終モデル（日→英）",
    "self-attention (engine)": "セルフアテンション（本書のエンジン）",
    "sequence length n": "系列長 n",
    "forward + backward, ms": "順伝播 + 逆伝播（ミリ秒）",
    "recurrent: n·d²": "再帰：n·d²",
    "self-attention: n²·d": "セルフアテンション：n²·d",
    "Table 1: work per layer": "論文の表 1：1 層あたりの計算量",
    # chapter 8
    "feature (even: sin, odd: cos)": "特徴の次元（偶数：sin、奇数：cos）",
    "position": "位置",
    "PE for 100 positions, d_model = 128": "100 位置の PE（d_model = 128）",
    "a few columns": "いくつかの列",
    "step": "ステップ",
    "cross-entropy (moving average)": "交差エントロピー（移動平均）",
    "reversing 6 tokens: which positional encoding?": "6 トークンを逆順に：どの位置エンコーディングがよいか",
    # chapter 9
    "no cache: decode the whole prefix": "キャッシュなし：接頭辞全体をデコード",
    "decode_step with the cache": "キャッシュ付きの decode_step",
    "ours, no cache": "本書、キャッシュなし",
    "ours, with the cache": "本書、キャッシュあり",
    "PyTorch, no cache": "PyTorch、キャッシュなし",
    "PyTorch, with the cache": "PyTorch、キャッシュあり",
    "greedy": "貪欲",
    "beam 4": "ビーム 4",
    "decoder layer": "デコーダの層",
    "‖grad of FFN W₂‖": "‖FFN の W₂ の勾配‖",
    "gradients at initialisation": "初期化直後の勾配",
    "post-LN (paper)": "Post-LN（論文）",
    "pre-LN": "Pre-LN",
    # chapter 10
    "learning rate": "学習率",
    "eq. (3): linear warm-up, then 1/sqrt(step)": "式 (3)：線形のウォームアップ、その後 1/sqrt(step)",
    "loss": "損失",
    # chapter 11
    "dev BLEU (greedy, 200 sentences)": "開発セットの BLEU（貪欲デコード、200 文）",
    "dev BLEU after each epoch": "各エポック後の開発セット BLEU",
    "source (keys)": "原文（キー）",
    "output (queries)": "出力（クエリ）",
    "encoder–decoder attention": "エンコーダ・デコーダアテンション",
    # chapter 12
    "alignment accuracy": "アライメント正解率",
    # chapter 13
    "key block": "キーのブロック",
    "key j": "キー j",
    "query i": "クエリ i",
    "query block": "クエリのブロック",
    "key": "キー",
    "query": "クエリ",
    "softmax(q·k/√d_k)": "softmax(q·k/√dₖ)",
    "φ(q)·φ(k), normalised": "φ(q)·φ(k)（正規化）",
    "memory added by forward + backward, MiB": "順伝播 + 逆伝播で増えるメモリ（MiB）",
    "forward + backward, s": "順伝播 + 逆伝播（秒）",
    "eq. 1 (SDPA)": "式 (1)（SDPA）",
    "flash": "flash",
    "linear": "線形",
    "local, w = 128": "局所、w = 128",
    "self-attention": "セルフアテンション",
    "recurrent": "再帰",
    "convolutional, k = 3": "畳み込み、k = 3",
    # the source sentences of the attention figures are data: the English the model reads
    "the teacher that was reading the dictionary did not see the small cat .":
        "入力文：the teacher that was reading the dictionary did not see the small cat .",
}

# (pattern, replacement) for texts built with numbers in them (f-strings); tried after TEXTS_JA
PATTERNS_JA: list[tuple[str, str]] = [
    (r"softmax\(scores / (\S+)\)", r"softmax(スコア / \1)"),
    (r"d_model=(\d+), warmup=(\d+)", r"d_model=\1、ウォームアップ \2"),
    (r"encoder–decoder attention: (.*)", r"エンコーダ・デコーダアテンション（入力文：\1）"),
    (r"encoder self-attention: (.*)", r"エンコーダのセルフアテンション（入力文：\1）"),
    (r"decoder self-attention: (.*)", r"デコーダのセルフアテンション（入力文：\1）"),
    (r"head (\d+)", r"ヘッド \1"),
    (r"layer (\d+), Σσ \(Linformer's Fig\. 1\)", r"第 \1 層、Σσ（Linformer の図 1）"),
    (r"layer (\d+), energy Σσ²", r"第 \1 層、エネルギー Σσ²"),
    (r"layer (\d+)", r"第 \1 層"),
    (r"layer (\d+) head (\d+)", r"第 \1 層 ヘッド \2"),
    (r"the (\d+) heads' averaged matrix", r"\1 ヘッドを平均した行列"),
    (r"alignment accuracy over training \((\d+) test pairs\)", r"学習中のアライメント正解率（テスト \1 組）"),
    (r"(\d+) training steps, d_model=(\d+), same FLOPs for every h", r"学習 \1 ステップ、d_model=\2、どの h でも同じ FLOPs"),
    (r"decoding (\d+) sentences to length (\d+), model (\S+)", r"\1 文を長さ \2 までデコード、モデル \3"),
    (r"one attention call, B = (\d+), h = (\d+), d_k = (\d+), float32, NumPy",
     r"アテンション 1 回の呼び出し（B = \1、h = \2、dₖ = \3、float32、NumPy）"),
    (r"one multi-head layer, d_model=(\d+), n=(\d+)", r"マルチヘッドアテンション 1 層（d_model=\1、n=\2）"),
    (r"measured, d = (\d+)", r"測定値（d = \1）"),
    (r"Table 1 measured, d = (\d+)", r"論文の表 1 の測定（d = \1）"),
    (r"column (\d+)", r"列 \1"),
    (r"sinusoidal: held-out token accuracy (.*)%", r"正弦波：未見データのトークン正解率 \1%"),
    (r"learned: held-out token accuracy (.*)%", r"学習される埋め込み：未見データのトークン正解率 \1%"),
    (r"none: held-out token accuracy (.*)%", r"なし：未見データのトークン正解率 \1%"),
    (r"dense causal\n(\d+) of (\d+) tiles", r"密な因果マスク\n\2 タイル中 \1"),
    (r"local \((\d+) blocks\)\n(\d+) of (\d+) tiles", r"局所（\1 ブロック）\n\3 タイル中 \2"),
    (r"fixed summaries \(every (\d+)th\)\n(\d+) of (\d+) tiles", r"固定の要約（\1 ブロックごと）\n\3 タイル中 \2"),
    (r"local \+ summaries\n(\d+) of (\d+) tiles", r"局所 + 要約\n\2 タイル中 \1"),
    (r"strided \(l = (\d+)\)\n(\d+) pairs, (\d+) of (\d+) tiles", r"ストライド（l = \1）\n\2 組、\4 タイル中 \3"),
    (r"fixed \(l = (\d+), c = (\d+)\)\n(\d+) pairs, (\d+) of (\d+) tiles",
     r"固定（l = \1、c = \2）\n\3 組、\5 タイル中 \4"),
    (r"Longformer \(w = (\d+), d = (\d+), (\d+) global\)\n(\d+) pairs, (\d+) of (\d+) tiles",
     r"Longformer（w = \1、d = \2、グローバル \3 個）\n\4 組、\6 タイル中 \5"),
    (r"BigBird \(b = (\d+), r = (\d+), g = (\d+)\)\n(\d+) pairs, (\d+) of (\d+) tiles",
     r"BigBird（b = \1、r = \2、g = \3）\n\4 組、\6 タイル中 \5"),
    (r"restricted self-attention, r = (\d+)", r"制限付きセルフアテンション、r = \1"),
    (r"restricted self-attention, w = (\d+) a side \(r = (\d+)\)", r"制限付きセルフアテンション、片側 w = \1（r = \2）"),
]

TABLES = {"ja": (TEXTS_JA, PATTERNS_JA)}

MATH = re.compile(r"\$[^$]*\$")
WORD = re.compile(r"[A-Za-z]{3,}")
IDENTIFIER = re.compile(r"\w*_\w*|\w+\(\)|`[^`]*`|\b[A-Z][a-z]+[A-Z]\w*")   # d_model, f(), MulFunction: names
# words that are names or units, the same in both editions
KEPT = {"BLEU", "chrF", "NumPy", "CuPy", "BPE", "GPU", "CPU", "MiB", "GiB", "FLOPs", "FLOP", "float32", "float64",
        "tanh", "exp", "log", "max", "sum", "softmax", "Adam", "Transformer", "SDPA", "Noam", "ReLU", "Xavier",
        "float", "mul", "add", "matmul", "pow", "neg", "sub", "div", "mean",
        "Add", "Mul", "Tanh", "Sub", "Div", "Neg", "Exp", "Log", "Pow", "Sum", "Mean", "MatMul"}   # Function names


def translate(text: str, language: str) -> str | None:
    """The text in ``language``; None when the table has no entry (text with nothing to translate: itself)."""
    if language not in TABLES:
        raise FigureLanguageError(f"no figure texts for language {language!r} (known: {', '.join(TABLES)})")
    texts, patterns = TABLES[language]
    if text in texts:
        return texts[text]
    for pattern, replacement in patterns:
        match = re.fullmatch(pattern, text, flags=re.DOTALL)
        if match:
            return match.expand(replacement)
    if not needs_translation(text):
        return text
    return None


def needs_translation(text: str) -> bool:
    """Has the text English words (outside $math$, names and units)?"""
    words = WORD.findall(IDENTIFIER.sub(" ", MATH.sub(" ", text)))
    return any(word not in KEPT and not re.fullmatch(r"[A-Z]+s?", word) for word in words)


def localize(fig, language: str) -> list[str]:
    """Replace ``fig``'s texts by their ``language`` versions, in place; returns the texts without one.

    Tick labels are translated when the table has them and otherwise left alone (numbers, tokens).
    """
    from matplotlib.text import Text  # noqa: PLC0415


    if language == "en":
        return []
    from matplotlib.ticker import FixedFormatter, FuncFormatter  # noqa: PLC0415

    def tick_label(label):
        return translate(str(label), language) or label

    for ax in fig.axes:                        # labels set with the ticks (set_xticks(ticks, labels)) are drawn
        for axis in (ax.xaxis, ax.yaxis):      # again from their formatter: translate it, not the Text alone
            for formatter in (axis.get_major_formatter(), axis.get_minor_formatter()):
                if isinstance(formatter, FixedFormatter):
                    formatter.seq = [tick_label(label) for label in formatter.seq]
                elif isinstance(formatter, FuncFormatter) and not getattr(formatter, "_translated", False):
                    formatter.func = (lambda inner: lambda x, pos=None: tick_label(inner(x, pos)))(formatter.func)
                    formatter._translated = True
    fig.draw_without_rendering()               # tick labels and legends exist only once drawn
    tick_texts = {id(label) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
                  for tick in axis.get_major_ticks() + axis.get_minor_ticks()
                  for label in (tick.label1, tick.label2)}
    bundled_font()
    missing = []
    for text in fig.findobj(Text):
        original = text.get_text()
        if not original.strip():
            continue
        translated = translate(original, language)
        if translated is None:
            if id(text) not in tick_texts:
                missing.append(original)
            continue
        if translated != original:
            text.set_text(translated)
        wide = "".join(c for c in translated if ord(c) > 0x2E7F)      # CJK and full-width punctuation
        if wide:
            font = cjk_font(wide)
            if font is None:
                raise FigureLanguageError(f"no font can draw {translated!r}: install matplotlib-fontja "
                                          f"(requirements.txt)")
            # Latin as in the English figure, the rest from the CJK font; mathtext takes only the first
            # family for the text around $math$, so there the CJK font comes first
            text.set_fontfamily([font] if MATH.search(translated) else ["DejaVu Sans", font])
    # the tick labels of the axes follow again from their formatters when drawn; the ones set by hand stay
    return sorted(set(missing))


def missing_glyphs(draw):
    """Run ``draw()`` (a savefig); return (the missing-glyph complaints it raised, what it returned).

    matplotlib says "Glyph … missing from font(s) …" as a warning for plain text, and mathtext logs
    "Font … does not have a glyph for …": both mean a box where a character should be.
    """
    import logging  # noqa: PLC0415
    import warnings  # noqa: PLC0415

    logged = []

    class Collect(logging.Handler):
        def emit(self, record):
            if "does not have a glyph" in record.getMessage():
                logged.append(record.getMessage())

    handler, logger = Collect(), logging.getLogger("matplotlib.mathtext")
    logger.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = draw()
    finally:
        logger.removeHandler(handler)
    found = sorted({str(w.message) for w in caught if "missing from" in str(w.message)} | set(logged))
    for w in caught:
        if str(w.message) not in found:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return found, result


def translated_path(path, language: str) -> Path | None:
    """chapters/figures/NAME.png -> chapters/figures/LANGUAGE/NAME.png; None for any other path."""
    if not isinstance(path, (str, Path)):
        return None
    path = Path(path).resolve()
    if path.parent.name == "figures" and path.parent.parent.name == "chapters":
        return path.parent / language / path.name
    return None


_installed: dict[str, object] = {}


def install(language: str, strict: bool | None = None) -> None:
    """From now on, a figure saved to chapters/figures/NAME.png is saved in ``language`` to
    chapters/figures/LANGUAGE/NAME.png instead (and the English file is left alone).

    ``strict`` (default: unless MT_FIGURE_UNTRANSLATED=warn): a text without a translation is an error;
    otherwise a warning, and the figure is saved with it (how one lists every missing text at once).
    """
    import os  # noqa: PLC0415
    import warnings  # noqa: PLC0415
    strict = os.environ.get("MT_FIGURE_UNTRANSLATED") != "warn" if strict is None else strict
    from matplotlib.figure import Figure  # noqa: PLC0415

    if language not in TABLES:
        raise FigureLanguageError(f"no figure texts for language {language!r} (known: {', '.join(TABLES)})")
    original = _installed.get("savefig", Figure.savefig)

    def savefig(self, fname, *args, **kwargs):
        target = translated_path(fname, language)
        if target is None:
            return original(self, fname, *args, **kwargs)
        missing = localize(self, language)
        if missing:
            message = f"{target.name}: no {language} text in minitransformer/figure_language.py for {missing}"
            if strict:
                raise FigureLanguageError(message)
            warnings.warn(message, stacklevel=2)
        target.parent.mkdir(parents=True, exist_ok=True)
        tofu, result = missing_glyphs(lambda: original(self, target, *args, **kwargs))
        if tofu:          # a box instead of a character: never leave such a file behind
            target.unlink(missing_ok=True)
            raise FigureLanguageError(f"{target.name}: drawn with missing glyphs ({'; '.join(tofu)[:300]})")
        return result

    _installed["savefig"] = original
    Figure.savefig = savefig


def uninstall() -> None:
    from matplotlib.figure import Figure  # noqa: PLC0415
    if "savefig" in _installed:
        Figure.savefig = _installed.pop("savefig")


@contextlib.contextmanager
def saving_chapter_figures(language: str, strict: bool | None = None):
    """Within the block, chapter figures are saved in ``language`` into chapters/figures/LANGUAGE/."""
    install(language, strict)
    try:
        yield
    finally:
        uninstall()


def save_chapter_figure(fig, path, language: str = "en", **options) -> None:
    """``fig.savefig(path, **options)``: as drawn for "en", else through ``saving_chapter_figures(language)``."""
    with contextlib.nullcontext() if language == "en" else saving_chapter_figures(language):
        fig.savefig(path, **options)
