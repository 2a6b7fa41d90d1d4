"""Build the book as a static website: chapters and executed notebooks, English and Japanese.

    python tools/build_site.py            # -> _build/site/index.html (open it from disk, no server needed)

Sphinx with MyST-NB and the Sphinx Book Theme turns chapters/*.md, chapters/ja/*.md and the
notebooks into one site per language (``_build/site/en/``, ``_build/site/ja/``), each with a chapter
sidebar, full-text search (the Japanese one splits words with Sphinx's Japanese splitter) and a link
on every page to the same page in the other language. The notebooks are executed here, in quick mode
(MT_QUICK=1), from their sources in notebooks/src/; the Japanese notebook is the same execution with
each Markdown cell replaced by its ``# %% [markdown] ja`` twin, so both languages show the same
outputs and figures. Equations are rendered by MathJax, copied from the ``jupyter-server-mathjax``
wheel into the site, never loaded from a network.

Every chapter and notebook page links to its twin (chapter <-> notebook) and to the source files the
chapter walks through (each shown as a page of the site); inline mentions such as
``minitransformer/tensor.py`` or ``notebooks/05-layers.ipynb`` become links too.

A Japanese chapter or notebook that does not exist yet is replaced by the English one under a notice
that says so, and a Japanese figure not drawn yet by the English figure; the build lists every such
fallback. The build fails on: a notebook cell that raises, a missing figure, a broken internal link
(Sphinx's own cross-reference warnings, and afterwards every href/src of every page, fragment included,
checked against the files written), TeX left raw in a page's text (a ``$`` MyST did not take for math), and
any other Sphinx warning.

Executed notebooks are cached (``_build/site-cache``), keyed by the notebook's source and every file of
the package, so a second build that changed only prose executes nothing. Needs ``pip install -e ".[site]"``.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import html
import html.parser
import json
import os
import posixpath
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = ROOT / "tools" / "site"
LANGS = ("en", "ja")
SOURCE_MENTION = re.compile(r"(?<![\[\w])`((?:minitransformer|benchmarks|tools|tests)/[\w/.-]+\.py|notebooks/[\w-]+\.ipynb)`(?!\])")
LINK = re.compile(r"(!?\[[^\]\n]*\]\()([^)\s]+)(\))")
FENCE = re.compile(r"^(```|~~~)")
TEXT = {
    "en": {
        "notebook": "Notebook", "chapter": "Chapter", "sources": "Source files walked through",
        "chapters": "Chapters", "notebooks": "Notebooks", "more": "More", "switch": "日本語",
        "nb_suffix": " (notebook)", "source_title": "Source files",
        "source_intro": "The files of the repository that the chapters walk through, as they are in this build.",
        "walked": "Walked through in", "not_run": "This reduced build did not execute this notebook: "
        "the full build (`python tools/build_site.py`) shows its outputs.",
        "index_intro": "The Transformer of *Attention Is All You Need*, built from scratch on a small autograd "
        "engine over NumPy and CuPy. Each chapter has a notebook, executed here in quick mode, with its "
        "outputs and figures.",
    },
    "ja": {
        "notebook": "ノートブック", "chapter": "章", "sources": "この章で読むソースファイル",
        "chapters": "章", "notebooks": "ノートブック", "more": "その他", "switch": "English",
        "nb_suffix": "（ノートブック）", "source_title": "ソースファイル",
        "source_intro": "各章が読み進めるリポジトリのファイル（このビルド時点のもの）です。",
        "walked": "この章で扱います:", "not_run": "この縮小ビルドではこのノートブックを実行していません。"
        "出力は完全なビルド（`python tools/build_site.py`）で表示されます。",
        "index_intro": "論文 *Attention Is All You Need* の Transformer を、NumPy と CuPy の上の小さな自動微分"
        "エンジンからゼロから作ります。各章にはノートブックがあり、ここでは quick モードで実行した出力と図を"
        "載せています。",
        "missing_chapter": "この章の日本語版はまだありません。英語版を載せています。",
        "missing_notebook": "このノートブックの日本語版のセルはまだありません。英語版を載せています。",
    },
}


@dataclass
class Report:
    fallbacks: list[str] = field(default_factory=list)
    executed: list[str] = field(default_factory=list)
    cached: list[str] = field(default_factory=list)
    not_executed: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------- Markdown
def outside_fences(text: str, edit) -> str:
    """Apply ``edit`` to the prose of a Markdown text, never inside a fenced code block."""
    out, prose, fence = [], [], None
    for line in text.split("\n"):
        marker = FENCE.match(line.lstrip())
        if fence is None and marker:
            out.append(edit("\n".join(prose))) if prose else None
            prose, fence = [], line.lstrip()[:3]
            out.append(line)
        elif fence is not None:
            out.append(line)
            if line.strip().startswith(fence) and line.strip().strip(fence[0]) == "":
                fence = None
        else:
            prose.append(line)
    if prose:
        out.append(edit("\n".join(prose)))
    return "\n".join(out)


def is_relative(target: str) -> bool:
    return not re.match(r"^([a-z][a-z0-9+.-]*:|#|/)", target)


def rewrite_links(text: str, change) -> str:
    """Rewrite each relative Markdown link or image target with ``change(target) -> target``."""
    def one(match):
        target = match.group(2)
        return match.group(1) + (change(target) if is_relative(target) else target) + match.group(3)
    return outside_fences(text, lambda prose: LINK.sub(one, prose))


def link_mentions(text: str, page_dir: str, lang: str) -> str:
    """Turn `minitransformer/x.py` and `notebooks/NN.ipynb` in the prose into links to their pages."""
    def one(match):
        path = match.group(1)
        if path.startswith("notebooks/"):
            target = f"notebooks/{'ja/' if lang == 'ja' else ''}{Path(path).name}"
        elif (ROOT / path).is_file():
            target = f"source/{path}.md"
        else:
            return match.group(0)
        return f"[`{path}`]({posixpath.relpath(target, page_dir)})"
    return outside_fences(text, lambda prose: SOURCE_MENTION.sub(one, prose))


def mentioned_sources(text: str) -> list[str]:
    return sorted({m for m in SOURCE_MENTION.findall(text) if m.endswith(".py") and (ROOT / m).is_file()})


def first_heading(text: str) -> str:
    return next((line[2:].strip() for line in text.split("\n") if line.startswith("# ")), "")


def lang_switch(lang: str, page: str) -> str:
    """Raw HTML for the top of a page: a link to the same page in the other language."""
    other = "ja" if lang == "en" else "en"
    twin = to_lang(page, other)
    depth = page.count("/") + 1          # the page's folder, plus the language folder
    href = "../" * depth + f"{other}/{twin}.html"
    return f'<p class="mt-lang-switch"><a href="{html.escape(href)}" hreflang="{other}">{TEXT[lang]["switch"]}</a></p>\n'


def to_lang(page: str, lang: str) -> str:
    """The docname of ``page`` (a docname in either language) in ``lang``."""
    for folder in ("chapters", "notebooks"):
        stem = page.removeprefix(f"{folder}/ja/").removeprefix(f"{folder}/")
        if page.startswith(f"{folder}/"):
            if stem == "glossary" and lang == "en" and not (ROOT / "chapters" / "glossary.md").exists():
                return "index"                       # no English glossary: the switch goes to the index
            return f"{folder}/ja/{stem}" if lang == "ja" else f"{folder}/{stem}"
    return page


# ---------------------------------------------------------------------------------------------- notebooks
def split_source(text: str) -> list[dict]:
    """Percent-format cells with their kind: 'code', 'markdown' or 'ja' (a ``# %% [markdown] ja`` twin)."""
    cells, kind, lines = [], None, []

    def flush():
        body = "\n".join(lines).strip("\n")
        if kind in ("markdown", "ja"):
            body = "\n".join(line[2:] if line.startswith("# ") else line.lstrip("#") for line in body.split("\n"))
        if kind is not None and body.strip():
            cells.append({"kind": kind, "source": body})

    for line in text.split("\n"):
        if line.startswith("# %%"):
            flush()
            tail = line.split("]", 1)[1].strip() if "[markdown]" in line else ""
            kind, lines = ("code" if "[markdown]" not in line else "ja" if tail == "ja" else "markdown"), []
        elif kind is not None:
            lines.append(line)
    flush()
    return cells


def with_chapter_exercises(text: str, stem: str, lang: str) -> str:
    """A notebook cell's ``{{exercises}}`` line as its chapter's exercise section (tools/build_notebooks.py)."""
    sys.path.insert(0, str(ROOT / "tools"))
    import build_notebooks

    if build_notebooks.EXERCISES not in text:
        return text
    return text.replace(build_notebooks.EXERCISES, build_notebooks.chapter_exercises(stem, lang))


def english_cells(cells: list[dict]) -> list[dict]:
    return [cell for cell in cells if cell["kind"] != "ja"]


def japanese_cells(cells: list[dict]) -> list[dict] | None:
    """Each English Markdown cell replaced by the ja twin that follows it; None when there are no twins."""
    if not any(cell["kind"] == "ja" for cell in cells):
        return None
    out = []
    for i, cell in enumerate(cells):
        if cell["kind"] == "markdown" and i + 1 < len(cells) and cells[i + 1]["kind"] == "ja":
            continue                                   # its twin, next, takes its place
        out.append({**cell, "kind": "markdown"} if cell["kind"] == "ja" else cell)
    return out


def package_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(ROOT.glob("minitransformer/**/*.py")):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def execute(source: Path, code: list[str], cache: Path, package: str, timeout: int) -> tuple[str, list]:
    """Run the code cells in quick mode (or take them from the cache); their outputs, cell by cell."""
    import nbformat

    key = hashlib.sha256(json.dumps([package, code, "MT_QUICK=1"]).encode()).hexdigest()[:20]
    cached = cache / f"{source.stem}-{key}.json"
    if cached.exists():
        return "cached", json.loads(cached.read_text(encoding="utf-8"))
    import nbclient

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in code])
    notebook.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    client = nbclient.NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                                     resources={"metadata": {"path": str(ROOT / "notebooks")}})
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as error:
        raise SystemExit(f"notebook {source.relative_to(ROOT)}: a cell raised\n{error}") from None
    outputs = [cell.outputs for cell in notebook.cells]
    cache.mkdir(parents=True, exist_ok=True)
    temporary = cached.with_suffix(".tmp")
    temporary.write_text(json.dumps(outputs), encoding="utf-8")
    temporary.replace(cached)
    for stale in cache.glob(f"{source.stem}-*.json"):      # earlier executions of this notebook, now outdated
        if stale != cached:
            stale.unlink()
    return "executed", outputs


