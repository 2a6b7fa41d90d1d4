"""Named model sizes and training recipes: the one table the model, the trainer and the benchmarks read.

A name means one model everywhere: ``TransformerConfig.small(vocab)`` is the
model that ``python -m minitransformer train --preset small`` trains, and the
benchmarks name their variants after the model they change ("small-N3" is
"small" with N = 3). Sizes use the paper's symbols (Table 3): N layers in the
encoder and in the decoder, d_model, h heads, d_ff, P_drop.

``train --model lstm --preset small`` trains the attention LSTM of chapter 6
(nn.Seq2Seq) with the recipe "small": the same data, vocabulary, batches,
schedule and length of run, with the LSTM of LSTM_MODELS["small"] as the model
(``recipe``).

This module is plain data and the lookups of it: it imports nothing of the package (no model, no trainer,
no command line; tests/house/test_layers.py), so the model's configuration (``TransformerConfig.preset``),
the trainer and the command line read the same table without one reaching into the other, and
benchmarks/common.py loads it without importing the package at all.
"""
from __future__ import annotations

from typing import Any

# name: N, d_model, h, d_ff, P_drop
MODELS: dict[str, dict[str, Any]] = {
    "toy":    dict(n_layers=1, d_model=32,   n_heads=2,  d_ff=64,   dropout=0.1),  # the tests' runs: seconds
    "tiny":   dict(n_layers=2, d_model=64,   n_heads=4,  d_ff=256,  dropout=0.1),  # smoke runs, experiments
    "small":  dict(n_layers=2, d_model=128,  n_heads=4,  d_ff=512,  dropout=0.1),  # the default translator
    "medium": dict(n_layers=3, d_model=256,  n_heads=4,  d_ff=1024, dropout=0.1),  # real corpora
    "base":   dict(n_layers=6, d_model=512,  n_heads=8,  d_ff=2048, dropout=0.1),  # the paper's base model
    "big":    dict(n_layers=6, d_model=1024, n_heads=16, d_ff=4096, dropout=0.3),  # the paper's big model
}

# Training recipes: a model of the table above, the data, the batch size, the schedule and the default
# length of a run. Peak learning rate of eq. 3 = factor / sqrt(d_model · warmup): 5.1e-3 for "small",
# 7.0e-4 for "base". A recipe is named after its model, except "quick", which is a short run of "tiny".
PRESETS: dict[str, dict[str, Any]] = {
    # for tests: seconds
    "toy": dict(model=MODELS["toy"], vocab_size=300,
                corpus=dict(n_train=600, n_dev=40, n_test=40, n_heldout=40), max_tokens=400, warmup=40,
                factor=0.5, minutes=None, epochs=1, steps=None, save_every=20, eval_sentences=20),
    # --quick: a 20-second smoke run of the whole pipeline
    "quick": dict(model=MODELS["tiny"], vocab_size=600,
                  corpus=dict(n_train=4000, n_dev=100, n_test=100, n_heldout=100), max_tokens=1000, warmup=100,
                  factor=0.5, minutes=0.25, epochs=None, steps=None, save_every=40, eval_sentences=50),
    # the default: a real translator of the built-in corpus in a few minutes on a laptop CPU.
    # A fixed number of steps (not minutes), so that every machine gets the same model and BLEU.
    # 2400 steps (about 9 epochs): at 1400 the model still dropped clauses of three-clause sentences
    # (benchmarks/quality/long_sentences.py: 78 BLEU at step 1400, 94 after 2400 with the average).
    "small": dict(model=MODELS["small"], vocab_size=1000,
                  corpus=dict(n_train=20000, n_dev=500, n_test=500, n_heldout=500), max_tokens=1000, warmup=300,
                  factor=1.0, minutes=None, epochs=None, steps=2400, save_every=100, eval_sentences=200),
    # real corpora (small_parallel_enja, Tatoeba): a bigger vocabulary and model
    "medium": dict(model=MODELS["medium"], vocab_size=8000,
                   corpus=dict(n_train=20000, n_dev=500, n_test=500, n_heldout=500), max_tokens=1500, warmup=800,
                   factor=1.0, minutes=30.0, epochs=None, steps=None, save_every=200, eval_sentences=200),
    # the paper's base model (§6.1, Table 3): for a GPU
    "base": dict(model=MODELS["base"], vocab_size=16000,
                 corpus=dict(n_train=20000, n_dev=500, n_test=500, n_heldout=500), max_tokens=25000, warmup=4000,
                 factor=1.0, minutes=None, epochs=20, steps=None, save_every=1000, eval_sentences=500),
}
DEFAULT_PRESET = "small"

