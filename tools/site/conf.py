"""Sphinx settings for the book's website; tools/build_site.py lays out the sources and runs Sphinx with them.

Sphinx is run once per language (``language`` is set by the build: ``en`` or ``ja``); the source folder
mirrors the repository (chapters/, notebooks/, TEACHING.md) so the chapters' relative links hold as written.
"""
from pathlib import Path

project = "minitransformer"
author = "the minitransformer authors"
copyright = "the minitransformer authors, MIT license"
extensions = ["myst_nb", "sphinx.ext.mathjax"]
exclude_patterns = ["_mathjax/**", "**/.ipynb_checkpoints"]
master_doc = root_doc = "index"
suppress_warnings = [
    "myst.header",          # the chapters' headings are as on the code host; a skipped level is not an error
]

# MyST: $…$ and $$…$$ math, heading anchors like the code host's (#51-layer-normalization)
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 4
myst_update_mathjax = False

# MyST-NB: tools/build_site.py has executed the notebooks already (quick mode, cached); render their outputs
nb_execution_mode = "off"
nb_merge_streams = True

# MathJax 2.7 from the jupyter-server-mathjax wheel, copied into _static/mathjax by the build: no CDN. Its one
# combined configuration (TeX input, HTML-CSS output) with the STIX web fonts it ships, which load from disk too.
mathjax_path = "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full"
mathjax3_config = None
mathjax2_config = {
    "tex2jax": {"inlineMath": [["\\(", "\\)"]], "displayMath": [["\\[", "\\]"]], "processEscapes": True},
    "HTML-CSS": {"availableFonts": ["STIX-Web"], "preferredFont": "STIX-Web", "webFont": "STIX-Web", "imageFont": None},
    "showMathMenu": False,
    "messageStyle": "none",
}

html_theme = "sphinx_book_theme"
html_title = "minitransformer"
html_static_path = ["static"]
html_css_files = ["minitransformer.css"]
html_last_updated_fmt = None
html_theme_options = {
    "home_page_in_toc": True,
    "show_toc_level": 2,
    "use_download_button": True,
    "use_fullscreen_button": False,
    "navigation_with_keys": False,
}


def _per_language(app, config):
    if config.language == "ja":
        config.html_title = "minitransformer（日本語版）"
        config.html_search_language = "ja"


def _ship_mathjax(app):
    # the MathJax folder is laid out by the build inside the source folder; Sphinx copies it to _static/
    app.config.html_static_path.append(str(Path(app.srcdir) / "_mathjax"))


def setup(app):
    app.connect("config-inited", _per_language)
    app.connect("builder-inited", _ship_mathjax)