def write_notebook(path: Path, cells: list[dict], outputs: list | None, lead: str) -> None:
    import nbformat

    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    notebook.metadata["language_info"] = {"name": "python"}
    code_outputs = iter(outputs or [])
    title, *rest = cells
    if title["kind"] == "code":
        raise SystemExit(f"{path.name}: a notebook source must open with a Markdown title cell")
    # the page's title stays first; the links and the language switch go right below it
    notebook.cells.append(nbformat.v4.new_markdown_cell(title["source"] + "\n\n" + lead))
    for cell in rest:
        if cell["kind"] == "code":
            new = nbformat.v4.new_code_cell(cell["source"])
            new.outputs = [nbformat.from_dict(o) for o in next(code_outputs, [])] if outputs is not None else []
            notebook.cells.append(new)
        else:
            notebook.cells.append(nbformat.v4.new_markdown_cell(cell["source"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)


# ---------------------------------------------------------------------------------------------- staging
def chapter_stems() -> list[str]:
    return [p.stem for p in sorted((ROOT / "chapters").glob("[0-9][0-9]-*.md"))]


def cross_links(lang: str, stem: str, here: str, sources: list[str], kind: str, notebook: bool = True) -> str:
    t = TEXT[lang]
    sub = "ja/" if lang == "ja" else ""
    parts = []
    if kind == "chapter" and notebook:
        parts.append(f"**{t['notebook']}:** [{stem}.ipynb]({posixpath.relpath(f'notebooks/{sub}{stem}.ipynb', here)})")
    elif kind == "notebook":
        parts.append(f"**{t['chapter']}:** [{stem}.md]({posixpath.relpath(f'chapters/{sub}{stem}.md', here)})")
    if sources:
        links = ", ".join(f"[`{s}`]({posixpath.relpath(f'source/{s}.md', here)})" for s in sources)
        parts.append(f"**{t['sources']}:** {links}")
    return "\\\n".join(parts) + "\n"      # one paragraph, a line break between the two


def stage(lang: str, src: Path, notebooks: dict, report: Report) -> None:
    """Lay out one language's Sphinx source folder, mirroring the repository's own layout."""
    t = TEXT[lang]
    if src.exists():
        shutil.rmtree(src)
    (src / "chapters").mkdir(parents=True)
    shutil.copytree(ROOT / "chapters" / "figures", src / "chapters" / "figures",
                    ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    mathjax = mathjax_folder()
    shutil.copytree(mathjax, src / "_mathjax" / "mathjax", ignore=shutil.ignore_patterns("SVG", "*.md"))
    sub = "ja/" if lang == "ja" else ""
    stems = chapter_stems()
    sources_of: dict[str, list[str]] = {}
    chapter_titles, notebook_titles = [], []

    # chapters
    for stem in stems:
        english = (ROOT / "chapters" / f"{stem}.md").read_text(encoding="utf-8")
        here = f"chapters/{sub}".rstrip("/")
        if lang == "en":
            text = english
        elif (ROOT / "chapters" / "ja" / f"{stem}.md").exists():
            text = (ROOT / "chapters" / "ja" / f"{stem}.md").read_text(encoding="utf-8")
        else:
            report.fallbacks.append(f"chapters/ja/{stem}.md (the English chapter is shown)")
            text = rewrite_links(english, deeper)
            title, _, body = text.partition("\n")
            text = f"{title}\n\n```{{note}}\n{t['missing_chapter']}\n```\n{body}"
        sources = mentioned_sources(english)
        sources_of[stem] = sources
        title, _, body = text.partition("\n")
        lead = lang_switch(lang, f"{here}/{stem}") + "\n" + cross_links(lang, stem, here, sources, "chapter", stem in notebooks)
        text = f"{title}\n\n{lead}\n{body}"
        text = link_mentions(text, here, lang)
        (src / here).mkdir(parents=True, exist_ok=True)
        (src / here / f"{stem}.md").write_text(text, encoding="utf-8")
        chapter_titles.append((first_heading(text), f"{here}/{stem}"))
        figure_fallbacks(text, src / here, report)

    # notebooks
    for stem in stems:
        if stem not in notebooks:
            continue
        cells, outputs = notebooks[stem]
        here = f"notebooks/{sub}".rstrip("/")
        chosen = english_cells(cells) if lang == "en" else japanese_cells(cells)
        notice = ""
        if chosen is None:
            report.fallbacks.append(f"notebooks/ja/{stem}.ipynb (no ja cells in notebooks/src/{stem}.py; the English notebook is shown)")
            chosen, notice = english_cells(cells), f"\n\n```{{note}}\n{t['missing_notebook']}\n```"
        if outputs is None:
            notice += f"\n\n```{{note}}\n{t['not_run']}\n```"
        # tools/build_notebooks.py's setup cell is left out: PYTHONPATH names this repository, and the cell
        # would only print this machine's paths into the page
        chosen = [{**c, "source": link_mentions(with_chapter_exercises(c["source"], stem, lang), here, lang)}
                  if c["kind"] != "code" else c for c in chosen]
        lead = lang_switch(lang, f"{here}/{stem}") + "\n" + cross_links(lang, stem, here, sources_of[stem], "notebook")
        write_notebook(src / here / f"{stem}.ipynb", chosen, outputs, lead + notice)
        notebook_titles.append((first_heading(chosen[0]["source"]) + t["nb_suffix"], f"{here}/{stem}"))

    # the classroom guide (English in both sites; its chapter links go to this language's chapters)
    teaching = (ROOT / "TEACHING.md").read_text(encoding="utf-8")
    if lang == "ja":
        teaching = rewrite_links(teaching, lambda target: re.sub(r"^chapters/(?!ja/)", "chapters/ja/", target))
    title, _, body = teaching.partition("\n")
    (src / "TEACHING.md").write_text(link_mentions(f"{title}\n\n{lang_switch(lang, 'TEACHING')}\n{body}", "", lang),
                                     encoding="utf-8")

    # one page per source file a chapter mentions
    every_source = sorted({s for text in mentioning_texts(notebooks) for s in mentioned_sources(text)})
    listing = [f"# {t['source_title']}\n", lang_switch(lang, "source/index"), t["source_intro"], "",
               "```{toctree}", ":maxdepth: 1", ""] + [f"{s} <{s}.md>" for s in every_source] + ["```", ""]
    (src / "source").mkdir()
    (src / "source" / "index.md").write_text("\n".join(listing), encoding="utf-8")
    for path in every_source:
        page = f"source/{path}"
        here = posixpath.dirname(page)
        used = [stem for stem, sources in sources_of.items() if path in sources]
        walked = ", ".join(f"[{stem}]({posixpath.relpath(f'chapters/{sub}{stem}.md', here)})" for stem in used)
        code = (ROOT / path).read_text(encoding="utf-8")
        fence = "`" * max(4, 1 + max((len(m) for m in re.findall(r"`+", code)), default=0))
        text = (f"# {path}\n\n{lang_switch(lang, page)}\n" + (f"{t['walked']} {walked}\n\n" if walked else "\n")
                + f"{fence}python\n{code}\n{fence}\n")
        (src / page).parent.mkdir(parents=True, exist_ok=True)
        (src / f"{page}.md").write_text(text, encoding="utf-8")

    # the front page and the sidebar
    def toctree(caption, entries):
        return ["```{toctree}", f":caption: {caption}", ":maxdepth: 1", ""] + \
               [f"{title} <{doc}>" for title, doc in entries] + ["```", ""]

    front = ["# minitransformer", "", lang_switch(lang, "index"), TEXT[lang]["index_intro"], ""]
    front += toctree(t["chapters"], chapter_titles) + toctree(t["notebooks"], notebook_titles)
    more = [("TEACHING.md", "TEACHING"), (t["source_title"], "source/index")]
    folder = "chapters/ja" if lang == "ja" else "chapters"      # the glossary: terms the book assumes (and, in
    glossary = ROOT / folder / "glossary.md"                    # Japanese, the edition's translated terms)
    if glossary.exists():
        text = glossary.read_text(encoding="utf-8")
        title, _, body = text.partition("\n")
        page = f"{folder}/glossary"
        (src / f"{page}.md").write_text(link_mentions(f"{title}\n\n{lang_switch(lang, page)}\n{body}", folder, lang),
                                        encoding="utf-8")
        more.insert(1, (first_heading(text), page))
    front += toctree(t["more"], more)
    (src / "index.md").write_text("\n".join(front), encoding="utf-8")


def mentioning_texts(notebooks: dict) -> list[str]:
    """Every text whose `path/to/file.py` mentions become links: chapters, TEACHING.md, notebooks' Markdown."""
    texts = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "chapters").glob("**/*.md"))]
    texts.append((ROOT / "TEACHING.md").read_text(encoding="utf-8"))
    texts += [cell["source"] for cells, _ in notebooks.values() for cell in cells if cell["kind"] != "code"]
    return texts


