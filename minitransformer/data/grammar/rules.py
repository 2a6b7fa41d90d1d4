"""Meanings written out in both languages: noun phrases and clauses, English and Japanese.

A meaning (who does what to whom, where, when, tense, polarity, question or
not) becomes one English and one Japanese sentence. English is SVO with
articles and agreement; Japanese puts the verb last (SVO -> SOV), marks roles
with particles (は が を に で へ と) and puts relative clauses before their noun.

Words that render a piece of the meaning are written as linked ``Word``s
(alignment.py): the key ``(id(np), "head")`` marks the head noun of one noun
phrase in both languages, ``(id(clause), "verb")`` the verb group of one
clause, and so on; that is the gold word alignment of the pair.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .alignment import add_role, linked
from .lexicon import PLACE, Adjective, Noun, Pronoun, Time, Verb

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
        if isinstance(self.head, Pronoun):
            return self.head.agreement
        return "pl" if self.head.plural_only else "3sg"      # "the noodles are"


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


def en_possessor(possessor: Noun | Pronoun, key=None) -> list[str]:
    """"my", "taro 's", "the teacher 's"; ``key`` links the owner (and "'s") to the Japanese "X の"."""
    if isinstance(possessor, Pronoun):
        return linked([possessor.en_possessive], (key, "owner"), (key, "of"))
    return (([] if possessor.name else ["the"]) + linked([possessor.en], (key, "owner"))
            + linked(["'s"], (key, "of")))


def en_np(np: NounPhrase, case: str = "subject", indefinite: bool = False, key=None) -> list[str]:
    """English noun phrase: determiner, adjective, noun, relative clause. ``key``: the phrase's link key
    (default ``id(np)``; the first of "X and Y" keeps the key of the whole)."""
    key = id(np) if key is None else key
    if np.also is not None:
        return (en_np(replace(np, also=None), case, indefinite, key) + linked(["and"], (key, "and"))
                + en_np(np.also, case, indefinite))
    head = np.head
    if isinstance(head, Pronoun):
        return linked([head.en if case == "subject" else head.en_object], (key, "head"))
    words = (linked([np.adjective.en], (key, "adjective")) if np.adjective else []) \
        + linked([head.plural if np.number else head.en], (key, "head"))
    if head.name:
        determiner = []
    elif np.number is not None:
        determiner = linked([np.number[0]], (key, "number"))
    elif np.possessor is not None:
        determiner = en_possessor(np.possessor, key)
    elif indefinite and (head.mass or head.plural_only):
        determiner = []                 # "there is bread", "there are noodles": no "a"
    else:
        determiner = [_article(words[0])] if indefinite else ["the"]
    tokens = determiner + words
    if np.relative is not None:
        add_role(tokens, (key, "head"), (np.gap, id(np.relative)))   # the head fills the clause's gap
        tokens += ["that"] + en_relative(np.relative, np.gap, np.agreement)
    return tokens


def en_verb(clause: Clause, agreement: str, question: bool = False) -> tuple[list[str], list[str]]:
    """(auxiliary, rest) of the English verb group; a question moves the auxiliary before the subject."""
    auxiliary, rest = _en_verb_words(clause, agreement, question)
    group = (id(clause), "verb")        # the verb group links, as a phrase, to the Japanese verb group
    rest = [linked([w], group, (id(clause), "not")) if w == "not" else
            linked([w], group, roles=[("verb", id(clause))]) for w in rest]
    return linked(auxiliary, group), [w for words in rest for w in words]


def _en_verb_words(clause: Clause, agreement: str, question: bool = False) -> tuple[list[str], list[str]]:
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
    verb, tokens, c = clause.verb, [], id(clause)
    if clause.obj is not None or clause.wh in ("what", "whom") or object_gap:
        if verb.prep:
            tokens += linked([verb.prep], (c, "verb"))          # "look for" is one verb: 探す
        if clause.obj is not None:
            obj = en_np(clause.obj, "object")
            add_role(obj, (id(clause.obj), "head"), ("object", c))
            tokens += obj
    if clause.recipient is not None:
        tokens += linked(["to"], (c, "to")) + en_np(clause.recipient, "object")
    if clause.goal is not None:
        tokens += linked(["to"], (c, "goal-to")) + ["the"] + linked([clause.goal.en], (c, "goal"))
    if clause.companion is not None:
        tokens += linked(["with"], (c, "with")) + en_np(clause.companion, "object")
    if clause.place is not None:
        tokens += linked([clause.place.prep], (c, "place-at")) + ["the"] + linked([clause.place.en], (c, "place"))
    if clause.time is not None:
        tokens += linked(clause.time.en, (c, "time"))
    return tokens


def _subject(clause: Clause) -> list[str]:
    subject = en_np(clause.subject)
    add_role(subject, (id(clause.subject), "head"), ("subject", id(clause)))
    return subject


def en_statement(clause: Clause, object_gap: bool = False) -> list[str]:
    auxiliary, rest = en_verb(clause, clause.subject.agreement)
    return _subject(clause) + auxiliary + rest + en_complements(clause, object_gap)


def en_question(clause: Clause) -> list[str]:
    """Yes/no question, or a wh-question when clause.wh is set."""
    wh = (id(clause), "wh")          # the question word links to 誰 / 何 / どこ / いつ
    if clause.wh == "who":  # the subject is asked for: no inversion
        auxiliary, rest = en_verb(clause, "3sg")
        return linked(["who"], wh) + auxiliary + rest + en_complements(clause)
    auxiliary, rest = en_verb(clause, clause.subject.agreement, question=True)
    front = {"whom": ["who"], "what": ["what"], "where": ["where"], "when": ["when"]}.get(clause.wh, [])
    return linked(front, wh) + auxiliary + _subject(clause) + rest + en_complements(clause)


def en_relative(clause: Clause, gap: str, head_agreement: str) -> list[str]:
    if gap == "subject":
        auxiliary, rest = en_verb(clause, head_agreement)
        return auxiliary + rest + en_complements(clause)
    return en_statement(clause, object_gap=True)  # the object is missing


# --- Japanese ----------------------------------------------------------------

def ja_possessor(possessor: Noun | Pronoun, key=None) -> list[str]:
    return linked([possessor.ja], (key, "owner")) + linked(["の"], (key, "of"))


def ja_np(np: NounPhrase, key=None) -> list[str]:
    """Japanese noun phrase: relative clause, possessor, adjective, noun (numbers go after the particle)."""
    key = id(np) if key is None else key
    if np.also is not None:
        return ja_np(replace(np, also=None), key) + linked(["と"], (key, "and")) + ja_np(np.also)
    tokens = []
    if np.relative is not None:
        tokens += ja_clause(np.relative, "plain")
    if np.possessor is not None:
        tokens += ja_possessor(np.possessor, key)
    if np.adjective is not None:
        tokens += linked(np.adjective.attributive(), (key, "adjective"))
    return tokens + linked([np.head.ja], (key, "head"))


def ja_np_particle(np: NounPhrase, particle: str, *links) -> list[str]:
    """Noun phrase + particle (linked by ``links``, if any); a number floats after the particle: りんご を 三 個."""
    tokens = ja_np(np) + (linked([particle], *links) if links else [particle])
    if np.number is not None:
        tokens += linked([np.number[1], np.head.counter], (id(np), "number"))
    return tokens


# Verbs whose objects are places: "what did the child visit ?" asks for a place, どこ を 訪れ ました か.
def _asks_for_place(verb: Verb) -> bool:
    return verb.objects == frozenset({PLACE})


def ja_clause(clause: Clause, style: str, topic: bool = False) -> list[str]:
    """Japanese clause, verb last. style: "polite" (main clause), "plain" (relative / when), "te" (joined by and).

    Order: subject は/が, time, place で, companion と, recipient に, goal へ, object を, verb.
    The te form has no tense: the clause it joins to carries the tense of both (``and_`` gives them one).
    """
    tokens, c = [], id(clause)
    wh = (c, "wh")
    if clause.wh == "who":
        tokens += linked(["誰"], wh) + ["が"]
    elif clause.subject is not None:
        tokens += ja_np_particle(clause.subject, "は" if topic else "が")
    if clause.wh == "when":
        tokens += linked(["いつ"], wh)
    elif clause.time is not None:
        tokens += linked(clause.time.ja, (c, "time"))
    if clause.wh == "where" and clause.verb.frame != "motion":
        tokens += linked(["どこ"], wh) + ["で"]
    elif clause.place is not None:
        tokens += linked([clause.place.ja], (c, "place")) + linked(["で"], (c, "place-at"))
    if clause.companion is not None:
        tokens += ja_np_particle(clause.companion, "と", (c, "with"))
    if clause.recipient is not None:
        tokens += ja_np_particle(clause.recipient, "に", (c, "to"))
    if clause.wh == "where" and clause.verb.frame == "motion":
        tokens += linked(["どこ"], wh) + ["へ"]
    elif clause.goal is not None:
        tokens += linked([clause.goal.ja], (c, "goal")) + linked(["へ"], (c, "goal-to"))
    if clause.wh == "what":
        tokens += linked(["どこ" if _asks_for_place(clause.verb) else "何"], wh) + ["を"]
    elif clause.wh == "whom":
        tokens += linked(["誰"], wh) + ["を"]
    elif clause.obj is not None:
        tokens += ja_np_particle(clause.obj, "を")
    verb = clause.verb.japanese(clause.goal)
    if style == "polite":
        group = verb.polite(clause.past, clause.negative, clause.progressive)
    elif style == "plain":
        group = verb.plain(clause.past, clause.negative, clause.progressive)
    elif style == "te":
        group = verb.te_form(clause.negative, clause.progressive)
    else:
        raise ValueError(f"unknown style {style!r}")
    return tokens + ja_verb_group(group, clause)


NEGATIVE_ENDINGS = frozenset({"ない", "ません", "なかっ"})


def ja_verb_group(words: list[str], clause: Clause) -> list[str]:
    """The Japanese verb group, linked as a phrase to the English one; a negative ending also to "not"."""
    group = (id(clause), "verb")
    return [linked([w], group, (id(clause), "not"))[0] if w in NEGATIVE_ENDINGS else linked([w], group)[0]
            for w in words]
