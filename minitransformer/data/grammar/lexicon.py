"""The lexicon of the built-in corpus: words with their Japanese and what they may combine with.

Nouns (people, animals, food, drinks, objects, places) carry a kind, finer tags
("openable", "furniture"), a Japanese counter and an English plural; adjectives
say which nouns they fit; verbs carry their English forms, their Japanese
conjugation (ichidan, godan with its sound changes, suru) and the kinds of
subject and object they take; times say whether they mark the past.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

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
    mass: bool = False              # English mass noun: "bread", "music" (no "a", no plural)
    plural_only: bool = False       # English plural noun: "the noodles are"

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
    """Parse 'english japanese [counter] [plural=...] [mass] [plural-only]' entries separated by '|'."""
    nouns = []
    for entry in table.split("|"):
        fields = entry.split()
        en, ja, rest = fields[0].replace("_", " "), fields[1], fields[2:]
        this_counter, plural, mass, plural_only = counter, None, False, False
        for item in rest:
            if item.startswith("plural="):
                plural = item[len("plural="):]
            elif item == "-":
                this_counter = None
            elif item == "mass":
                this_counter, mass = None, True
            elif item == "plural-only":
                this_counter, plural_only = None, True
            else:
                this_counter = item
        if this_counter is not None and plural is None:
            plural = _plural(en)
        nouns.append(Noun(en, ja, kind, this_counter, plural, tags, prep, mass=mass, plural_only=plural_only))
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
# Counters: small animals 匹, large animals 頭, birds 羽 (rabbits are counted 羽 by tradition, 匹 today).
ANIMALS = _nouns(ANIMAL, """cat 猫 | dog 犬 | bird 鳥 羽 | horse 馬 頭 | cow 牛 頭 | rabbit うさぎ | mouse ねずみ plural=mice |
    monkey 猿 | bear 熊 頭 | elephant 象 頭 | lion ライオン 頭 | tiger 虎 頭 | panda パンダ 頭 | fox きつね plural=foxes |
    frog かえる | pig 豚 頭 | sheep 羊 頭 plural=sheep | snake 蛇 | duck あひる 羽 | fish 魚 plural=fish""",
                 counter="匹")
FOODS = _nouns(FOOD, """apple りんご | bread パン mass | rice ご飯 mass | meat 肉 mass | egg 卵 | cake ケーキ |
    banana バナナ 本 | orange オレンジ | tomato トマト plural=tomatoes | sandwich サンドイッチ |
    cheese チーズ mass | carrot にんじん 本 | cookie クッキー 枚 | strawberry いちご | potato じゃがいも plural=potatoes |
    fish 魚 匹 plural=fish | noodles ラーメン plural-only | curry カレー mass""", counter="個")
DRINKS = _nouns(DRINK, """water 水 mass | milk 牛乳 mass | tea お茶 mass | coffee コーヒー mass | juice ジュース mass |
    soup スープ mass""")
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
    + _nouns(OBJECT, "song 歌 曲 | music 音楽 mass", tags=frozenset({"audible"}))
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
# Things you can pick up and hand over: every physical object but doors, windows and trees.
FIXED = frozenset({"door", "window", "tree"})
OBJECTS = [replace(n, tags=n.tags | {"portable"}) if "physical" in n.tags and n.en not in FIXED else n
           for n in OBJECTS]
# What you wash: clothes, dishes, vehicles, toys, and fruit and vegetables (not bread, rice or curry).
WASHABLE = frozenset({"shirt", "towel", "cup", "bottle", "car", "bicycle", "ball", "hat", "toy", "doll",
                      "apple", "tomato", "strawberry", "potato", "carrot", "orange"})
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
    + _adjectives("long 長い", {"pen", "umbrella", "letter", "towel", "song"})
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
        if progressive:  # 食べ て い る: the auxiliary いる conjugates
            return [*self.te, *IRU.plain(past, negative)]
        if negative:
            return [*self.nai[:-1], "なかっ", "た"] if past else list(self.nai)
        return list(self.ta if past else self.dictionary)

    def te_form(self, negative: bool = False, progressive: bool = False) -> list[str]:
        """The te form that joins a clause to the next ("食べ て 、 ..."); it has no tense of its own (the
        last verb of the sentence carries it). Negative: 食べ ない で; progressive: 食べ て い て."""
        if progressive:
            return [*self.te, *IRU.te_form(negative)]
        if negative:
            return [*self.nai, "で"]
        return list(self.te)

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


IRU = ichidan("い")                                                       # to be (animate); also 〜て いる
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
    home: JapaneseVerb | None = None  # the verb for going home (帰る), when the goal is the house

    def japanese(self, goal: Noun | None = None) -> JapaneseVerb:
        """The Japanese verb; "return" is 帰る to the house (home) and 戻る anywhere else."""
        if self.home is not None and goal is not None and goal.en == "house":
            return self.home
        return self.ja


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
# 料理する is cooking a dish from raw food; rice is 炊く and bread is baked, so "cook" takes these only.
COOKABLE = {"meat", "fish", "egg", "potato", "carrot", "tomato"}
# 作る a dish (作る with a raw food reads "grow"), or a thing made by hand.
MADE = {"cake", "sandwich", "curry", "cookie", "bread", "noodles", "container", "doll", "toy"}
VERBS = [
    _verb("eat ate", ichidan("食べ"), "trans", ANIMATE, {FOOD}),
    _verb("drink drank", godan("飲", "む"), "trans", ANIMATE, {DRINK}),
    _verb("buy bought", godan("買", "う"), "trans", PEOPLE_ONLY, {FOOD, DRINK, OBJECT}),
    _verb("sell sold", godan("売", "る"), "trans", PEOPLE_ONLY, {FOOD, OBJECT}),
    _verb("make made", godan("作", "る"), "trans", PEOPLE_ONLY, MADE),
    _verb("see saw seeing", ichidan("見"), "trans", ANIMATE, {PERSON, ANIMAL, "physical", PLACE}, progressive=False),
    _verb("find found", ichidan("見つけ"), "trans", ANIMATE, {ANIMAL, "physical", FOOD}, progressive=False),
    _verb("wash washed", godan("洗", "う"), "trans", PEOPLE_ONLY, WASHABLE | {ANIMAL}),
    _verb("carry carried", godan("運", "ぶ"), "trans", PEOPLE_ONLY, {"portable", FOOD}),
    _verb("open opened", ichidan("開け"), "trans", PEOPLE_ONLY, {"openable"}, progressive=False),
    _verb("close closed", ichidan("閉め"), "trans", PEOPLE_ONLY, {"openable"}, progressive=False),
    _verb("cook cooked", suru("料理"), "trans", PEOPLE_ONLY, COOKABLE),
    _verb("clean cleaned", suru("掃除"), "trans", PEOPLE_ONLY, {"indoor", "furniture", "car"}),
    _verb("write wrote writing", godan("書", "く"), "trans", PEOPLE_ONLY, {"writable"}),
    _verb("draw drew", godan("描", "く"), "trans", PEOPLE_ONLY, {ANIMAL, "physical", PLACE, PERSON}),
    _verb("call called", godan("呼", "ぶ"), "trans", PEOPLE_ONLY, {PERSON, ANIMAL}),
    _verb("chase chased", ichidan("追いかけ"), "trans", ANIMATE, {PERSON, ANIMAL}),
    _verb("catch caught", ichidan("捕まえ"), "trans", ANIMATE, {ANIMAL}, progressive=False),
    _verb("help helped", godan("手伝", "う"), "trans", PEOPLE_ONLY, {PERSON}),
    _verb("wait waited", godan("待", "つ"), "trans", ANIMATE, {PERSON, ANIMAL}, prep="for"),
    _verb("look looked", godan("探", "す"), "trans", ANIMATE, {"portable", ANIMAL, PERSON}, prep="for"),
    _verb("listen listened", godan("聞", "く"), "trans", PEOPLE_ONLY, {"audible"}, prep="to"),
    # "visit the garden in the river" is nonsense: a visit has no place phrase besides its object
    _verb("visit visited", ichidan("訪れ"), "trans", PEOPLE_ONLY, {PLACE}, progressive=False, place=False),
    _verb("bite bit biting", godan("噛", "む"), "trans", {ANIMAL}, {PERSON, ANIMAL, FOOD}, request=False),
    _verb("throw threw", ichidan("投げ"), "trans", PEOPLE_ONLY, {"ball", "key", "hat", "doll", "toy"}),
    _verb("sleep slept", ichidan("寝"), "intrans", ANIMATE),
    _verb("run ran running", godan("走", "る"), "intrans", ANIMATE),
    _verb("walk walked", godan("歩", "く"), "intrans", ANIMATE, companion=True),
    _verb("swim swam swimming", godan("泳", "ぐ"), "intrans", ANIMATE),
    _verb("sing sang", godan("歌", "う"), "intrans", PEOPLE_ONLY),
    _verb("dance danced", godan("踊", "る"), "intrans", PEOPLE_ONLY, companion=True),
    _verb("laugh laughed", godan("笑", "う"), "intrans", PEOPLE_ONLY, request=False),
    _verb("cry cried", godan("泣", "く"), "intrans", PEOPLE_ONLY, request=False),  # animals 鳴く, not 泣く
    _verb("play played", godan("遊", "ぶ"), "intrans", ANIMATE, companion=True),
    _verb("work worked", godan("働", "く"), "intrans", PEOPLE_ONLY),
    _verb("study studied", suru("勉強"), "intrans", PEOPLE_ONLY, companion=True),
    _verb("rest rested", godan("休", "む"), "intrans", ANIMATE),
    _verb("talk talked", godan("話", "す"), "intrans", PEOPLE_ONLY, companion=True),
    _verb("go went going goes", godan("行", "く", onbin="っ"), "motion", ANIMATE, {PLACE}, progressive=False),
    _verb("come came", ichidan("来"), "motion", ANIMATE, {PLACE}, progressive=False),
    _verb("return returned", godan("戻", "る"), "motion", ANIMATE, {PLACE}, progressive=False,
          home=godan("帰", "る")),
    # あげる gives away from the speaker: a first- or second-person recipient would need くれる, so
    # recipients are third persons (sampler.RECIPIENT_EXCLUDED).
    _verb("give gave", ichidan("あげ"), "ditrans", PEOPLE_ONLY, {FOOD, "portable"}, progressive=False),
    _verb("send sent", godan("送", "る"), "ditrans", PEOPLE_ONLY, {"letter", "flat", "book", "flower"},
          progressive=False),
    _verb("show showed", ichidan("見せ"), "ditrans", PEOPLE_ONLY, {"portable"}, progressive=False),
    _verb("lend lent", godan("貸", "す"), "ditrans", PEOPLE_ONLY, {"book", "notebook", "dictionary", "pen", "umbrella",
                                                                 "car", "bicycle", "camera", "ball", "guitar"},
          progressive=False),
]
# Objects named by their English word ("ball", "car") make a class of their own. A word with two
# senses ("fish": the animal and the food) maps to its first, the animal; nouns_named has both.
COMMON_BY_WORD: dict[str, Noun] = {}
for _noun in COMMON_NOUNS:
    COMMON_BY_WORD.setdefault(_noun.en, _noun)


def nouns_named(word: str) -> list[Noun]:
    """Every sense of the English noun ``word`` ("fish": the animal, then the food)."""
    return [n for n in COMMON_NOUNS if n.en == word]


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