def deeper(target: str) -> str:
    """An English chapter's link, as seen from chapters/ja/ (the fallback for a missing translation)."""
    if target.startswith("figures/"):
        return "../figures/ja/" + target.removeprefix("figures/")
    if target.startswith("../notebooks/") and target.endswith(".ipynb"):
        return "../../notebooks/ja/" + target.removeprefix("../notebooks/")
    if target.startswith("../"):
        return "../" + target
    return target                          # another chapter: its Japanese twin sits beside it


def figure_fallbacks(text: str, page_dir: Path, report: Report) -> None:
    """A Japanese figure not drawn yet is replaced by the English one, and listed; any other missing figure fails later."""
    for match in re.finditer(r"!\[[^\]]*\]\(([^)\s]+)\)", text):
        target = (page_dir / match.group(1)).resolve()
        if target.exists() or target.parent.name != "ja":
            continue
        english = target.parent.parent / target.name
        if english.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(english, target)
            report.fallbacks.append(f"chapters/figures/ja/{target.name} (the English figure is shown)")


def mathjax_folder() -> Path:
    try:
        import jupyter_server_mathjax
    except ImportError:
        raise SystemExit('the site needs MathJax from the jupyter-server-mathjax wheel: pip install -e ".[site]"') from None
    return Path(jupyter_server_mathjax.__file__).parent / "static"


