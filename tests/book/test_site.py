"""The book's website (tools/build_site.py), built and then read in a real browser.

The browser test builds a reduced but real site: every chapter, notebook page and source page in both
languages, with only notebook 05 executed (the full build executes all thirteen; tests/book/test_notebooks.py
runs every notebook already). Debian's Chromium, driven by Playwright, opens it from disk (file://, no
server, no network) and checks that chapter 5 shows rendered equations and its figure, that its notebook
page shows outputs and a plotted figure, that the language switch leads to the Japanese chapter 5, in
Japanese, and that search finds "gradcheck". The screenshots are written to _build/site-check/, and the
test names that folder in a warning at the end of the run, so a person can look at them.

Needs ``pip install -e ".[site]"`` and Chromium (``apt-get install chromium fonts-ipafont-gothic``); without
them the browser tests skip, saying which is missing, except where MT_REQUIRE_SITE=1 (CI), where they fail.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import build_site  # noqa: E402

REQUIRE_SITE = os.environ.get("MT_REQUIRE_SITE") == "1"
SITE_TOOLS = ("sphinx", "myst_nb", "sphinx_book_theme", "jupyter_server_mathjax", "playwright")
SCREENSHOTS = ROOT / "_build" / "site-check"
JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")
RAW_MATH = re.compile(r"(?<![\\$])\$[^$\s][^$\n]*\$|\\\(|\\\[")


def need(available: bool, reason: str) -> None:
    if not available:
        if REQUIRE_SITE:
            pytest.fail(f"MT_REQUIRE_SITE=1 but the site cannot be checked: {reason}")
        pytest.skip(reason)


def need_site_tools() -> None:
    missing = [name for name in SITE_TOOLS if importlib.util.find_spec(name) is None]
    need(not missing, f"the site's tools are not installed ({', '.join(missing)}): pip install -e \".[site]\"")


def chromium() -> str:
    path = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
    need(path is not None, "Chromium is not installed (Debian: apt-get install chromium fonts-ipafont-gothic)")
    return path


# ------------------------------------------------------------------------- the build's parts (standard library)
NOTEBOOK_SOURCE = """\
# %% [markdown]
# # Chapter 9 — Title
# English text.

# %% [markdown] ja
# # 第 9 章 — 題
# 日本語の文。

# %%
x = 1

