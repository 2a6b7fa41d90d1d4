"""Fonts that can draw Japanese in a figure (plot.py, figure_language.py).

The package depends on matplotlib-fontja, a small wheel that ships the IPAex Gothic font.
``bundled_font`` registers that file with matplotlib without importing the package (whose import also
changes matplotlib's default font for the whole process); ``cjk_font`` finds a font that really covers
the characters of a text. matplotlib is imported inside each function, never when the package is.
"""
from __future__ import annotations

import functools
from pathlib import Path

CJK_FONT_HINTS = ("Noto Sans CJK", "Noto Serif CJK", "Noto Sans JP", "Source Han", "IPAexGothic", "IPAGothic",
                  "IPAPGothic", "TakaoGothic", "VL Gothic", "Hiragino", "Yu Gothic", "MS Gothic", "Meiryo",
                  "Droid Sans Fallback", "WenQuanYi", "Unifont")


@functools.lru_cache(maxsize=None)
def _font_charmap(path: str) -> frozenset:
    from matplotlib.ft2font import FT2Font  # noqa: PLC0415 - lazy by design
    try:
        return frozenset(FT2Font(path).get_charmap())
    except Exception:  # an unreadable font file: treat as covering nothing
        return frozenset()


@functools.lru_cache(maxsize=None)
def bundled_font() -> str | None:
    """The path of matplotlib-fontja's IPAex Gothic, registered with matplotlib; None if not installed.

    The font file is found without importing matplotlib_fontja, whose import also switches matplotlib's
    default font family for the whole process; here only the font becomes available.
    """
    import importlib.util  # noqa: PLC0415

    from matplotlib import font_manager  # noqa: PLC0415
    spec = importlib.util.find_spec("matplotlib_fontja")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "fonts" / "ipaexg.ttf"
    if not path.is_file():
        return None
    font_manager.fontManager.addfont(str(path))
    return str(path)


def cjk_font(sample: str = "日本語の猫を食べた") -> str | None:
    """The name of a font that can draw ``sample`` (kanji and kana): matplotlib-fontja's first, or None."""
    from matplotlib import font_manager  # noqa: PLC0415
    bundled_font()
    needed = {ord(c) for c in sample if not c.isspace()}
    fonts = sorted(font_manager.fontManager.ttflist,
                   key=lambda f: not any(h.lower() in f.name.lower() for h in CJK_FONT_HINTS))
    for font in fonts:
        if font.name.startswith("Last Resort"):  # maps every code point to a "missing glyph" box
            continue
        if needed <= _font_charmap(font.fname):
            return font.name
    return None