# ---------------------------------------------------------------------------------------------- checks
class _Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.refs = set(), []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for name in ("id", "name"):
            if attrs.get(name):
                self.ids.add(attrs[name])
        for name in ("href", "src"):
            if attrs.get(name) and tag in ("a", "img", "link", "script", "source", "iframe"):
                self.refs.append(attrs[name])


def check_links(site: Path) -> list[str]:
    """Every relative href/src of every page names a file that exists, and an id that exists in it."""
    pages: dict[Path, _Page] = {}

    def parse(path: Path) -> _Page:
        if path not in pages:
            page = _Page()
            page.feed(path.read_text(encoding="utf-8", errors="replace"))
            pages[path] = page
        return pages[path]

    broken = []
    for path in sorted(site.rglob("*.html")):
        if set(path.relative_to(site).parts[1:2]) & {"_static", "_sources"}:
            continue                                      # the theme's template fragments, not pages
        for ref in parse(path).refs:
            if not is_relative(ref) and not ref.startswith("#"):
                continue
            target, _, fragment = ref.partition("#")
            target = target.split("?")[0]
            file = (path.parent / target).resolve() if target else path
            if file.is_dir():
                file = file / "index.html"
            where = f"{path.relative_to(site)}: {ref}"
            if not file.exists():
                broken.append(f"{where} (no such file)")
            elif fragment and file.suffix == ".html" and fragment not in parse(file).ids:
                broken.append(f"{where} (no id {fragment!r} there)")
    return broken


