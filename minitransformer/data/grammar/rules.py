"""Meanings written out in both languages: noun phrases and clauses, English and Japanese.

A meaning (who does what to whom, where, when, tense, polarity, question or
not) becomes one English and one Japanese sentence. English is SVO with
articles and agreement; Japanese puts the verb last (SVO -> SOV), marks roles
with particles (は が を に で へ と) and puts relative clauses before their noun.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .lexicon import Adjective, Noun, Pronoun, Time, Verb

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
