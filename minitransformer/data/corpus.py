"""The built-in English <-> Japanese corpus: sentence pairs generated from a small grammar.

No download: a grammar with a real lexicon (people, animals, food, objects,
places; verbs with their Japanese conjugations; adjectives; numbers with
counters; times) generates sentence pairs for a seed. Each sentence is first
built as a small meaning (who does what to whom, where, when, tense, polarity,
question or not), then written out in both languages, so every English
sentence has exactly one Japanese translation and back.

Japanese differs from English in ways that make attention maps interesting:
the verb comes last (SVO -> SOV), particles mark roles (は が を に で へ と),
relative clauses come before their noun ("the cat that ate the fish" ->
"魚 を 食べ た 猫"), and time and place phrases move to the front.

English is lowercased with punctuation as separate tokens ("the cat ate the fish .").
Japanese is written in kanji and kana, segmented into words with spaces, with
verb stems split from their endings ("食べ ます", "食べ た", "飲ま ない"), as
word segmenters like KyTea do for the small_parallel_enja corpus.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass, field, replace

# ---------------------------------------------------------------------------
# The corpus container (shared with loaders.py)
# ---------------------------------------------------------------------------


@dataclass
class Corpus:
    """Sentence pairs in splits, stored as (english, foreign) strings.

    ``pairs(split, direction)`` returns (source, target) pairs: "en-ja" keeps
    the stored order, "ja-en" swaps it. ``test_heldout`` (built-in corpus only)
    holds sentences with word combinations never seen together in training.
    """

    train: list[tuple[str, str]]
    dev: list[tuple[str, str]]
    test: list[tuple[str, str]]
    test_heldout: list[tuple[str, str]] = field(default_factory=list)
    languages: tuple[str, str] = ("en", "ja")
    direction: str = "en-ja"  # the default direction of pairs()
    name: str = "builtin"

    SPLITS = ("train", "dev", "test", "test_heldout")

    def __post_init__(self) -> None:
        self.direction = self._check_direction(self.direction)

    @property
    def directions(self) -> tuple[str, str]:
        english, foreign = self.languages
        return f"{english}-{foreign}", f"{foreign}-{english}"

    def _check_direction(self, direction: str) -> str:
        if direction not in self.directions:
            raise ValueError(f"unknown direction {direction!r} for corpus {self.name!r}; "
                             f"expected one of {self.directions}")
        return direction

    def split(self, split: str) -> list[tuple[str, str]]:
        """The stored (english, foreign) pairs of one split."""
        if split not in self.SPLITS:
            raise ValueError(f"unknown split {split!r}; expected one of {self.SPLITS}")
        return getattr(self, split)

    def pairs(self, split: str, direction: str | None = None) -> list[tuple[str, str]]:
        """(source, target) pairs of ``split`` in ``direction`` (default: ``self.direction``)."""
        direction = self._check_direction(direction or self.direction)
        pairs = self.split(split)
        if direction == self.directions[0]:
            return list(pairs)
        return [(foreign, english) for english, foreign in pairs]

    def sizes(self) -> dict[str, int]:
        return {split: len(self.split(split)) for split in self.SPLITS}


# ---------------------------------------------------------------------------
# Lexicon
# ---------------------------------------------------------------------------

PERSON, ANIMAL, FOOD, DRINK, OBJECT, PLACE = "person", "animal", "food", "drink", "object", "place"
ANIMATE = frozenset({PERSON, ANIMAL})


@dataclass(frozen=True)
class Noun:
    en: str
    ja: str
    kind: str                       # PERSON, ANIMAL, FOOD, DRINK, OBJECT, PLACE
    counter: str | None = None      # Japanese counter word ("匹", "冊"); None = not countable here
    plural: str | None = None       # English plural when countable
    tags: frozenset = frozenset()   # finer classes used by verbs ("openable", "furniture", ...)
    prep: str = "in"                # places: "in the park", "at the station"
    name: bool = False              # a person's name: no article, no plural

    def has(self, classes: frozenset) -> bool:
        return self.kind in classes or bool(self.tags & classes)


@dataclass(frozen=True)
class Pronoun:
    en: str          # subject form
    en_object: str
    en_possessive: str
    ja: str
    agreement: str   # "1sg", "2", "3sg", "pl"

    kind = PERSON


def _plural(word: str) -> str:
    if word.endswith(("s", "x", "ch", "sh")):
        return word + "es"
    if word.endswith("y") and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


def _nouns(kind: str, table: str, counter: str | None = None, tags: frozenset = frozenset(),
           prep: str = "in") -> list[Noun]:
    """Parse 'english japanese [counter] [plural=...]' entries separated by '|'."""
    nouns = []
    for entry in table.split("|"):
        fields = entry.split()
        en, ja, rest = fields[0].replace("_", " "), fields[1], fields[2:]
        this_counter, plural = counter, None
        for item in rest:
            if item.startswith("plural="):
                plural = item[len("plural="):]
            elif item == "-":
                this_counter = None
            else:
                this_counter = item
        if this_counter is not None and plural is None:
            plural = _plural(en)
        nouns.append(Noun(en, ja, kind, this_counter, plural, tags, prep))
    return nouns


PEOPLE = _nouns(PERSON, """teacher 先生 | student 学生 | doctor 医者 | child 子供 plural=children |
    boy 男の子 | girl 女の子 | man 男の人 plural=men | woman 女の人 plural=women | baby 赤ちゃん plural=babies |
    nurse 看護師 | singer 歌手 | farmer 農家 | police_officer 警察官 | friend 友達 | cook 料理人""",
                counter="人")
PROFESSIONS = [n for n in PEOPLE if n.en in {"teacher", "student", "doctor", "nurse", "singer",
                                              "farmer", "police officer", "cook"}]
NAMES = [Noun(en, ja, PERSON, name=True) for en, ja in [
    ("taro", "太郎"), ("hanako", "花子"), ("kenji", "健二"), ("yumi", "由美"),
    ("tom", "トム"), ("mary", "メアリー"), ("emma", "エマ"), ("john", "ジョン")]]
PRONOUNS = [Pronoun("i", "me", "my", "私", "1sg"), Pronoun("you", "you", "your", "あなた", "2"),
            Pronoun("he", "him", "his", "彼", "3sg"), Pronoun("she", "her", "her", "彼女", "3sg"),
            Pronoun("we", "us", "our", "私たち", "pl"), Pronoun("they", "them", "their", "彼ら", "pl")]
ANIMALS = _nouns(ANIMAL, """cat 猫 | dog 犬 | bird 鳥 | horse 馬 | cow 牛 | rabbit うさぎ | mouse ねずみ plural=mice |
    monkey 猿 | bear 熊 | elephant 象 | lion ライオン | tiger 虎 | panda パンダ | fox きつね plural=foxes |
    frog かえる | pig 豚 | sheep 羊 plural=sheep | snake 蛇 | duck あひる | fish 魚 plural=fish""",
                 counter="匹")
FOODS = _nouns(FOOD, """apple りんご | bread パン - | rice ご飯 - | meat 肉 - | egg 卵 | cake ケーキ |
    banana バナナ | orange オレンジ | tomato トマト plural=tomatoes | sandwich サンドイッチ |
    cheese チーズ - | carrot にんじん 本 | cookie クッキー 枚 | strawberry いちご | potato じゃがいも plural=potatoes |
    fish 魚 匹 plural=fish | noodles ラーメン - | curry カレー -""", counter="個")
DRINKS = _nouns(DRINK, """water 水 | milk 牛乳 | tea お茶 | coffee コーヒー | juice ジュース | soup スープ""")
PHYSICAL = frozenset({"physical"})  # objects you can touch (not "music" or "song")
OBJECTS = (
    _nouns(OBJECT, "book 本 冊 | notebook ノート 冊 | dictionary 辞書 冊 plural=dictionaries",
           tags=frozenset({"physical", "openable"}))
    + _nouns(OBJECT, "letter 手紙 通", tags=frozenset({"physical", "writable"}))
    + _nouns(OBJECT, "picture 絵 枚 | photo 写真 枚 | map 地図 枚 | ticket 切符 枚 | shirt シャツ 枚 | towel タオル 枚",
             tags=frozenset({"physical", "flat"}))
    + _nouns(OBJECT, "pen ペン 本 | umbrella 傘 本 | key 鍵 本 | bottle 瓶 本 | guitar ギター 本", tags=PHYSICAL)
    + _nouns(OBJECT, """bag かばん 個 | box 箱 個 plural=boxes | basket かご 個""",
             tags=frozenset({"physical", "openable", "container"}))
    + _nouns(OBJECT, "door ドア - | window 窓 -", tags=frozenset({"physical", "openable"}))
    + _nouns(OBJECT, "car 車 台 | bicycle 自転車 台 | computer コンピューター 台 | camera カメラ 台 | phone 電話 台",
             tags=PHYSICAL)
    + _nouns(OBJECT, "ball ボール 個 | hat 帽子 個 | watch 時計 個 plural=watches | cup カップ 個 | doll 人形 個 | toy おもちゃ 個",
             tags=PHYSICAL)
    + _nouns(OBJECT, "table テーブル 台 | desk 机 台 | chair いす 脚 | bed ベッド 台 | sofa ソファー 台",
             tags=frozenset({"physical", "furniture"}))
    + _nouns(OBJECT, "song 歌 曲 | music 音楽 -", tags=frozenset({"audible"}))
    + _nouns(OBJECT, "radio ラジオ 台", tags=frozenset({"audible", "physical"}))
    + _nouns(OBJECT, "flower 花 本 | tree 木 本", tags=frozenset({"physical", "plant"}))
    + _nouns(OBJECT, "newspaper 新聞 部", tags=PHYSICAL)
)
PLACES = (
    _nouns(PLACE, "park 公園 | library 図書館 plural=libraries | restaurant レストラン | house 家 | garden 庭 | river 川 | "
           "sea 海 | kitchen 台所 | room 部屋 | classroom 教室 | forest 森 | town 町 | hotel ホテル | museum 博物館",
           counter=None, prep="in")
    + _nouns(PLACE, "station 駅 | school 学校 | hospital 病院 | store 店 | zoo 動物園 | market 市場 | airport 空港 | "
             "bank 銀行 | beach 浜辺", counter=None, prep="at")
    + _nouns(PLACE, "mountain 山", counter=None, prep="on")
)
INDOOR = frozenset({"house", "kitchen", "room", "classroom", "library", "restaurant", "hotel", "museum",
                    "store", "school", "hospital"})
PLACES = [replace(p, tags=frozenset({"indoor"})) if p.en in INDOOR else p for p in PLACES]

COMMON_NOUNS = PEOPLE + ANIMALS + FOODS + DRINKS + OBJECTS + PLACES
FOODS_ALSO_ANIMALS = [n for n in FOODS if n.en in {a.en for a in ANIMALS}]  # "fish"
NUMBERS = [("two", "二"), ("three", "三"), ("four", "四"), ("five", "五"),
           ("six", "六"), ("seven", "七"), ("eight", "八"), ("nine", "九")]


@dataclass(frozen=True)
class Adjective:
    en: str
    ja: str
    na: bool                 # na-adjective (静か な) or i-adjective (大きい)
    applies_to: frozenset    # noun kinds and tags it can describe

    # Japanese forms. i-adjectives: 大きい / 大きかっ た / 大きく ない; na-adjectives take the copula.
    def attributive(self) -> list[str]:
        return [self.ja, "な"] if self.na else [self.ja]

    def predicate(self, past: bool, negative: bool) -> list[str]:
        if self.na:
            if negative:
                return [self.ja, "で", "は", "あり", "ません"] + (["でした"] if past else [])
            return [self.ja, "でした" if past else "です"]
        stem = self.ja[:-1]
        if negative:
            return [stem + "く", "なかっ", "た", "です"] if past else [stem + "く", "ない", "です"]
        return [stem + "かっ", "た", "です"] if past else [self.ja, "です"]


def _adjectives(table: str, applies_to: set[str], na: bool = False) -> list[Adjective]:
    return [Adjective(en, ja, na, frozenset(applies_to))
            for en, ja in (entry.split() for entry in table.split("|"))]


ADJECTIVES = (
    _adjectives("big 大きい | small 小さい", {ANIMAL, "physical", PLACE, FOOD})
    + _adjectives("new 新しい | old 古い", {"physical", PLACE})
    + _adjectives("red 赤い | white 白い | black 黒い | blue 青い", {"physical"})
    + _adjectives("long 長い", {"pen", "umbrella", "letter", "towel", "song", "train"})
    + _adjectives("heavy 重い", {"bag", "box", "book", "dictionary", "computer", "camera", "chair", "table",
                                "desk", "bed", "sofa", "guitar", "bottle", "basket"})
    + _adjectives("expensive 高い | cheap 安い", {"physical", FOOD, DRINK})
    + _adjectives("delicious おいしい", {FOOD, DRINK})
    + _adjectives("cold 冷たい", {DRINK})
    + _adjectives("cute かわいい", {ANIMAL, "doll", "toy", "hat", "cup", "bag"})
    + _adjectives("young 若い | busy 忙しい | clever 賢い", {PERSON})
    + _adjectives("beautiful 美しい", {PLACE, ANIMAL, "plant"})
    + _adjectives("dirty 汚い", {"physical", PLACE, ANIMAL})
    + _adjectives("kind 親切 | famous 有名", {PERSON}, na=True)
    + _adjectives("quiet 静か | pretty きれい", {PLACE}, na=True)
    + _adjectives("lively にぎやか", {PLACE}, na=True)
    + _adjectives("convenient 便利", {"physical"}, na=True)
)


# --- verbs -------------------------------------------------------------------

@dataclass(frozen=True)
class JapaneseVerb:
    """Word-segmented forms: dictionary (食べ る), masu stem (食べ), nai (食べ ない), ta (食べ た), te (食べ て)."""

    dictionary: tuple[str, ...]
    masu_stem: tuple[str, ...]
    nai: tuple[str, ...]
    ta: tuple[str, ...]
    te: tuple[str, ...]

    def plain(self, past: bool, negative: bool = False, progressive: bool = False) -> list[str]:
        """Plain (dictionary) style, used inside relative and subordinate clauses."""
        if progressive:
            return [*self.te, "い", "た" if past else "る"]
        if negative:
            return [*self.nai[:-1], "なかっ", "た"] if past else list(self.nai)
        return list(self.ta if past else self.dictionary)

    def polite(self, past: bool, negative: bool = False, progressive: bool = False) -> list[str]:
        """Polite (-masu) style, used for main clauses."""
        stem = [*self.te, "い"] if progressive else list(self.masu_stem)
        if negative:
            return stem + (["ません", "でした"] if past else ["ません"])
        return stem + (["ました"] if past else ["ます"])


def ichidan(stem: str) -> JapaneseVerb:
    return JapaneseVerb((stem, "る"), (stem,), (stem, "ない"), (stem, "た"), (stem, "て"))


# godan ending -> (masu-stem kana, nai-stem kana, ta/te sound change, voiced ta/te)
_GODAN = {"う": ("い", "わ", "っ", False), "つ": ("ち", "た", "っ", False), "る": ("り", "ら", "っ", False),
          "む": ("み", "ま", "ん", True), "ぶ": ("び", "ば", "ん", True), "ぬ": ("に", "な", "ん", True),
          "く": ("き", "か", "い", False), "ぐ": ("ぎ", "が", "い", True), "す": ("し", "さ", "し", False)}


def godan(root: str, ending: str, onbin: str | None = None) -> JapaneseVerb:
    i_kana, a_kana, sound, voiced = _GODAN[ending]
    sound = onbin or sound
    ta, te = ("だ", "で") if voiced else ("た", "て")
    return JapaneseVerb((root, ending), (root + i_kana,), (root + a_kana, "ない"),
                        (root + sound, ta), (root + sound, te))


def suru(noun: str) -> JapaneseVerb:
    return JapaneseVerb((noun, "する"), (noun, "し"), (noun, "し", "ない"), (noun, "し", "た"), (noun, "し", "て"))


IRU = ichidan("い")                                                       # to be (animate)
ARU = JapaneseVerb(("あ", "る"), ("あり",), ("ない",), ("あっ", "た"), ("あっ", "て"))  # to be (inanimate)


@dataclass(frozen=True)
class Verb:
    base: str
    third: str
    past: str
    ing: str
    ja: JapaneseVerb
    frame: str                       # "trans", "intrans", "motion" (to a place), "ditrans" (X to Y)
    subjects: frozenset              # noun kinds that can be the subject
    objects: frozenset = frozenset()  # noun kinds/tags that can be the object
    prep: str | None = None          # English preposition before the object ("look for", "listen to")
    progressive: bool = True         # "is eating" -> 食べ て い ます
    companion: bool = False          # "with X" -> X と
    place: bool = True               # "in the park" -> 公園 で
    request: bool = True             # "please ..." / "let 's ..."


def _verb(forms: str, ja: JapaneseVerb, frame: str, subjects, objects=(), **options) -> Verb:
    """forms = 'base past [ing] [third]' (regular forms derived when missing)."""
    words = forms.split()
    base, past = words[0], words[1]
    ing = words[2] if len(words) > 2 else (base[:-1] + "ing" if base.endswith("e") and not base.endswith("ee")
                                             else base + "ing")
    third = words[3] if len(words) > 3 else (base + "es" if base.endswith(("s", "sh", "ch", "x", "o"))
                                             else base[:-1] + "ies" if base.endswith("y") and base[-2] not in "aeiou"
                                             else base + "s")
    return Verb(base, third, past, ing, ja, frame, frozenset(subjects), frozenset(objects), **options)


PEOPLE_ONLY = {PERSON}
THINGS = {OBJECT, FOOD, DRINK}
VERBS = [
    _verb("eat ate", ichidan("食べ"), "trans", ANIMATE, {FOOD}),
    _verb("drink drank", godan("飲", "む"), "trans", ANIMATE, {DRINK}),
    _verb("buy bought", godan("買", "う"), "trans", PEOPLE_ONLY, {FOOD, DRINK, OBJECT}),
    _verb("sell sold", godan("売", "る"), "trans", PEOPLE_ONLY, {FOOD, OBJECT}),
    _verb("make made", godan("作", "る"), "trans", PEOPLE_ONLY, {FOOD, "container", "doll", "toy"}),
    _verb("see saw seeing", ichidan("見"), "trans", ANIMATE, {PERSON, ANIMAL, OBJECT, PLACE}, progressive=False),
    _verb("find found", ichidan("見つけ"), "trans", ANIMATE, {ANIMAL, OBJECT, FOOD}, progressive=False),
    _verb("wash washed", godan("洗", "う"), "trans", PEOPLE_ONLY, {OBJECT, ANIMAL, FOOD}),
    _verb("carry carried", godan("運", "ぶ"), "trans", PEOPLE_ONLY, {OBJECT, FOOD}),
    _verb("open opened", ichidan("開け"), "trans", PEOPLE_ONLY, {"openable"}, progressive=False),
    _verb("close closed", ichidan("閉め"), "trans", PEOPLE_ONLY, {"openable"}, progressive=False),
    _verb("cook cooked", suru("料理"), "trans", PEOPLE_ONLY, {FOOD}),
    _verb("clean cleaned", suru("掃除"), "trans", PEOPLE_ONLY, {"indoor", "furniture", "car"}),
    _verb("write wrote writing", godan("書", "く"), "trans", PEOPLE_ONLY, {"writable"}),
    _verb("draw drew", godan("描", "く"), "trans", PEOPLE_ONLY, {ANIMAL, OBJECT, PLACE, PERSON}),
    _verb("call called", godan("呼", "ぶ"), "trans", PEOPLE_ONLY, {PERSON, ANIMAL}),
    _verb("chase chased", ichidan("追いかけ"), "trans", ANIMATE, {PERSON, ANIMAL}),
    _verb("catch caught", ichidan("捕まえ"), "trans", ANIMATE, {ANIMAL}, progressive=False),
    _verb("help helped", godan("手伝", "う"), "trans", PEOPLE_ONLY, {PERSON}),
    _verb("wait waited", godan("待", "つ"), "trans", ANIMATE, {PERSON, ANIMAL}, prep="for"),
    _verb("look looked", godan("探", "す"), "trans", ANIMATE, {OBJECT, ANIMAL, PERSON}, prep="for"),
    _verb("listen listened", godan("聞", "く"), "trans", PEOPLE_ONLY, {"audible"}, prep="to"),
    _verb("visit visited", ichidan("訪れ"), "trans", PEOPLE_ONLY, {PLACE}, progressive=False),
    _verb("bite bit biting", godan("噛", "む"), "trans", {ANIMAL}, {PERSON, ANIMAL, FOOD}, request=False),
    _verb("throw threw", ichidan("投げ"), "trans", PEOPLE_ONLY, {"ball", "key", "hat", "doll", "toy"}),
    _verb("sleep slept", ichidan("寝"), "intrans", ANIMATE),
    _verb("run ran running", godan("走", "る"), "intrans", ANIMATE),
    _verb("walk walked", godan("歩", "く"), "intrans", ANIMATE, companion=True),
    _verb("swim swam swimming", godan("泳", "ぐ"), "intrans", ANIMATE),
    _verb("sing sang", godan("歌", "う"), "intrans", PEOPLE_ONLY),
    _verb("dance danced", godan("踊", "る"), "intrans", PEOPLE_ONLY, companion=True),
    _verb("laugh laughed", godan("笑", "う"), "intrans", PEOPLE_ONLY, request=False),
    _verb("cry cried", godan("泣", "く"), "intrans", ANIMATE, request=False),
    _verb("play played", godan("遊", "ぶ"), "intrans", ANIMATE, companion=True),
    _verb("work worked", godan("働", "く"), "intrans", PEOPLE_ONLY),
    _verb("study studied", suru("勉強"), "intrans", PEOPLE_ONLY, companion=True),
    _verb("rest rested", godan("休", "む"), "intrans", ANIMATE),
    _verb("talk talked", godan("話", "す"), "intrans", PEOPLE_ONLY, companion=True),
    _verb("go went going goes", godan("行", "く", onbin="っ"), "motion", ANIMATE, {PLACE}, progressive=False),
    _verb("come came", ichidan("来"), "motion", ANIMATE, {PLACE}, progressive=False),
    _verb("return returned", godan("帰", "る"), "motion", ANIMATE, {PLACE}, progressive=False),
    _verb("give gave", ichidan("あげ"), "ditrans", PEOPLE_ONLY, {FOOD, OBJECT}, progressive=False),
    _verb("send sent", godan("送", "る"), "ditrans", PEOPLE_ONLY, {"letter", "flat", "book", "flower"},
          progressive=False),
    _verb("show showed", ichidan("見せ"), "ditrans", PEOPLE_ONLY, {OBJECT}, progressive=False),
    _verb("lend lent", godan("貸", "す"), "ditrans", PEOPLE_ONLY, {"book", "notebook", "dictionary", "pen", "umbrella",
                                                                 "car", "bicycle", "camera", "ball", "guitar"},
          progressive=False),
]
# Objects named by their English word ("ball", "car") make a class of their own.
COMMON_BY_WORD = {n.en: n for n in COMMON_NOUNS}


def _can_fill(noun: Noun | Pronoun, classes: frozenset) -> bool:
    """Whether ``noun`` belongs to one of ``classes`` (noun kinds, tags or English words)."""
    if isinstance(noun, Pronoun):
        return PERSON in classes
    return noun.has(classes) or noun.en in classes


# --- times ---------------------------------------------------------------------

@dataclass(frozen=True)
class Time:
    en: tuple[str, ...]
    ja: tuple[str, ...]
    past: bool                   # may go with the past tense
    nonpast: str | None          # English for the non-past: "present", "future" or None (not allowed)
    progressive: frozenset = frozenset()  # tenses allowed with the progressive ("past", "present")


def _time(en: str, ja: str, past: bool, nonpast: str | None, progressive: set = frozenset()) -> Time:
    return Time(tuple(en.split()), tuple(ja.split()), past, nonpast, frozenset(progressive))


TIMES = [
    _time("yesterday", "昨日", True, None, {"past"}),
    _time("last week", "先週", True, None),
    _time("last night", "昨夜", True, None, {"past"}),
    _time("this morning", "今朝", True, None, {"past"}),
    _time("tomorrow", "明日", False, "future"),
    _time("next week", "来週", False, "future"),
    _time("today", "今日", True, "future"),
    _time("on sunday", "日曜日 に", True, "future"),
    _time("on saturday", "土曜日 に", True, "future"),
    _time("every day", "毎日", True, "present"),
    _time("every morning", "毎朝", True, "present"),
    _time("in the morning", "朝", True, "present"),
    _time("in the evening", "夕方", True, "present"),
    _time("at night", "夜", True, "present"),
    _time("now", "今", False, None, {"present"}),
] + [_time(f"at {en} o'clock", f"{ja} 時 に", True, "future", {"past"}) for en, ja in NUMBERS[1:]]

# Where something is: "under the table" -> テーブル の 下 に
RELATIONS = [("on", "上", frozenset({"furniture"})), ("under", "下", frozenset({"furniture"})),
             ("in", "中", frozenset({"container"})), ("near", "近く", frozenset({PLACE, "furniture"})),
             ("behind", "後ろ", frozenset({PLACE, "furniture"})),
             ("in front of", "前", frozenset({PLACE, "furniture"})),
             ("next to", "隣", frozenset({PLACE, "furniture"}))]


# ---------------------------------------------------------------------------
# Meaning: noun phrases and clauses, written out in both languages
# ---------------------------------------------------------------------------

@dataclass
class NounPhrase:
    head: Noun | Pronoun
    adjective: Adjective | None = None
    possessor: Noun | Pronoun | None = None      # "my", "taro 's", "the teacher 's"
    number: tuple[str, str] | None = None        # ("three", "三"): counted and plural
    relative: "Clause | None" = None             # the clause has a gap where the head goes
    gap: str | None = None                       # "subject" or "object": the head's role in it
    also: "NounPhrase | None" = None             # "X and Y"

    @property
    def agreement(self) -> str:
        if self.also is not None or self.number is not None:
            return "pl"
        return self.head.agreement if isinstance(self.head, Pronoun) else "3sg"


@dataclass
class Clause:
    verb: Verb
    subject: NounPhrase | None               # None: imperative, or the gap of a relative clause
    obj: NounPhrase | None = None
    recipient: NounPhrase | None = None
    goal: Noun | None = None                 # motion verbs: "to the park" -> 公園 へ
    companion: NounPhrase | None = None      # "with the dog" -> 犬 と
    place: Noun | None = None                # "in the park" -> 公園 で
    time: Time | None = None
    past: bool = False
    negative: bool = False
    progressive: bool = False
    wh: str | None = None                    # "who", "whom", "what", "where", "when"

    @property
    def english_tense(self) -> str:
        """Japanese has past / non-past; English non-past is present or future (from the time)."""
        if self.past:
            return "past"
        if self.time is not None and not self.progressive:
            return self.time.nonpast
        return "present"


# --- English -----------------------------------------------------------------

def _article(next_word: str) -> str:
    return "an" if next_word[0] in "aeiou" else "a"


def _be(agreement: str, past: bool) -> str:
    if past:
        return "was" if agreement in ("1sg", "3sg") else "were"
    return {"1sg": "am", "3sg": "is"}.get(agreement, "are")


def en_possessor(possessor: Noun | Pronoun) -> list[str]:
    if isinstance(possessor, Pronoun):
        return [possessor.en_possessive]
    return ([possessor.en] if possessor.name else ["the", possessor.en]) + ["'s"]


def en_np(np: NounPhrase, case: str = "subject", indefinite: bool = False) -> list[str]:
    """English noun phrase: determiner, adjective, noun, relative clause."""
    if np.also is not None:
        return en_np(replace(np, also=None), case, indefinite) + ["and"] + en_np(np.also, case, indefinite)
    head = np.head
    if isinstance(head, Pronoun):
        return [head.en if case == "subject" else head.en_object]
    words = ([np.adjective.en] if np.adjective else []) + [head.plural if np.number else head.en]
    if head.name:
        determiner = []
    elif np.number is not None:
        determiner = [np.number[0]]
    elif np.possessor is not None:
        determiner = en_possessor(np.possessor)
    else:
        determiner = [_article(words[0])] if indefinite else ["the"]
    tokens = determiner + words
    if np.relative is not None:
        tokens += ["that"] + en_relative(np.relative, np.gap, np.agreement)
    return tokens


def en_verb(clause: Clause, agreement: str, question: bool = False) -> tuple[list[str], list[str]]:
    """(auxiliary, rest) of the English verb group; a question moves the auxiliary before the subject."""
    verb, tense, negative = clause.verb, clause.english_tense, clause.negative
    nots = ["not"] if negative else []
    if clause.progressive:
        return [_be(agreement, clause.past)], nots + [verb.ing]
    if tense == "future":
        return ["will"], nots + [verb.base]
    if negative or question:
        auxiliary = "did" if tense == "past" else ("does" if agreement == "3sg" else "do")
        return [auxiliary], nots + [verb.base]
    if tense == "past":
        return [], [verb.past]
    return [], [verb.third if agreement == "3sg" else verb.base]


def en_complements(clause: Clause, object_gap: bool = False) -> list[str]:
    """Everything after the verb: object, recipient, goal, companion, place, time.

    A missing object (asked for, or the gap of a relative clause) leaves its
    preposition behind: "what did the dog look for ?", "the key that he looked for".
    """
    verb, tokens = clause.verb, []
    if clause.obj is not None or clause.wh in ("what", "whom") or object_gap:
        if verb.prep:
            tokens.append(verb.prep)
        if clause.obj is not None:
            tokens += en_np(clause.obj, "object")
    if clause.recipient is not None:
        tokens += ["to"] + en_np(clause.recipient, "object")
    if clause.goal is not None:
        tokens += ["to", "the", clause.goal.en]
    if clause.companion is not None:
        tokens += ["with"] + en_np(clause.companion, "object")
    if clause.place is not None:
        tokens += [clause.place.prep, "the", clause.place.en]
    if clause.time is not None:
        tokens += list(clause.time.en)
    return tokens


def en_statement(clause: Clause, object_gap: bool = False) -> list[str]:
    auxiliary, rest = en_verb(clause, clause.subject.agreement)
    return en_np(clause.subject) + auxiliary + rest + en_complements(clause, object_gap)


def en_question(clause: Clause) -> list[str]:
    """Yes/no question, or a wh-question when clause.wh is set."""
    if clause.wh == "who":  # the subject is asked for: no inversion
        auxiliary, rest = en_verb(clause, "3sg")
        return ["who"] + auxiliary + rest + en_complements(clause)
    auxiliary, rest = en_verb(clause, clause.subject.agreement, question=True)
    front = {"whom": ["who"], "what": ["what"], "where": ["where"], "when": ["when"]}.get(clause.wh, [])
    return front + auxiliary + en_np(clause.subject) + rest + en_complements(clause)


def en_relative(clause: Clause, gap: str, head_agreement: str) -> list[str]:
    if gap == "subject":
        auxiliary, rest = en_verb(clause, head_agreement)
        return auxiliary + rest + en_complements(clause)
    return en_statement(clause, object_gap=True)  # the object is missing


# --- Japanese ----------------------------------------------------------------

def ja_possessor(possessor: Noun | Pronoun) -> list[str]:
    return [possessor.ja, "の"]


def ja_np(np: NounPhrase) -> list[str]:
    """Japanese noun phrase: relative clause, possessor, adjective, noun (numbers go after the particle)."""
    if np.also is not None:
        return ja_np(replace(np, also=None)) + ["と"] + ja_np(np.also)
    tokens = []
    if np.relative is not None:
        tokens += ja_clause(np.relative, "plain")
    if np.possessor is not None:
        tokens += ja_possessor(np.possessor)
    if np.adjective is not None:
        tokens += np.adjective.attributive()
    return tokens + [np.head.ja]


def ja_np_particle(np: NounPhrase, particle: str) -> list[str]:
    """Noun phrase + particle; a number floats after the particle: りんご を 三 個."""
    tokens = ja_np(np) + [particle]
    if np.number is not None:
        tokens += [np.number[1], np.head.counter]
    return tokens


def ja_clause(clause: Clause, style: str, topic: bool = False) -> list[str]:
    """Japanese clause, verb last. style: "polite" (main clause), "plain" (relative / when), "te" (joined by and).

    Order: subject は/が, time, place で, companion と, recipient に, goal へ, object を, verb.
    """
    tokens = []
    if clause.wh == "who":
        tokens += ["誰", "が"]
    elif clause.subject is not None:
        tokens += ja_np_particle(clause.subject, "は" if topic else "が")
    if clause.wh == "when":
        tokens += ["いつ"]
    elif clause.time is not None:
        tokens += list(clause.time.ja)
    if clause.wh == "where" and clause.verb.frame != "motion":
        tokens += ["どこ", "で"]
    elif clause.place is not None:
        tokens += [clause.place.ja, "で"]
    if clause.companion is not None:
        tokens += ja_np_particle(clause.companion, "と")
    if clause.recipient is not None:
        tokens += ja_np_particle(clause.recipient, "に")
    if clause.wh == "where" and clause.verb.frame == "motion":
        tokens += ["どこ", "へ"]
    elif clause.goal is not None:
        tokens += [clause.goal.ja, "へ"]
    if clause.wh == "what":
        tokens += ["何", "を"]
    elif clause.wh == "whom":
        tokens += ["誰", "を"]
    elif clause.obj is not None:
        tokens += ja_np_particle(clause.obj, "を")
    verb = clause.verb.ja
    if style == "polite":
        tokens += verb.polite(clause.past, clause.negative, clause.progressive)
    elif style == "plain":
        tokens += verb.plain(clause.past, clause.negative, clause.progressive)
    elif style == "te":
        tokens += list(verb.te)
    else:
        raise ValueError(f"unknown style {style!r}")
    return tokens


# ---------------------------------------------------------------------------
# Sampling meanings
# ---------------------------------------------------------------------------

@functools.cache
def _nouns_in(classes: frozenset) -> list[Noun]:
    return [n for n in COMMON_NOUNS if _can_fill(n, classes)]


@functools.cache
def _adjectives_for(noun: Noun) -> list[Adjective]:
    return [a for a in ADJECTIVES if _can_fill(noun, a.applies_to)]


Combination = tuple[str, str, str]  # ("subject-verb", "cat", "eat") or ("adjective-noun", "big", "cat")

# How often each construction is drawn.
CONSTRUCTION_WEIGHTS = {
    "statement": 30, "yes_no_question": 8, "wh_question": 9, "adjective_predicate": 7,
    "noun_predicate": 4, "like": 4, "existential": 7, "location": 5, "request": 5,
    "and": 5, "but": 5, "when": 4,
}
MAX_TOKENS = 20


@dataclass
class Sentence:
    english: str
    japanese: str
    construction: str
    combinations: frozenset  # of Combination


class _Sampler:
    """Draws random meanings with a ``random.Random`` and writes them out in both languages."""

    def __init__(self, rng: random.Random, weights: dict[str, float] | None = None) -> None:
        self.rng = rng
        weights = weights or CONSTRUCTION_WEIGHTS
        unknown = set(weights) - set(CONSTRUCTION_WEIGHTS)
        if unknown:
            raise ValueError(f"unknown constructions {sorted(unknown)}; known: {sorted(CONSTRUCTION_WEIGHTS)}")
        self.constructions = [name for name, weight in weights.items() if weight > 0]
        self.weights = [weights[name] for name in self.constructions]
        self.combinations: set[Combination] = set()
        self.force: Combination | None = None   # still to be placed in the sentence being built
        self.target: Combination | None = None  # what the sentence being built must contain

    # --- helpers -------------------------------------------------------------
    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def choice(self, items):
        return items[self.rng.randrange(len(items))]

    # --- which word combinations a sentence contains (read from its final meaning) ---
    def note_subject(self, np: NounPhrase | None, verb_name: str) -> None:
        while np is not None:
            if isinstance(np.head, Noun) and not np.head.name:
                self.combinations.add(("subject-verb", np.head.en, verb_name))
            np = np.also

    def note_np(self, np: NounPhrase | None) -> None:
        while np is not None:
            if np.adjective is not None:
                self.combinations.add(("adjective-noun", np.adjective.en, np.head.en))
            if np.relative is not None:
                if np.gap == "subject":
                    self.note_subject(replace(np, also=None), np.relative.verb.base)
                self.note_clause(np.relative)
            np = np.also

    def note_clause(self, clause: Clause) -> None:
        if clause.wh != "who":
            self.note_subject(clause.subject, clause.verb.base)
        for np in (clause.subject, clause.obj, clause.recipient, clause.companion):
            self.note_np(np)

    def _forced(self, kind: str) -> tuple[str, str] | None:
        if self.force is not None and self.force[0] == kind:
            return self.force[1], self.force[2]
        return None

    # --- noun phrases ----------------------------------------------------------
    def common_noun(self, classes: frozenset, exclude: set = frozenset()) -> Noun | None:
        candidates = [n for n in _nouns_in(frozenset(classes)) if n.en not in exclude]
        return self.choice(candidates) if candidates else None

    def noun_phrase(self, classes: frozenset, case: str = "subject", exclude: set = frozenset(),
                    decorate: bool = True, relative: bool = True, countable: bool = False,
                    pronouns: bool = True) -> NounPhrase | None:
        """A noun phrase whose head belongs to ``classes`` (kinds, tags or words)."""
        forced = self._forced("adjective-noun")
        if forced is not None and decorate:
            adjective_name, noun_name = forced
            noun = COMMON_BY_WORD[noun_name]
            if _can_fill(noun, classes) and noun_name not in exclude:
                adjective = next(a for a in ADJECTIVES if a.en == adjective_name)
                self.force = None  # use it once
                return NounPhrase(noun, adjective)
        if PERSON in classes and self.chance(0.45):
            if pronouns and self.chance(0.5):
                options = [p for p in PRONOUNS if p.en not in exclude]
                return NounPhrase(self.choice(options))
            options = [n for n in NAMES if n.en not in exclude]
            return NounPhrase(self.choice(options))
        noun = self.common_noun(classes, exclude)
        if noun is None:
            return None
        np = NounPhrase(noun)
        if not decorate:
            return np
        if countable and noun.counter and self.chance(0.12):
            np.number = self.choice(NUMBERS)
        adjectives = _adjectives_for(noun)
        if adjectives and self.chance(0.2):
            np.adjective = self.choice(adjectives)
        if np.number is None:
            if relative and self.chance(0.1):
                self.add_relative(np)
            elif noun.kind in (ANIMAL, OBJECT, PLACE) and self.chance(0.1):
                np.possessor = self.choice(PRONOUNS + NAMES + PROFESSIONS[:3])
        return np

    def add_relative(self, np: NounPhrase) -> None:
        """Attach "that ..." with the head as subject or object of the inner clause."""
        head = np.head
        if head.kind in ANIMATE and self.chance(0.6):  # subject gap: "the cat that ate the fish"
            verbs = [v for v in VERBS if head.kind in v.subjects]
            verb = self.choice(verbs)
            clause = self.clause(verb, subject=None, exclude={head.en}, simple=True)
            np.gap = "subject"
        else:  # object gap: "the fish that the cat ate"
            verbs = [v for v in VERBS if v.frame in ("trans", "ditrans") and _can_fill(head, v.objects)]
            if not verbs:
                return
            verb = self.choice(verbs)
            subject = self.noun_phrase(verb.subjects, exclude={head.en}, decorate=False)
            clause = self.clause(verb, subject=subject, exclude={head.en}, simple=True, gap_object=True)
            np.gap = "object"
        clause.past = self.chance(0.6)
        clause.progressive = clause.verb.progressive and self.chance(0.15)
        clause.negative = not clause.progressive and self.chance(0.15)
        np.relative = clause

    # --- clauses ---------------------------------------------------------------
    def subject_for(self, verb: Verb, conjoin: bool = False) -> NounPhrase:
        forced = self._forced("subject-verb")
        if forced is not None and forced[1] == verb.base:
            self.force = None
            return NounPhrase(COMMON_BY_WORD[forced[0]])
        np = self.noun_phrase(verb.subjects)
        if conjoin and isinstance(np.head, Noun) and np.relative is None and np.number is None \
                and self.chance(0.08):
            np.also = self.noun_phrase(verb.subjects, exclude={np.head.en}, decorate=False, pronouns=False)
        return np

    def clause(self, verb: Verb, subject: NounPhrase | None, exclude: set = frozenset(),
               simple: bool = False, gap_object: bool = False) -> Clause:
        """Fill the verb's roles. ``simple``: no relative clauses, place or time (inside other phrases)."""
        clause = Clause(verb, subject)
        exclude = set(exclude)
        if subject is not None and isinstance(subject.head, (Noun, Pronoun)):
            exclude.add(subject.head.en)
        if verb.frame in ("trans", "ditrans") and not gap_object:
            clause.obj = self.noun_phrase(verb.objects, "object", exclude=exclude,
                                          relative=not simple, countable=not simple)
            if clause.obj is None:
                raise LookupError(f"no object for {verb.base}")
            exclude.add(clause.obj.head.en)
        if verb.frame == "ditrans":
            clause.recipient = self.noun_phrase(frozenset({PERSON}), "object", exclude=exclude, decorate=False)
            exclude.add(clause.recipient.head.en)
        if verb.frame == "motion":
            clause.goal = self.common_noun(frozenset({PLACE}))
        if verb.companion and self.chance(0.2):
            clause.companion = self.noun_phrase(frozenset({PERSON, ANIMAL}) & verb.subjects | {PERSON},
                                                "object", exclude=exclude, decorate=False)
        if verb.place and verb.frame != "motion" and self.chance(0.15 if simple else 0.3):
            clause.place = self.common_noun(frozenset({PLACE}))
        return clause

    def tense_and_time(self, clause: Clause, time: bool = True, negative: float = 0.2,
                       progressive: float = 0.15) -> None:
        clause.past = self.chance(0.55)
        clause.progressive = clause.verb.progressive and self.chance(progressive)
        clause.negative = self.chance(negative)
        if time and self.chance(0.35):
            tense = "past" if clause.past else "present"
            if clause.progressive:
                options = [t for t in TIMES if tense in t.progressive]
            elif clause.past:
                options = [t for t in TIMES if t.past]
            else:
                options = [t for t in TIMES if t.nonpast is not None]
            clause.time = self.choice(options) if options else None

    def action_clause(self, conjoin: bool = True, simple: bool = False, verbs: list[Verb] | None = None) -> Clause:
        forced = self._forced("subject-verb")
        if forced is not None:
            verb = next(v for v in VERBS if v.base == forced[1])
        else:
            verb = self.choice(verbs or VERBS)
        subject = self.subject_for(verb, conjoin=conjoin)
        return self.clause(verb, subject, simple=simple)

    # --- constructions -----------------------------------------------------------
    def statement(self):
        clause = self.action_clause()
        self.tense_and_time(clause)
        self.note_clause(clause)
        return en_statement(clause) + ["."], ja_clause(clause, "polite", topic=True) + ["。"]

    def yes_no_question(self):
        clause = self.action_clause()
        self.tense_and_time(clause, negative=0.0)
        self.note_clause(clause)
        return en_question(clause) + ["?"], ja_clause(clause, "polite", topic=True) + ["か", "？"]

    def wh_question(self):
        clause = self.action_clause(conjoin=False)
        self.tense_and_time(clause, negative=0.0)
        options = ["when"] if clause.time is None else []
        if self.target is None or self.target[0] != "subject-verb":
            options.append("who")
        if clause.obj is not None and clause.obj.relative is None:
            options.append("whom" if clause.obj.head.kind == PERSON else "what")
        if clause.verb.frame == "motion" or (clause.verb.place and clause.place is None):
            options.append("where")
        if not options:  # nothing left to ask for: a yes/no question instead
            self.note_clause(clause)
            return en_question(clause) + ["?"], ja_clause(clause, "polite", topic=True) + ["か", "？"]
        clause.wh = self.choice(options)
        if clause.wh == "who":
            clause.subject = None
        elif clause.wh in ("what", "whom"):
            clause.obj = None
        elif clause.wh == "where":
            clause.goal = clause.place = None
        self.note_clause(clause)
        return en_question(clause) + ["?"], ja_clause(clause, "polite", topic=True) + ["か", "？"]

    def adjective_predicate(self):
        forced = self._forced("adjective-noun")
        if forced is not None:
            adjective = next(a for a in ADJECTIVES if a.en == forced[0])
            subject = NounPhrase(COMMON_BY_WORD[forced[1]])
            self.force = None
        else:
            adjective = self.choice(ADJECTIVES)
            subject = None
            while subject is None or not _can_fill(subject.head, adjective.applies_to) \
                    or subject.adjective is not None:
                subject = self.noun_phrase(adjective.applies_to, decorate=self.chance(0.5))
        if isinstance(subject.head, Noun) and not subject.head.name:
            self.combinations.add(("adjective-noun", adjective.en, subject.head.en))
        self.note_np(subject)
        past, negative, question = self.chance(0.4), self.chance(0.25), self.chance(0.2)
        negative = negative and not question
        be = [_be(subject.agreement, past)] + (["not"] if negative else [])
        ja = ja_np_particle(subject, "は") + adjective.predicate(past, negative)
        if question:
            return be + en_np(subject) + [adjective.en, "?"], ja + ["か", "？"]
        return en_np(subject) + be + [adjective.en, "."], ja + ["。"]

    def noun_predicate(self):
        subject = NounPhrase(self.choice(NAMES + PRONOUNS[:4]))
        predicate = NounPhrase(self.choice(PROFESSIONS))
        if self.chance(0.3):
            predicate.adjective = self.choice([a for a in ADJECTIVES if PERSON in a.applies_to])
        self.note_np(predicate)
        past, negative, question = self.chance(0.4), self.chance(0.25), self.chance(0.2)
        negative = negative and not question
        be = [_be(subject.agreement, past)] + (["not"] if negative else [])
        if negative:
            copula = ["で", "は", "あり", "ません"] + (["でした"] if past else [])
        else:
            copula = ["でした" if past else "です"]
        ja = ja_np_particle(subject, "は") + ja_np(predicate) + copula
        if question:
            return be + en_np(subject) + en_np(predicate, indefinite=True) + ["?"], ja + ["か", "？"]
        return en_np(subject) + be + en_np(predicate, indefinite=True) + ["."], ja + ["。"]

    def like(self):
        subject = self.noun_phrase(frozenset({PERSON}))
        obj = self.noun_phrase(frozenset({PERSON, ANIMAL, FOOD, DRINK, OBJECT, PLACE}), "object",
                               exclude={subject.head.en}, relative=False)
        self.note_subject(subject, "like")
        self.note_np(subject)
        self.note_np(obj)
        past, negative, question = self.chance(0.4), self.chance(0.25), self.chance(0.2)
        negative = negative and not question
        clause = Clause(_LIKE, subject, obj, past=past, negative=negative)
        if negative:
            copula = ["で", "は", "あり", "ません"] + (["でした"] if past else [])
        else:
            copula = ["でした" if past else "です"]
        ja = ja_np_particle(subject, "は") + ja_np_particle(obj, "が") + ["好き"] + copula
        if question:
            return en_question(clause) + ["?"], ja + ["か", "？"]
        return en_statement(clause) + ["."], ja + ["。"]

    def location_phrase(self, exclude: set, person: bool = False) -> tuple[list[str], list[str]]:
        """("under the table", テーブル の 下 に) or ("in the park", 公園 に); people only at places."""
        if person or self.chance(0.5):
            place = self.common_noun(frozenset({PLACE}), exclude)
            return [place.prep, "the", place.en], [place.ja, "に"]
        relation_en, relation_ja, landmarks = self.choice(RELATIONS)
        landmark = self.common_noun(landmarks, exclude)
        return relation_en.split() + ["the", landmark.en], [landmark.ja, "の", relation_ja, "に"]

    def existential(self):
        thing = self.noun_phrase(frozenset({PERSON, ANIMAL, OBJECT, FOOD}), countable=True,
                                 relative=False, pronouns=False)
        # A fish is always the animal here: いる (animate) and ある (inanimate) must not compete.
        while thing.head.name or thing.possessor is not None or thing.head in FOODS_ALSO_ANIMALS:
            thing = self.noun_phrase(frozenset({PERSON, ANIMAL, OBJECT, FOOD}), countable=True,
                                     relative=False, pronouns=False)
        where_en, where_ja = self.location_phrase({thing.head.en}, person=thing.head.kind == PERSON)
        self.note_np(thing)
        past, question = self.chance(0.4), self.chance(0.2)
        be = _be(thing.agreement, past)
        verb = IRU if thing.head.kind in ANIMATE else ARU
        ja = where_ja + ja_np_particle(thing, "が") + verb.polite(past)
        if question:
            return [be, "there"] + en_np(thing, indefinite=True) + where_en + ["?"], ja + ["か", "？"]
        return ["there", be] + en_np(thing, indefinite=True) + where_en + ["."], ja + ["。"]

    def location(self):
        subject = self.noun_phrase(frozenset({PERSON, ANIMAL, OBJECT}), relative=False)
        while subject.number is not None or subject.head.en in ("door", "window", "tree") \
                or subject.head in FOODS_ALSO_ANIMALS:
            subject = self.noun_phrase(frozenset({PERSON, ANIMAL, OBJECT}), relative=False)
        self.note_np(subject)
        past = self.chance(0.4)
        be = _be(subject.agreement, past)
        verb = IRU if subject.head.kind in ANIMATE else ARU
        if self.chance(0.25):  # where is the cat ?
            ja = ja_np_particle(subject, "は") + ["どこ", "に"] + verb.polite(past) + ["か", "？"]
            return ["where", be] + en_np(subject) + ["?"], ja
        exclude = {subject.head.en}
        where_en, where_ja = self.location_phrase(exclude, person=subject.head.kind == PERSON)
        ja = ja_np_particle(subject, "は") + where_ja + verb.polite(past) + ["。"]
        return en_np(subject) + [be] + where_en + ["."], ja

    def request(self):
        verbs = [v for v in VERBS if v.request and PERSON in v.subjects]
        clause = self.clause(self.choice(verbs), subject=None)
        self.note_clause(clause)
        if self.chance(0.5):  # please eat the apple . -> りんご を 食べ て ください 。
            english = ["please", clause.verb.base] + en_complements(clause) + ["."]
            return english, ja_clause(clause, "te") + ["ください", "。"]
        english = ["let", "'s", clause.verb.base] + en_complements(clause) + ["."]
        return english, ja_clause(clause, "polite")[:-1] + ["ましょう", "。"]

    def two_clauses(self) -> tuple[Clause, Clause]:
        first = self.action_clause(conjoin=False, simple=True)
        second = self.action_clause(conjoin=False, simple=True)
        self.note_clause(first)
        self.note_clause(second)
        return first, second

    def and_(self):
        first, second = self.two_clauses()
        first.past = second.past = self.chance(0.6)
        english = en_statement(first) + ["and"] + en_statement(second) + ["."]
        japanese = ja_clause(first, "te", topic=True) + ["、"] + ja_clause(second, "polite", topic=True) + ["。"]
        return english, japanese

    def but(self):
        first, second = self.two_clauses()
        for clause in (first, second):
            self.tense_and_time(clause, time=False, negative=0.4)
        english = en_statement(first) + [",", "but"] + en_statement(second) + ["."]
        japanese = (ja_clause(first, "polite", topic=True) + ["が", "、"]
                    + ja_clause(second, "polite", topic=True) + ["。"])
        return english, japanese

    def when(self):
        first, second = self.two_clauses()
        first.past = True
        self.tense_and_time(second, time=False)
        second.past = True
        english = ["when"] + en_statement(first) + [","] + en_statement(second) + ["."]
        japanese = ja_clause(first, "plain") + ["とき", "、"] + ja_clause(second, "polite", topic=True) + ["。"]
        return english, japanese

    # --- driver ----------------------------------------------------------------------
    def sentence(self, force: Combination | None = None) -> Sentence | None:
        """One sentence pair, or None if it came out too long (the caller draws again)."""
        self.combinations = set()
        self.force = self.target = force
        if force is None:
            construction = self.rng.choices(self.constructions, self.weights)[0]
        elif force[0] == "subject-verb":
            construction = self.choice(["statement", "statement", "yes_no_question", "wh_question",
                                        "but", "and", "when"])
        else:
            construction = self.choice(["statement", "statement", "yes_no_question", "adjective_predicate",
                                        "existential"])
        build = getattr(self, construction + ("_" if construction == "and" else ""))
        english, japanese = build()
        if force is not None and force not in self.combinations:
            return None
        english, japanese = " ".join(english), " ".join(japanese)
        if not (3 <= len(english.split()) <= MAX_TOKENS and 3 <= len(japanese.split()) <= MAX_TOKENS):
            return None
        return Sentence(english, japanese, construction, frozenset(self.combinations))