RAW_TEX = re.compile(r"(?<![\\$])\$[^$\s][^$\n]*\$|\\\(|\\\[")
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class _Prose(html.parser.HTMLParser):
    """A page's text outside code, scripts and the math Sphinx hands to MathJax."""

    def __init__(self):
        super().__init__()
        self.skipping, self.depth, self.text = [], 0, []

    def handle_starttag(self, tag, attrs):
        if tag not in VOID:
            skip = tag in ("pre", "code", "script", "style") or "math" in (dict(attrs).get("class") or "").split()
            self.skipping.append(skip)
            self.depth += skip

    def handle_endtag(self, tag):
        if tag not in VOID and self.skipping:
            self.depth -= self.skipping.pop()

    def handle_data(self, data):
        if not self.depth:
            self.text.append(data)


def check_math(site: Path) -> list[str]:
    """No chapter or notebook page shows TeX that MyST did not take for math (a stray or unbalanced $)."""
    raw = []
    for path in sorted([*site.glob("*/chapters/**/*.html"), *site.glob("*/notebooks/**/*.html")]):
        prose = _Prose()
        prose.feed(path.read_text(encoding="utf-8"))
        text = "".join(prose.text)
        raw += [f"{path.relative_to(site)}: raw TeX left in the text: {text[max(0, m.start() - 30):m.end() + 10]!r}"
                for m in RAW_TEX.finditer(text)]
    return raw