# %% [markdown]
# Only in English.
"""


def test_japanese_notebook_takes_each_ja_twin_in_place_of_its_english_cell():
    cells = build_site.split_source(NOTEBOOK_SOURCE)
    assert [c["kind"] for c in cells] == ["markdown", "ja", "code", "markdown"]
    assert [c["source"] for c in build_site.english_cells(cells)] == \
        ["# Chapter 9 — Title\nEnglish text.", "x = 1", "Only in English."]
    assert [c["source"] for c in build_site.japanese_cells(cells)] == \
        ["# 第 9 章 — 題\n日本語の文。", "x = 1", "Only in English."]
    no_twins = [c for c in cells if c["kind"] != "ja"]
    assert build_site.japanese_cells(no_twins) is None        # the English notebook is shown, and listed


def test_an_english_chapter_shown_in_the_japanese_site_has_its_links_one_folder_deeper():
    assert build_site.deeper("figures/05-x.png") == "../figures/ja/05-x.png"
    assert build_site.deeper("../TEACHING.md") == "../../TEACHING.md"
    assert build_site.deeper("../notebooks/05-layers.ipynb") == "../../notebooks/ja/05-layers.ipynb"
    assert build_site.deeper("06-attention.md#62-masks") == "06-attention.md#62-masks"
    text = "See [x](../TEACHING.md).\n\n```\n[not a link](../TEACHING.md)\n```\n"
    assert build_site.rewrite_links(text, build_site.deeper) == \
        "See [x](../../TEACHING.md).\n\n```\n[not a link](../TEACHING.md)\n```\n"


def test_file_mentions_in_prose_become_links_but_not_in_code_blocks():
    text = "Read `minitransformer/tensor.py` and `notebooks/05-layers.ipynb`.\n```\n`minitransformer/tensor.py`\n```"
    linked = build_site.link_mentions(text, "chapters/ja", "ja")
    assert "[`minitransformer/tensor.py`](../../source/minitransformer/tensor.py.md)" in linked
    assert "[`notebooks/05-layers.ipynb`](../../notebooks/ja/05-layers.ipynb)" in linked
    assert linked.endswith("```\n`minitransformer/tensor.py`\n```")
    assert "`minitransformer/no_such_file.py`" in build_site.link_mentions("`minitransformer/no_such_file.py`", "", "en")


def test_the_language_switch_points_at_the_twin_page():
    assert 'href="../../ja/chapters/ja/05-layers.html"' in build_site.lang_switch("en", "chapters/05-layers")
    assert 'href="../../../en/chapters/05-layers.html"' in build_site.lang_switch("ja", "chapters/ja/05-layers")
    assert 'href="../../../en/source/minitransformer/tensor.py.html"' in \
        build_site.lang_switch("ja", "source/minitransformer/tensor.py")


def test_the_link_check_finds_a_missing_page_and_a_missing_anchor(tmp_path):
    (tmp_path / "en" / "chapters").mkdir(parents=True)
    (tmp_path / "en" / "chapters" / "a.html").write_text(
        '<h2 id="sec">x</h2><a href="b.html">ok</a><a href="#sec">ok</a><a href="https://example.org/x">out</a>'
        '<a href="gone.html">broken</a><a href="b.html#nowhere">broken</a><img src="../_images/f.png">')
    (tmp_path / "en" / "chapters" / "b.html").write_text('<p id="here">b</p>')
    broken = build_site.check_links(tmp_path)
    assert len(broken) == 3, broken
    assert any("gone.html (no such file)" in b for b in broken)
    assert any("'nowhere'" in b for b in broken)
    assert any("f.png (no such file)" in b for b in broken)


def test_the_math_check_finds_raw_tex_in_prose_but_not_in_math_or_code(tmp_path):
    (tmp_path / "en" / "chapters").mkdir(parents=True)
    page = tmp_path / "en" / "chapters" / "a.html"
    page.write_text('<p>rendered <span class="math notranslate">\\(x^2\\)</span>, listed <code>$HOME $PATH</code></p>'
                    '<pre>echo $a $b</pre><br><p>costs 5 $ a month</p>')
    assert build_site.check_math(tmp_path) == []
    page.write_text(page.read_text() + "<p>left raw: $\\sqrt{d_k}$</p>")
    [problem] = build_site.check_math(tmp_path)
    assert "en/chapters/a.html: raw TeX left in the text" in problem and "\\sqrt{d_k}" in problem


# ------------------------------------------------------------------------- the build fails where it must
# (Sphinx and its extensions, run in this process here, warn about their own deprecations: not ours to fix)
SPHINX_DEPRECATIONS = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
                       pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")]
def small_repository(root: Path, chapter: str) -> None:
    (root / "chapters" / "figures").mkdir(parents=True)
    (root / "chapters" / "01-one.md").write_text(chapter, encoding="utf-8")
    (root / "TEACHING.md").write_text("# Teaching\n\nSee [chapter 1](chapters/01-one.md).\n", encoding="utf-8")
    (root / "minitransformer").mkdir()


@SPHINX_DEPRECATIONS[0]
@SPHINX_DEPRECATIONS[1]
def test_the_build_fails_on_a_broken_link_and_a_missing_figure(tmp_path, monkeypatch):
    need_site_tools()
    repository = tmp_path / "repository"
    small_repository(repository, "# Chapter 1 — One\n\nSee [chapter 2](02-two.md) and "
                                 "[a section](#no-such-section).\n\n![a figure](figures/01-nothing.png)\n")
    monkeypatch.setattr(build_site, "ROOT", repository)
    with pytest.raises(SystemExit) as failure:
        build_site.build(tmp_path / "site", tmp_path / "work", tmp_path / "cache", None, 1, quiet=True)
    message = str(failure.value)
    assert "02-two.md" in message and "no-such-section" in message, message
    assert "01-nothing.png" in message, message


@SPHINX_DEPRECATIONS[0]
@SPHINX_DEPRECATIONS[1]
def test_the_build_passes_on_a_sound_small_book(tmp_path, monkeypatch):
    """The control for the test above: the same small book with its link and figure in place builds."""
    need_site_tools()
    repository = tmp_path / "repository"
    small_repository(repository, "# Chapter 1 — One\n\n## 1.1 A section\n\nSee [the section](#11-a-section) "
                                 "and $x^2$.\n\n![a figure](figures/01-figure.png)\n")
    shutil.copyfile(ROOT / "chapters" / "figures" / "05-xavier-activations.png",
                    repository / "chapters" / "figures" / "01-figure.png")
    monkeypatch.setattr(build_site, "ROOT", repository)
    report = build_site.build(tmp_path / "site", tmp_path / "work", tmp_path / "cache", None, 1, quiet=True)
    assert "chapters/ja/01-one.md (the English chapter is shown)" in report.fallbacks
    assert (tmp_path / "site" / "ja" / "chapters" / "ja" / "01-one.html").exists()


@pytest.mark.notebook
def test_a_notebook_cell_that_raises_fails_the_build(tmp_path):
    pytest.importorskip("nbclient")
    with pytest.raises(SystemExit, match=r"notebooks/src/99-broken.py: a cell raised[\s\S]*ZeroDivisionError"):
        build_site.execute(ROOT / "notebooks" / "src" / "99-broken.py", ["x = 1", "x / 0"], tmp_path, "none", 120)
    assert not list(tmp_path.iterdir())        # nothing cached for a notebook that failed


# ------------------------------------------------------------------------- the real site, in a real browser
BROWSER_NOTEBOOK = "05-layers"          # the one notebook the reduced build executes


def unsolved_exercises(notebook: str) -> list[str]:
    """The classroom exercises the notebook runs that this copy has not solved (none in the teacher's copy)."""
    from minitransformer.exercises.registry import load_exercises

    needs = json.loads((ROOT / "notebooks" / "src" / "exercises.json").read_text(encoding="utf-8"))["notebooks"]
    return [e.id for e in load_exercises(ROOT) if e.id in needs.get(notebook, []) and e.unsolved]


@pytest.mark.later          # minutes: the whole book built by Sphinx; CI runs it in its later step
@pytest.mark.slow
@pytest.mark.notebook
def test_the_site_in_a_browser(tmp_path):
    unsolved = unsolved_exercises(BROWSER_NOTEBOOK)
    if unsolved:      # a student edition: its notebooks stop at the first unsolved exercise, by design
        pytest.skip(f"this copy is a student edition: notebook {BROWSER_NOTEBOOK}, which the site test executes, "
                    f"needs Exercises {', '.join(unsolved)}; the site is built from the teacher's copy")
    need_site_tools()
    browser = chromium()
    out = tmp_path / "site"
    build = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "build_site.py"), "--execute", BROWSER_NOTEBOOK[:2], "--quiet", "--jobs", "1",
         "--out", str(out), "--work", str(tmp_path / "work"), "--cache", str(tmp_path / "cache")],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=900)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    assert (out / "en" / "_static" / "mathjax" / "MathJax.js").exists()      # the renderer ships with the site
    assert "cdn" not in (out / "en" / "chapters" / "05-layers.html").read_text(encoding="utf-8").lower()
    check_in_browser(out, browser)
    # a plain UserWarning, not a class of this file's: pytest-xdist's controller imports a warning's class by its
    # module's name, and this file, in tests/book, is importable only in the worker that ran it
    warnings.warn(UserWarning(f"not a problem: screenshots of the built site (a chapter, its notebook, the Japanese "
                              f"chapter, a search) are in {SCREENSHOTS}"), stacklevel=1)