# The attention LSTM (nn.Seq2Seq, chapter 6) of each name: N LSTM layers in the encoder (bidirectional,
# d_model/2 units each way) and in the decoder (d_model units), d_model, P_drop. Each has about as many
# parameters as the Transformer of the same name at its recipe's vocabulary (toy 300, tiny 600, small 1,000,
# medium 8,000, base 16,000 tokens), so that `--model lstm` and the Transformer compare at one size: "small"
# is 1.03 M against 1.05 M. "base" is a 4-layer LSTM as in Luong et al. (2015), whose cells were 1,000 wide.
# P_drop 0.2 on real corpora, as in Zaremba et al. (2014) and Luong et al.; 0.1, the Transformer's, below.
LSTM_MODELS: dict[str, dict[str, Any]] = {
    "toy":    dict(n_layers=1, d_model=32,  dropout=0.1),
    "tiny":   dict(n_layers=1, d_model=96,  dropout=0.1),
    "small":  dict(n_layers=2, d_model=152, dropout=0.1),
    "medium": dict(n_layers=2, d_model=352, dropout=0.2),
    "base":   dict(n_layers=4, d_model=768, dropout=0.2),
}
# An LSTM recipe is the Transformer's of the same name with the LSTM in place of the model: the same data,
# batches, length of run, and eq. 3's schedule with the LSTM's d_model. Not Adam at 1e-3, the usual rate for
# LSTMs (Kingma & Ba's default): on the recipe "small" (seed 0; eq. 3's warm-up and decay, scaled to other
# peaks) the LSTM's dev loss after 540 steps was 3.41 at a peak of 1e-3, 2.32 at 2e-3 and 1.33 at eq. 3's
# own 4.7e-3 (greedy dev BLEU 3.1, 6.1, 18.5). The 2015 papers trained for days; a run here has minutes, and
# one schedule for both models keeps a comparison about the models alone.

# Earlier names of training recipes. A run folder that recorded one keeps working; asking for one by
# hand is refused, because "tiny" now names the model of TransformerConfig.tiny, not this one.
RENAMED_PRESETS = {"tiny": "toy"}


def model_sizes(name: str) -> dict[str, Any]:
    """The sizes of the model called ``name`` (a key of MODELS); a clear error for any other name."""
    if name not in MODELS:
        raise ValueError(f"unknown model size {name!r}; choose one of {', '.join(MODELS)}")
    return dict(MODELS[name])


def lstm_model_sizes(name: str) -> dict[str, Any]:
    """The sizes of the attention LSTM called ``name`` (a key of LSTM_MODELS); a clear error for any other."""
    if name not in LSTM_MODELS:
        raise ValueError(f"no LSTM is called {name!r}; choose one of {', '.join(LSTM_MODELS)}")
    return dict(LSTM_MODELS[name])


def recipe(name: str, model: str = "transformer") -> dict[str, Any]:
    """The training recipe ``name`` for a model kind: PRESETS[name] for the Transformer; for "lstm" the same
    recipe with the attention LSTM of the same size (LSTM_MODELS) as its model."""
    if name not in PRESETS:
        raise ValueError(unknown_preset_message(name))
    chosen = dict(PRESETS[name])
    if model == "lstm":
        size = next(size for size, sizes in MODELS.items() if sizes is chosen["model"])   # "quick" trains "tiny"
        chosen["model"] = lstm_model_sizes(size)
    elif model != "transformer":
        raise ValueError(f"unknown model {model!r}; choose transformer or lstm")
    return chosen


def resolve(name: str | None, saved: bool = False) -> str:
    """The key of PRESETS that ``name`` means: DEFAULT_PRESET for None; for a run folder's record (``saved``),
    an earlier name means its new one (RENAMED_PRESETS). Any other name, or an earlier one asked for by hand,
    is refused with a ValueError that says what to choose. Training and evaluation both resolve through here."""
    if name is None:
        return DEFAULT_PRESET
    if saved:
        name = RENAMED_PRESETS.get(name, name)
    if name not in PRESETS:
        raise ValueError(unknown_preset_message(name))
    return name


def unknown_preset_message(name: str) -> str:
    """The one-line refusal for a training preset that does not exist (or was renamed)."""
    if name in RENAMED_PRESETS:
        new = RENAMED_PRESETS[name]
        return (f"the preset {name!r} is now called {new!r} (N={MODELS[new]['n_layers']}, "
                f"d_model {MODELS[new]['d_model']}); '{name}' names the model of the 'quick' preset")
    return f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}"
