"""Corpus files as editors write them: any line ending, a byte-order mark; splits a run cannot train on."""
from __future__ import annotations

import gzip
import json

import pytest

from minitransformer.data.loaders import load_corpus, read_lines, read_parallel, read_tsv
from minitransformer.data.run_data import load_data
from minitransformer.training.trainer import TrainingError, train
from minitransformer.training.options import TrainOptions

PAIRS = [(f"the dog {i} runs .", f"le chien {i} court .") for i in range(40)]


@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize("gz", [False, True])
def test_every_line_ending_reads_the_same_lines(tmp_path, ending, gz):
    """A file saved with classic Mac line endings (CR only) used to be one line: 200 pairs read as 1."""
    text = ending.join(f"{en}\t{fr}" for en, fr in PAIRS) + ending
    path = tmp_path / ("pairs.tsv.gz" if gz else "pairs.tsv")
    data = text.encode("utf-8")
    path.write_bytes(gzip.compress(data) if gz else data)
    assert read_tsv(path) == PAIRS
    assert read_lines(path) == [f"{en}\t{fr}" for en, fr in PAIRS]


def test_mixed_line_endings_and_a_missing_last_one(tmp_path):
    (tmp_path / "a.en").write_bytes(b"one .\r\ntwo .\rthree .\nfour .")
    (tmp_path / "a.fr").write_bytes(b"un .\ndeux .\r\ntrois .\rquatre .\r")
    assert read_parallel(tmp_path / "a.en", tmp_path / "a.fr") == [
        ("one .", "un ."), ("two .", "deux ."), ("three .", "trois ."), ("four .", "quatre .")]


def test_an_empty_line_between_two_carriage_returns_is_a_line(tmp_path):
    (tmp_path / "x.en").write_bytes(b"one .\r\rtwo .\r")
    (tmp_path / "x.fr").write_bytes(b"un .\rdeux .\rtrois .\r")
    from minitransformer.data.loaders import CorpusError
    with pytest.raises(CorpusError, match=r"x\.en line 2: empty sentence"):
        read_parallel(tmp_path / "x.en", tmp_path / "x.fr")


@pytest.mark.parametrize("gz", [False, True])
def test_a_byte_order_mark_is_not_part_of_the_first_word(tmp_path, gz):
    """Notepad's UTF-8 starts with EF BB BF: it used to reach the vocabulary as '\\ufeffwhen'."""
    data = "\ufeffwhen the dog runs .\tquand le chien court .\nthe cat .\tle chat .\n".encode("utf-8")
    path = tmp_path / ("p.tsv.gz" if gz else "p.tsv")
    path.write_bytes(gzip.compress(data) if gz else data)
    assert read_tsv(path)[0] == ("when the dog runs .", "quand le chien court .")
    (tmp_path / "l.en").write_bytes("\ufeffwhen .\n".encode("utf-8"))
    assert read_lines(tmp_path / "l.en") == ["when ."]
    assert read_lines(tmp_path / "p.tsv" if not gz else path)[1] == "the cat .\tle chat ."


def _corpus(folder, dev=PAIRS[:5], train_pairs=PAIRS, test=PAIRS[:5]):
    folder.mkdir(parents=True, exist_ok=True)
    for split, pairs in (("train", train_pairs), ("dev", dev), ("test", test)):
        (folder / f"{split}.tsv").write_text("".join(f"{en}\t{fr}\n" for en, fr in pairs), encoding="utf-8")
    return folder


def _options(out, data, **settings):
    options = dict(out=str(out), data=str(data), direction="en-fr", preset="toy", steps=2, average=1, quiet=True,
                   evaluate=False)
    options.update(settings)
    return TrainOptions(**options)


def test_an_empty_dev_split_is_refused_before_anything_is_trained_or_written(tmp_path):
    """An empty dev.tsv used to crash at the end of epoch 1 ('BLEU of an empty list'), and again on --resume."""
    data = _corpus(tmp_path / "corpus", dev=[])
    lines = []
    with pytest.raises(TrainingError, match=r"dev split of corpus 'corpus' is empty.*dev\.tsv"):
        train(_options(tmp_path / "run", data, epochs=1, steps=None), log=lines.append)
    assert lines == [] and not (tmp_path / "run").exists()


def test_a_dev_split_that_no_pair_of_fits_is_refused(tmp_path):
    long = [(" ".join(["word"] * 300) + " .", "mot .")] * 3
    data = _corpus(tmp_path / "corpus", dev=long)
    with pytest.raises(TrainingError, match="no dev pair .* fits the model's 256 tokens"):
        train(_options(tmp_path / "run", data))


@pytest.mark.filterwarnings("ignore:sentence 6 has 301 tokens")      # the dev BLEU reads the long pair, cut
def test_the_pairs_each_filter_drops_are_counted_and_said(tmp_path):
    """Pairs longer than the positional table used to vanish from training without a word."""
    long = [(" ".join(["dog"] * 300) + " .", "chien ."), ("the dog runs .", " ".join(["chien"] * 400))]
    data = _corpus(tmp_path / "corpus", train_pairs=PAIRS + long, dev=PAIRS[:5] + long[:1])
    lines = []
    train(_options(tmp_path / "run", data, quiet=False), log=lines.append)
    said = "\n".join(lines)
    assert "train: 2 of 42 pairs left out: 2 longer than the model's 256 tokens" in said
    assert "dev: 1 of 6 pairs left out of the dev loss: 1 longer than the model's 256 tokens" in said
    assert "40 training pairs, 5 dev" in said