# ---------------------------------------------------------------------------------------------- build
def run_sphinx(lang: str, src: Path, out: Path, doctrees: Path, quiet: bool) -> list[str]:
    from sphinx.application import Sphinx
    from sphinx.util.docutils import docutils_namespace

    warnings = []

    class Collect:
        def write(self, text):
            if text.strip():
                warnings.append(text.strip())
            if not quiet:
                sys.stderr.write(text)

    with docutils_namespace():
        app = Sphinx(str(src), str(CONF_DIR), str(out), str(doctrees), "html",
                     confoverrides={"language": lang}, status=None if quiet else sys.stdout,
                     warning=Collect(), freshenv=True, keep_going=True)
        app.build()
    return warnings


FRONT = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>minitransformer</title>
<meta http-equiv="refresh" content="0; url=en/index.html"></head>
<body><p><a href="en/index.html">minitransformer (English)</a> · <a href="ja/index.html">minitransformer（日本語）</a></p></body></html>
"""


def build(out: Path, work: Path, cache: Path, execute_only: set[str] | None, jobs: int, quiet: bool) -> Report:
    report = Report()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # kernels side by side: one BLAS thread each (chapter 10)
    os.environ.update(MT_QUICK="1", PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    os.environ.pop("MT_SAVE_FIGURES", None)       # the notebooks must not redraw the chapters' figures here
    os.environ.pop("MPLBACKEND", None)            # the kernel's inline backend, so figures appear in the page
    package = package_digest()
    notebooks, runs = {}, {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for stem in chapter_stems():
            source = ROOT / "notebooks" / "src" / f"{stem}.py"
            if not source.exists():
                continue
            cells = split_source(source.read_text(encoding="utf-8"))
            notebooks[stem] = cells
            if execute_only is None or stem[:2] in execute_only:
                code = [c["source"] for c in english_cells(cells) if c["kind"] == "code"]
                runs[stem] = pool.submit(execute, source, code, cache, package, 900)
        results = {}
        for stem in notebooks:
            if stem in runs:
                how, outputs = runs[stem].result()
                (report.executed if how == "executed" else report.cached).append(stem)
                results[stem] = (notebooks[stem], outputs)
            else:
                report.not_executed.append(stem)
                results[stem] = (notebooks[stem], None)
    if out.exists():
        shutil.rmtree(out)
    problems = []
    for lang in LANGS:
        stage(lang, work / lang, results, report)
        warnings = run_sphinx(lang, work / lang, out / lang, work / f"doctrees-{lang}", quiet)
        problems += [f"[{lang}] {w}" for w in warnings]
    (out / "index.html").write_text(FRONT, encoding="utf-8")
    (out / ".nojekyll").write_text("", encoding="utf-8")
    problems += check_links(out) + check_math(out)
    if problems:
        raise SystemExit("the site has problems:\n  " + "\n  ".join(problems))
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "site", help="where the site goes (default _build/site)")
    parser.add_argument("--work", type=Path, default=ROOT / "_build" / "site-work", help="Sphinx's source folders and doctrees")
    parser.add_argument("--cache", type=Path, default=ROOT / "_build" / "site-cache", help="executed notebooks, reused")
    parser.add_argument("--execute", default="all",
                        help="'all' (default), or the chapter numbers whose notebooks run, e.g. 01,05; the others "
                             "are shown without outputs (a reduced build, for the site's test)")
    parser.add_argument("--jobs", type=int, default=2, help="notebooks executed at once")
    parser.add_argument("--quiet", action="store_true", help="print only problems and the summary")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    only = None if args.execute == "all" else {n.strip().zfill(2) for n in args.execute.split(",") if n.strip()}
    report = build(args.out.resolve(), args.work.resolve(), args.cache.resolve(), only, args.jobs, args.quiet)
    print(f"notebooks executed: {', '.join(report.executed) or 'none'}; from the cache: {', '.join(report.cached) or 'none'}"
          + (f"; not executed (reduced build): {', '.join(report.not_executed)}" if report.not_executed else ""))
    if report.fallbacks:
        print("Japanese pages not written yet, shown in English:\n  " + "\n  ".join(report.fallbacks))
    print(f"site built in {time.perf_counter() - started:.0f} s: {args.out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