_LIKE = _verb("like liked", ichidan("好き"), "trans", PEOPLE_ONLY, {OBJECT}, progressive=False)


# ---------------------------------------------------------------------------
# The corpus
# ---------------------------------------------------------------------------

def reserved_combinations(seed: int, n_subject_verb: int = 8, n_adjective_noun: int = 8) -> list[Combination]:
    """Word pairs kept out of training for ``test_heldout``: (subject noun, verb) and (adjective, noun).

    Each reserved pair uses different nouns, so every word still occurs in training with other partners.
    """
    rng = random.Random(f"heldout-{seed}")
    subject_nouns = [n for n in PEOPLE + ANIMALS]
    subject_verb = [("subject-verb", n.en, v.base) for n in subject_nouns for v in VERBS if n.kind in v.subjects]
    adjective_noun = [("adjective-noun", a.en, n.en) for a in ADJECTIVES for n in COMMON_NOUNS
                      if _can_fill(n, a.applies_to)]
    chosen, used = [], set()
    for pool, count in ((subject_verb, n_subject_verb), (adjective_noun, n_adjective_noun)):
        pool = sorted(pool)
        rng.shuffle(pool)
        taken = 0
        for combination in pool:
            if taken == count:
                break
            if not used & set(combination[1:]):
                chosen.append(combination)
                used.update(combination[1:])
                taken += 1
    return chosen