def test_an_empty_test_split_is_said_not_skipped_in_silence(tmp_path):
    data = _corpus(tmp_path / "corpus", test=[])
    lines = []
    summary = train(_options(tmp_path / "run", data, quiet=False, evaluate=True, plot=False), log=lines.append)
    assert "test_bleu" not in summary
    assert any("no test pairs" in line for line in lines)


def test_the_builtin_corpus_reads_as_before():
    """The default run's corpus is generated, not read from files: the line-ending rules cannot touch it."""
    corpus = load_data(None, "en-ja", {"n_train": 30, "n_dev": 5, "n_test": 5, "n_heldout": 5})
    assert not any("\r" in s or "\ufeff" in s for pair in corpus.train + corpus.dev for s in pair)
    assert json.dumps(corpus.train[:2], ensure_ascii=False) == json.dumps(
        load_data(None, "en-ja", {"n_train": 30, "n_dev": 5, "n_test": 5, "n_heldout": 5}).train[:2],
        ensure_ascii=False)


def test_a_folder_of_cr_files_loads_every_pair(tmp_path):
    folder = tmp_path / "fra-eng"
    folder.mkdir()
    for split in ("train", "dev", "test"):
        (folder / f"{split}.tsv").write_bytes("\r".join(f"{en}\t{fr}" for en, fr in PAIRS).encode("utf-8"))
    corpus = load_corpus(folder)
    assert corpus.sizes()["train"] == len(PAIRS) and corpus.sizes()["dev"] == len(PAIRS)


# -- text in another encoding, and two files for one ------------------------------------------------
@pytest.mark.parametrize("encoding,named", [
    ("utf-16-le", "UTF-16-LE without a byte-order mark"), ("utf-16-be", "UTF-16-BE without a byte-order mark"),
    ("utf-32-le", "UTF-32-LE without a byte-order mark"), ("utf-32-be", "UTF-32-BE without a byte-order mark"),
])
@pytest.mark.parametrize("gz", [False, True])
def test_text_with_nul_bytes_is_refused_naming_the_likely_encoding(tmp_path, encoding, named, gz):
    """ASCII saved as UTF-16 without a BOM is valid UTF-8: it trained with a NUL after every character."""
    data = "".join(f"{en}\t{fr}\n" for en, fr in PAIRS).encode(encoding)
    path = tmp_path / ("p.tsv.gz" if gz else "p.tsv")
    path.write_bytes(gzip.compress(data) if gz else data)
    from minitransformer.data.loaders import CorpusError
    for read in (read_tsv, read_lines):
        with pytest.raises(CorpusError, match=rf"p\.tsv(\.gz)? line 1: holds NUL bytes.*looks like {named}.*UTF-8"):
            read(path)


@pytest.mark.parametrize("encoding,named", [("utf-16", "UTF-16-LE with a byte-order mark"),
                                            ("utf-32", "UTF-32-LE with a byte-order mark")])
def test_text_with_a_utf16_or_utf32_byte_order_mark_is_named(tmp_path, encoding, named):
    (tmp_path / "a.en").write_bytes("the dog runs .\n".encode(encoding))
    from minitransformer.data.loaders import CorpusError
    with pytest.raises(CorpusError, match=rf"a\.en line 1: .*looks like {named}"):
        read_lines(tmp_path / "a.en")


def test_a_nul_in_otherwise_good_text_is_refused_with_its_line(tmp_path):
    (tmp_path / "a.en").write_bytes(b"one .\ntwo\x00 .\nthree .\n")
    from minitransformer.data.loaders import CorpusError
    with pytest.raises(CorpusError, match=r"a\.en line 2: holds NUL bytes"):
        read_lines(tmp_path / "a.en")


def test_a_file_beside_its_gzip_is_refused_naming_both(tmp_path):
    folder = _corpus(tmp_path / "c")
    (folder / "dev.tsv.gz").write_bytes(gzip.compress((folder / "dev.tsv").read_bytes()))
    from minitransformer.data.loaders import CorpusError
    with pytest.raises(CorpusError, match=r"both dev\.tsv and dev\.tsv\.gz exist"):
        load_corpus(folder)
    aligned = tmp_path / "aligned"
    aligned.mkdir()
    for split in ("train", "dev", "test"):
        (aligned / f"{split}.en").write_text("the dog .\n", encoding="utf-8")
        (aligned / f"{split}.fr").write_text("le chien .\n", encoding="utf-8")
    load_corpus(aligned)
    (aligned / "train.en.gz").write_bytes(gzip.compress(b"an old copy .\n"))
    with pytest.raises(CorpusError, match=r"both train\.en and train\.en\.gz exist"):
        load_corpus(aligned)


def test_a_tsv_beside_aligned_files_is_refused_naming_both(tmp_path):
    folder = _corpus(tmp_path / "c")
    (folder / "train.en").write_text("the dog .\n", encoding="utf-8")
    (folder / "train.fr").write_text("le chien .\n", encoding="utf-8")
    from minitransformer.data.loaders import CorpusError
    with pytest.raises(CorpusError, match=r"two corpora, train\.tsv and the aligned files train\.en, train\.fr"):
        load_corpus(folder)
