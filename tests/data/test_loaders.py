"""Readers for real corpora: aligned files, TSV, corpus folders, and their error messages."""

import gzip
import json
from pathlib import Path

import pytest

from minitransformer.data.loaders import CorpusError, load_corpus, read_lines, read_parallel, read_tsv

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"


def write(path: Path, lines: list[str], gz: bool = False) -> Path:
    text = "".join(line + "\n" for line in lines)
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("gz", [False, True])
def test_read_parallel_plain_and_gzip(tmp_path, gz):
    suffix = ".gz" if gz else ""
    en = write(tmp_path / f"train.en{suffix}", ["the cat .", "a dog ."], gz)
    ja = write(tmp_path / f"train.ja{suffix}", ["猫 。", "犬 。"], gz)
    assert read_parallel(en, ja) == [("the cat .", "猫 。"), ("a dog .", "犬 。")]
    assert read_parallel(en, ja, limit=1) == [("the cat .", "猫 。")]


def test_mismatched_line_counts_name_both_files(tmp_path):
    en = write(tmp_path / "train.en", [f"s{i}" for i in range(10)])
    ja = write(tmp_path / "train.ja", [f"t{i}" for i in range(9)])
    with pytest.raises(CorpusError, match=r"train\.en has 10 lines but .*train\.ja has 9"):
        read_parallel(en, ja)


def test_empty_line_is_reported_with_its_number(tmp_path):
    en = write(tmp_path / "a.en", ["one", "", "three"])
    ja = write(tmp_path / "a.ja", ["1", "2", "3"])
    with pytest.raises(CorpusError, match=r"a\.en line 2: empty"):
        read_parallel(en, ja)


def test_missing_file_gives_a_clear_error(tmp_path):
    with pytest.raises(CorpusError, match=r"nope\.en: file not found"):
        read_lines(tmp_path / "nope.en")
    with pytest.raises(CorpusError, match="file not found"):
        read_tsv(tmp_path / "nope.tsv.gz")


def test_invalid_utf8_and_bad_gzip(tmp_path):
    bad = tmp_path / "bad.en"
    bad.write_bytes(b"fine\n\xff\xfe broken\n")
    with pytest.raises(CorpusError, match=r"bad\.en line 2: not valid UTF-8"):
        read_lines(bad)
    fake = tmp_path / "fake.tsv.gz"
    fake.write_text("not gzip\tat all\n")
    with pytest.raises(CorpusError, match=r"fake\.tsv\.gz: cannot read"):
        read_tsv(fake)


@pytest.mark.parametrize("gz", [False, True])
def test_read_tsv_takes_two_columns(tmp_path, gz):
    path = write(tmp_path / ("p.tsv.gz" if gz else "p.tsv"),
                 ["Hi.\tSalut.\tattribution", "Run!\tCours !"], gz)
    assert read_tsv(path) == [("Hi.", "Salut."), ("Run!", "Cours !")]
    assert read_tsv(path, limit=1) == [("Hi.", "Salut.")]


def test_malformed_tsv_line_names_file_and_line(tmp_path):
    path = write(tmp_path / "p.tsv", ["Hi.\tSalut.", "no tab here"])
    with pytest.raises(CorpusError, match=r"p\.tsv line 2: expected at least 2 tab-separated columns, found 1"):
        read_tsv(path)


def make_aligned_folder(folder: Path, foreign: str = "ja", gz: bool = True) -> Path:
    folder.mkdir()
    for split, n in (("train", 5), ("dev", 2), ("test", 3)):
        suffix = ".gz" if gz else ""
        write(folder / f"{split}.en{suffix}", [f"{split} en {i}" for i in range(n)], gz)
        write(folder / f"{split}.{foreign}{suffix}", [f"{split} {foreign} {i}" for i in range(n)], gz)
    return folder