@dataclass
class BuiltinCorpus(Corpus):
    """The generated corpus, with what is needed to check the held-out split."""

    reserved: list = field(default_factory=list)          # Combination triples kept out of training
    combinations: dict = field(default_factory=dict)      # english sentence -> frozenset of Combinations
    constructions: dict = field(default_factory=dict)     # english sentence -> construction name


class GrammarError(RuntimeError):
    """Two different meanings came out as the same sentence with different translations."""


def _unique_sentences(sampler: _Sampler, count: int, seen_en: dict, seen_ja: dict,
                      accept, force=None) -> list[Sentence]:
    """Draw ``count`` sentences never seen before (on either side) that ``accept`` allows."""
    sentences, attempts = [], 0
    limit = 200 * count + 1000
    while len(sentences) < count:
        attempts += 1
        if attempts > limit:
            raise ValueError(f"could only generate {len(sentences)} of {count} distinct sentences; "
                             "ask for fewer sentences")
        sentence = sampler.sentence(force() if force else None)
        if sentence is None or not accept(sentence):
            continue
        known_ja = seen_en.get(sentence.english)
        known_en = seen_ja.get(sentence.japanese)
        if known_ja is not None or known_en is not None:
            if known_ja not in (None, sentence.japanese) or known_en not in (None, sentence.english):
                raise GrammarError(f"ambiguous pair: {sentence.english!r} -> {sentence.japanese!r}, "
                                   f"but seen before: {sentence.english!r} -> {known_ja!r} and "
                                   f"{known_en!r} -> {sentence.japanese!r}")
            continue  # a duplicate
        seen_en[sentence.english] = sentence.japanese
        seen_ja[sentence.japanese] = sentence.english
        sentences.append(sentence)
    return sentences


