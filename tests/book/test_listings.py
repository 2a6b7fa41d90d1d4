"""Every listing of the book that names its file holds that file's lines (tools/listings.py), in both
languages: the book passes, and a listing planted with a line the file lacks fails, in English and in
Japanese, with a message that names the chapter, the listing's line, the file and the line."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import listings  # noqa: E402


def test_every_listing_that_names_its_file_holds_that_files_lines():
    problems = listings.check()
    assert not problems, "listings that drifted from their files (correct the listing to the code):\n  " + \
        "\n  ".join(problems)


def test_the_check_sees_the_listings_of_both_languages():
    """A check that finds no listing passes for nothing: each language has its listings, the same number
    per chapter, and the files they name exist."""
    found = {path: listings.listings_in(path) for path in listings.chapters()}
    english = {p.name: len(found[p]) for p in found if p.parent.name == "chapters"}
    japanese = {p.name: len(found[p]) for p in found if p.parent.name == "ja"}
    assert sum(english.values()) >= 40
    assert english == {name: n for name, n in japanese.items() if name in english}
    assert all(listings.source_path(listing.file) for found_in in found.values() for listing in found_in)


SOURCE = '''\
class Adam:
    def step(self, grads: list[float], lr: float = 1e-3) -> None:
        for g in grads:
            self.m = 0.9 * self.m + 0.1 * g        # first moment
            self.v = 0.999 * self.v + 0.001 * g * g
        self.t += 1


def schedule(step: int,
             warmup: int = 4000) -> float:
    return min(step ** -0.5, step * warmup ** -1.5)
'''


@pytest.fixture
def book(tmp_path):
    (tmp_path / "chapters" / "ja").mkdir(parents=True)
    (tmp_path / "minitransformer").mkdir()
    (tmp_path / "minitransformer" / "optim.py").write_text(SOURCE, encoding="utf-8")
    return tmp_path


def chapter(book: Path, name: str, listing: str, before: str = "The code:") -> Path:
    path = book / "chapters" / name
    path.write_text(f"# A chapter\n\n{before}\n\n```python\n{listing}```\n\nMore prose.\n", encoding="utf-8")
    return path


EXACT = """\
# minitransformer/optim.py, Adam.step
def step(self, grads, lr=1e-3):
    for g in grads:
        self.m = 0.9 * self.m + 0.1 * g    # m ← β₁m + (1 − β₁)g
    ...
    self.t += 1
"""


@pytest.mark.parametrize("name", ["10-x.md", "ja/10-x.md"])
def test_an_exact_listing_passes(book, name):
    chapter(book, name, EXACT)
    assert listings.check(book) == []


@pytest.mark.parametrize("name", ["10-x.md", "ja/10-x.md"])
def test_a_drifted_listing_fails_naming_chapter_line_file_and_code(book, name):
    chapter(book, name, EXACT.replace("self.m = 0.9 * self.m + 0.1 * g", "self.m += 0.1 * g"))
    problems = listings.check(book)
    assert len(problems) == 1
    assert problems[0].startswith(f"chapters/{name}:6: ")       # where the listing begins
    assert "minitransformer/optim.py, Adam.step" in problems[0]
    assert "line 9 is not in the file: self.m += 0.1 * g" in problems[0]


def test_a_listing_in_the_wrong_order_fails(book):
    chapter(book, "10-x.md", "# minitransformer/optim.py\nself.t += 1\nfor g in grads:\n")
    assert "after the lines before it: for g in grads:" in listings.check(book)[0]


def test_type_hints_may_be_left_out_of_a_signature_and_the_signature_joined_on_one_line(book):
    chapter(book, "10-x.md", "# minitransformer/optim.py\ndef schedule(step, warmup=4000):\n"
                             "    return min(step ** -0.5, step * warmup ** -1.5)\n")
    assert listings.check(book) == []
    chapter(book, "10-x.md", "# minitransformer/optim.py\ndef schedule(step, warmup=400):\n")
    assert "def schedule(step, warmup=400):" in listings.check(book)[0]


def test_only_an_elision_line_stands_for_left_out_code(book):
    chapter(book, "10-x.md", "# minitransformer/optim.py\n# … the moments\nself.t += 1\n")
    assert listings.check(book) == []
    chapter(book, "10-x.md", "# minitransformer/optim.py\n# the moments\nself.t += 1\n")
    assert "# the moments" in listings.check(book)[0]


def test_a_named_definition_narrows_the_search(book):
    chapter(book, "10-x.md", "# minitransformer/optim.py, schedule\nself.t += 1\n")
    assert "is not in the file: self.t += 1" in listings.check(book)[0]
    chapter(book, "10-x.md", "# minitransformer/optim.py, Adam.update\nself.t += 1\n")
    assert "defines no such thing" in listings.check(book)[0]


def test_a_listing_may_name_its_file_in_the_paragraph_before(book):
    before = "In code (`minitransformer/optim.py`), the moments:\n\n<!-- BEGIN SOLUTION 10.1 -->"
    chapter(book, "ja/10-x.md", "self.v = 0.999 * self.v + 0.001 * g * g\n", before)
    assert listings.check(book) == []
    chapter(book, "ja/10-x.md", "self.v = 0.99 * self.v + 0.01 * g * g\n", before)
    assert listings.check(book)[0].startswith("chapters/ja/10-x.md:")


def test_a_listing_that_names_a_missing_file_fails_and_one_that_names_none_is_not_checked(book):
    chapter(book, "10-x.md", "# minitransformer/gone.py\nx = 1\n")
    assert "names minitransformer/gone.py, which does not exist" in listings.check(book)[0]
    chapter(book, "10-x.md", "x = model(src)   # an example, from no file\n")
    assert listings.check(book) == []