def test_load_aligned_folder_and_directions(tmp_path):
    corpus = load_corpus(make_aligned_folder(tmp_path / "enja"), "ja-en")
    assert corpus.sizes() == {"train": 5, "dev": 2, "test": 3, "test_heldout": 0}
    assert corpus.languages == ("en", "ja")
    assert corpus.train[0] == ("train en 0", "train ja 0")
    assert corpus.pairs("dev") == [("dev ja 0", "dev en 0"), ("dev ja 1", "dev en 1")]  # the default: ja-en
    assert corpus.pairs("dev", "en-ja")[0] == ("dev en 0", "dev ja 0")
    with pytest.raises(ValueError, match="unknown direction 'en-fr'"):
        corpus.pairs("dev", "en-fr")
    with pytest.raises(ValueError, match="unknown split"):
        corpus.pairs("valid")


def test_load_tsv_folder_takes_language_from_folder_name(tmp_path):
    folder = tmp_path / "fra-eng"
    folder.mkdir()
    for split in ("train", "dev", "test"):
        write(folder / f"{split}.tsv.gz", [f"{split} hello\t{split} bonjour"], gz=True)
    corpus = load_corpus(folder)
    assert corpus.languages == ("en", "fr") and corpus.direction == "en-fr"
    assert corpus.pairs("test", "fr-en") == [("test bonjour", "test hello")]
    with pytest.raises(CorpusError, match="not the requested 'en-de'"):
        load_corpus(folder, "en-de")


def test_load_corpus_errors(tmp_path):
    with pytest.raises(CorpusError, match="corpus folder not found"):
        load_corpus(tmp_path / "missing")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CorpusError, match="expected train.en and train.xx"):
        load_corpus(empty)
    folder = make_aligned_folder(tmp_path / "partial", gz=False)
    (folder / "test.ja").unlink()
    with pytest.raises(CorpusError, match=r"missing test\.ja \(or test\.ja\.gz\)"):
        load_corpus(folder)
    with pytest.raises(CorpusError, match="must look like"):
        load_corpus(folder, "fr-de")


def test_load_data_picks_the_builtin_corpus_or_a_folder(tmp_path):
    """The corpus a run trains on, as training and `evaluate` both ask for it (data/run_data.py)."""
    from minitransformer.data.run_data import load_data

    builtin = load_data(None, "ja-en", dict(n_train=50, n_dev=5, n_test=5, n_heldout=5), limit=20)
    assert builtin.sizes() == {"train": 20, "dev": 5, "test": 5, "test_heldout": 5}
    assert builtin.name == "builtin"
    with pytest.raises(CorpusError, match="the built-in corpus is English–Japanese: --direction must be en-ja"):
        load_data(None, "en-fr", dict(n_train=50, n_dev=5, n_test=5, n_heldout=5))
    folder = load_data(str(make_aligned_folder(tmp_path / "enja")), "en-ja", limit=2)
    assert folder.sizes() == {"train": 2, "dev": 2, "test": 2, "test_heldout": 0}


# --- the real corpora in shared/data ---------------------------------------------

def manifest() -> dict:
    path = DATA / "manifest.json"
    if not path.is_file():
        pytest.skip(f"real data not found at {DATA}")
    return json.loads(path.read_text(encoding="utf-8"))


def test_small_parallel_enja_matches_manifest():
    sets = manifest()["sets"]["small_parallel_enja"]
    corpus = load_corpus(DATA / "small_parallel_enja", "en-ja")
    for split in ("train", "dev", "test"):
        assert len(corpus.split(split)) == sets["files"][f"{split}.en.gz"]["lines"]
    tokens = sum(len(ja.split()) for _, ja in corpus.train)
    assert tokens == sets["splits"]["train"]["ja"]["whitespace_tokens_total"]


def test_tatoeba_folders_match_manifest():
    sets = manifest()["sets"]
    for name, code in (("jpn-eng", "ja"), ("fra-eng", "fr")):
        files = sets[f"tatoeba_manythings/{name}"]["files"]
        folder = DATA / "tatoeba_manythings" / name
        assert len(read_tsv(folder / "dev.tsv.gz")) == files["dev.tsv.gz"]["lines"]
        assert len(read_tsv(folder / "test.tsv.gz")) == files["test.tsv.gz"]["lines"]
    corpus = load_corpus(DATA / "tatoeba_manythings" / "jpn-eng", limit=100)
    assert corpus.languages == ("en", "ja") and len(corpus.train) == 100
    assert corpus.dev[0][0].isascii() and not corpus.dev[0][1].isascii()