def make_builtin_corpus(seed: int = 0, n_train: int = 20000, n_dev: int = 500, n_test: int = 500,
                        n_heldout: int = 500, weights: dict[str, float] | None = None) -> BuiltinCorpus:
    """Generate the built-in English-Japanese corpus, the same for the same arguments.

    Every sentence occurs once in the whole corpus (on both sides), so no source
    sentence is in two splits. ``test_heldout`` contains only sentences with a
    reserved word combination (see ``reserved_combinations``); train, dev and test
    contain none. ``weights`` changes how often each construction of
    ``CONSTRUCTION_WEIGHTS`` is drawn (0 switches one off).
    """
    for name, value in (("n_train", n_train), ("n_dev", n_dev), ("n_test", n_test), ("n_heldout", n_heldout)):
        if value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")
    rng = random.Random(seed)
    sampler = _Sampler(rng, weights)
    reserved = reserved_combinations(seed)
    reserved_set = frozenset(reserved)
    seen_en: dict[str, str] = {}
    seen_ja: dict[str, str] = {}

    main = _unique_sentences(sampler, n_train + n_dev + n_test, seen_en, seen_ja,
                             accept=lambda s: not (s.combinations & reserved_set))
    rng.shuffle(main)  # so that no split gets more of the short sentences drawn first
    heldout = _unique_sentences(sampler, n_heldout, seen_en, seen_ja,
                                accept=lambda s: bool(s.combinations & reserved_set),
                                force=lambda: rng.choice(reserved))

    def pairs(sentences: list[Sentence]) -> list[tuple[str, str]]:
        return [(s.english, s.japanese) for s in sentences]

    everything = main + heldout
    return BuiltinCorpus(
        train=pairs(main[n_dev + n_test:]), dev=pairs(main[:n_dev]), test=pairs(main[n_dev:n_dev + n_test]),
        test_heldout=pairs(heldout), languages=("en", "ja"), direction="en-ja", name="builtin",
        reserved=reserved,
        combinations={s.english: s.combinations for s in everything},
        constructions={s.english: s.construction for s in everything},
    )