def check_in_browser(out: Path, browser: str) -> None:
    from playwright.sync_api import sync_playwright

    if SCREENSHOTS.exists():
        shutil.rmtree(SCREENSHOTS)
    SCREENSHOTS.mkdir(parents=True)
    with sync_playwright() as playwright:
        chrome = playwright.chromium.launch(executable_path=browser, args=["--no-sandbox"])
        page = chrome.new_page(viewport={"width": 1280, "height": 1000})
        page.route("http*://**", lambda route: route.abort())        # offline: nothing may come from a network
        page.set_default_timeout(90_000)

        def open_page(url: str, shot: str) -> None:
            page.goto(url)
            page.wait_for_function("() => window.MathJax === undefined || (MathJax.Hub && MathJax.Hub.queue"
                                   " && MathJax.Hub.queue.pending === 0 && MathJax.Hub.queue.running === 0)")
            page.wait_for_function("() => [...document.images].every(image => image.complete)")
            page.screenshot(path=str(SCREENSHOTS / shot), full_page=False)

        def rendered_chapter(language: str) -> str:
            assert page.evaluate("document.querySelectorAll('.MathJax_Error').length") == 0
            assert page.evaluate("document.querySelectorAll('span.MathJax, div.MathJax_Display').length") >= 20
            text = page.evaluate("""() => { const article = document.querySelector('article').cloneNode(true);
                article.querySelectorAll('pre, code, script, style').forEach(node => node.remove());
                return article.innerText; }""")                  # the prose, without code listings
            assert not RAW_MATH.search(text), f"raw TeX left in the {language} chapter: {RAW_MATH.search(text)}"
            figures = page.evaluate("[...document.querySelectorAll('article img')]"
                                    ".map(image => [image.getAttribute('src'), image.naturalWidth])")
            assert any(src.endswith("05-xavier-activations.png") and width > 0 for src, width in figures), figures
            return text

        # the English chapter: equations rendered, figure shown, links to its notebook and sources
        open_page((out / "en" / "chapters" / "05-layers.html").as_uri(), "1-chapter-05-en.png")
        assert rendered_chapter("English").strip().startswith("Chapter 5 — Layers")
        assert page.locator("article a[href='../notebooks/05-layers.html']").count() >= 1
        assert page.locator("article a[href$='normalization.py.html']").count() >= 1
        page.locator("nav.bd-links >> text=Chapter 6 — Scaled dot-product attention").first.wait_for()

        # the notebook page: executed outputs, a plotted figure among them
        open_page((out / "en" / "notebooks" / "05-layers.html").as_uri(), "2-notebook-05-en.png")
        assert page.locator(".cell_output").count() >= 5
        plotted = page.evaluate("[...document.querySelectorAll('.cell_output img')].map(image => image.naturalWidth)")
        assert plotted and all(width > 0 for width in plotted), plotted
        page.locator(".cell_output img").first.scroll_into_view_if_needed()
        page.screenshot(path=str(SCREENSHOTS / "3-notebook-05-figure.png"))

        # the language switch leads to the Japanese chapter 5, in Japanese, equations and figure as in English
        page.goto((out / "en" / "chapters" / "05-layers.html").as_uri())
        page.click("p.mt-lang-switch a")
        page.wait_for_url("**/ja/chapters/ja/05-layers.html")
        open_page(page.url, "4-chapter-05-ja.png")
        japanese = rendered_chapter("Japanese")
        assert japanese.strip().startswith("第 5 章") and len(JAPANESE.findall(japanese)) > 2000

        # search, from disk
        open_page((out / "en" / "search.html").as_uri() + "?q=gradcheck", "5-search-gradcheck.png")
        page.wait_for_selector("#search-results ul.search li")
        hits = page.locator("#search-results ul.search li").count()
        assert hits >= 3, hits
        page.screenshot(path=str(SCREENSHOTS / "5-search-gradcheck.png"))
        chrome.close()
