"""textlint over the Japanese edition (tools/textlint_ja.py): the preset ja-technical-writing in です・ます and
the glossary as prh rules.

The prh rules are written from the glossary and must match it (no node needed). With textlint installed
(`npm ci`), the edition is linted and no file may have more errors of a rule than
benchmarks/book/results/textlint_ja.json records (`python tools/textlint_ja.py --record` after fixing some; the aim
is none); and made-up texts show the linter catches a glossary violation and a 120-character sentence, and
passes a clean paragraph. Without node or node_modules these skip, except where MT_REQUIRE_TEXTLINT=1 (CI),
where they fail.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import glossary_prh  # noqa: E402
import textlint_ja  # noqa: E402

REQUIRE_TEXTLINT = os.environ.get("MT_REQUIRE_TEXTLINT") == "1"


def need_textlint() -> None:
    reason = ("node is not installed" if shutil.which("node") is None else
              "textlint is not installed (node_modules missing): run `npm ci`" if not textlint_ja.TEXTLINT.is_file()
              else None)
    if reason:
        if REQUIRE_TEXTLINT:
            pytest.fail(f"MT_REQUIRE_TEXTLINT=1 but textlint cannot run: {reason}")
        pytest.skip(reason)


def test_the_prh_rules_are_written_from_the_current_glossary():
    assert glossary_prh.main(["--check"]) == 0, "run python tools/glossary_prh.py"


def test_every_rejected_variant_of_the_glossary_is_a_prh_rule():
    rows = glossary_prh.glossary_rows(glossary_prh.GLOSSARY.read_text(encoding="utf-8"))
    patterns = {rule["pattern"] for rule in glossary_prh.prh_rules(glossary_prh.GLOSSARY.read_text(encoding="utf-8"))}
    rejected = {variant.partition("→")[0].strip() for _, _, variants in rows for variant in variants}
    assert len(rejected) >= 20 and rejected == patterns


# Variants the generator once mapped to the other side of their row's pair by string similarity (issue 49):
# variant -> (the term it means, the term of the other side it was turned into).
REVERSED_ONCE = {
    "ターゲット言語": ("目的言語", "原言語"),
    "ターゲット側": ("目的言語側", "原言語側"),
    "プリミティブ": ("基本演算", "基本演算を組み合わせた"),
    "big モデル": ("ビッグモデル", "ベースモデル"),
    "変異体": ("ミュータント", "ミューテーションテスト"),
    "加法的注意": ("加法的アテンション", "加法的なスコア"),
}
# Rows that name two sides of a pair, and how a variant says which side it stands for.
SIDES = {
    "source / target language": {"原言語": ("ソース", "原"), "目的言語": ("ターゲット", "目的")},
    "source side / target side (tokens, subwords)": {"原言語側": ("ソース", "原"), "目的言語側": ("ターゲット", "目的")},
    "base model, big model (§6.1)": {"ベースモデル": ("base", "ベース"), "ビッグモデル": ("big", "ビッグ")},
    "mutation test, mutant": {"ミューテーションテスト": ("テスト",), "ミュータント": ("体", "ミュータント")},
}


def glossary_rules() -> dict[str, dict]:
    return {rule["pattern"]: rule for rule in glossary_prh.prh_rules(glossary_prh.GLOSSARY.read_text(encoding="utf-8"))}


def test_the_variants_once_reversed_map_to_their_own_side():
    rules = glossary_rules()
    for variant, (meant, reversed_to) in REVERSED_ONCE.items():
        assert rules[variant]["expected"] == meant != reversed_to, (variant, rules[variant]["expected"])


def test_no_variant_of_a_paired_row_maps_to_the_other_side():
    rules = [rule for rule in glossary_rules().values() if rule["english"] in SIDES]
    assert {rule["english"] for rule in rules} == set(SIDES)
    for rule in rules:
        sides = SIDES[rule["english"]]
        own = [term for term, marks in sides.items() if any(mark in rule["pattern"] for mark in marks)]
        assert len(own) == 1, f"{rule['pattern']}: which side? {own}"
        assert rule["expected"] == own[0], f"{rule['pattern']} -> {rule['expected']}, the other side of {own[0]}"


def test_a_variant_without_an_arrow_is_refused():
    table = "| English | 訳語 | 使わない表記 | 出典 |\n|---|---|---|---|\n| source / target language | 原言語、目的言語 | {} | |\n"
    with pytest.raises(ValueError, match="ターゲット言語.*no arrow"):
        glossary_prh.prh_rules(table.format("ターゲット言語"))
    with pytest.raises(ValueError, match="no arrow"):
        glossary_prh.prh_rules(table.format("ターゲット言語→"))
    assert glossary_prh.prh_rules(table.format("ターゲット言語→目的言語"))[0]["expected"] == "目的言語"


def test_a_variant_skips_the_ordinary_words_it_is_part_of():
    found = lambda written, text: re.findall(glossary_prh.variant_regex(written), text)   # noqa: E731
    assert found("文の対（除く：文の対応）", "文の対応を見ます。") == []
    assert found("文の対（除く：文の対応）", "文の対を並べます。") == ["文の対"]
    assert found("訓練（除く：訓練データ）", "訓練データで訓練します。") == ["訓練"]
    assert found("交差注意（除く：自己交差注意・交差注意機構）", "自己交差注意と交差注意機構と交差注意") == ["交差注意"]
    assert found("注意（除く：不注意さ）", "不注意さと不注意と注意さ") == ["注意", "注意"]    # both sides at once
    with pytest.raises(ValueError, match="does not contain"):
        glossary_prh.variant_regex("文の対（除く：対訳）")


def test_a_glossary_without_its_table_is_named():
    with pytest.raises(ValueError, match="訳語"):
        glossary_prh.glossary_rows("| English | term | avoid |\n|---|---|---|\n| a | b | c |\n")


def lint_text(tmp_path: Path, text: str) -> list[dict]:
    planted = tmp_path / "planted.md"
    planted.write_text(text, encoding="utf-8")
    return textlint_ja.lint(only=[planted])


def a_rejected_variant() -> tuple[str, str]:
    rule = glossary_prh.prh_rules(glossary_prh.GLOSSARY.read_text(encoding="utf-8"))[0]
    return rule["pattern"], rule["expected"]


def test_a_clean_paragraph_passes(tmp_path):
    need_textlint()
    assert lint_text(tmp_path, "# 見出し\n\n勾配を計算します。結果は 1 つの数です。\n") == []


def test_a_planted_glossary_violation_fails(tmp_path):
    need_textlint()
    variant, term = a_rejected_variant()
    messages = lint_text(tmp_path, f"# 見出し\n\nここでは{variant}を使います。\n")
    assert [m["rule"] for m in messages] == ["prh"] and term in messages[0]["message"], messages


def test_a_planted_sentence_of_120_characters_fails(tmp_path):
    need_textlint()
    sentence = ("この章ではスカラーの連鎖律から始めて配列の自動微分エンジンを組み立て、数値微分と比べて勾配が正しい"
                "ことを確かめながら、最後には新しい演算を自分で定義して逆伝播を書く方法と、その演算をテストで確かめる"
                "手順までを一度に、順を追って説明していきます。")
    assert len(sentence) >= 120
    messages = lint_text(tmp_path, f"# 見出し\n\n{sentence}\n")
    assert "sentence-length" in {m["rule"] for m in messages}, messages


def test_notebook_cells_are_reported_at_their_source_line(tmp_path):
    source = tmp_path / "01-x.py"
    source.write_text("# %% [markdown]\n# English.\n\n# %% [markdown] ja\n# 日本語。\n#\n# 次の段落。\n",
                      encoding="utf-8")
    text, lines = textlint_ja.japanese_cells_as_markdown(source)
    numbered = dict(zip(lines, text.split("\n")))
    assert numbered[5] == "日本語。" and numbered[7] == "次の段落。"


def test_no_japanese_text_has_more_textlint_errors_than_recorded():
    need_textlint()
    recorded = json.loads(textlint_ja.RESULTS.read_text(encoding="utf-8"))["by_file"]
    now = textlint_ja.counts(textlint_ja.lint())["by_file"]
    worse = [f"{file}: {rule} {n} (recorded {recorded.get(file, {}).get(rule, 0)})"
             for file, rules in now.items() for rule, n in rules.items() if n > recorded.get(file, {}).get(rule, 0)]
    assert not worse, ("textlint finds more errors than benchmarks/book/results/textlint_ja.json records (python "
                       "tools/textlint_ja.py lists them; rewrite the sentences):\n  " + "\n  ".join(worse))


def test_math_is_not_linted_as_prose_but_keeps_its_lines():
    text = "前 $x_t, y_t, z_t, w_t$ と後。\n\n$$\nf(x) = a, b, c, d!\n$$\n\n次の段落。価格は $5 と $6 です。\n"
    stripped = textlint_ja.without_math(text)
    assert stripped.count("\n") == text.count("\n")
    assert "前 `x` と後。" in stripped and "f(x)" not in stripped and "$5 と $6" in stripped
