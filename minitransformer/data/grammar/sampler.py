"""Drawing random meanings: the constructions of the built-in corpus and how often each is drawn.

``_Sampler`` draws a meaning with a ``random.Random`` (so a seed fixes every
sentence), writes it out in both languages (rules.py) and notes which word
combinations it contains, so that the held-out test split can be kept apart.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass, replace

from .lexicon import (ADJECTIVES, ANIMAL, ANIMATE, ARU, COMMON_BY_WORD, COMMON_NOUNS, DRINK, FOOD, FOODS_ALSO_ANIMALS,
                      IRU, NAMES, NUMBERS, OBJECT, PEOPLE_ONLY, PERSON, PLACE, PROFESSIONS, PRONOUNS, RELATIONS, TIMES,
                      VERBS, Adjective, Noun, Pronoun, Verb, _can_fill, _verb, ichidan, nouns_named)
from .alignment import linked, relations, word_alignment
from .rules import (NEGATIVE_ENDINGS, Clause, NounPhrase, _be, en_complements, en_np, en_question, en_statement,
                    ja_clause, ja_np, ja_np_particle, ja_verb_group)

@functools.cache
def _nouns_in(classes: frozenset) -> list[Noun]:
    return [n for n in COMMON_NOUNS if _can_fill(n, classes)]


def _heads(np: NounPhrase | None) -> set[str]:
    """The head words of a noun phrase and of the noun phrases inside it (its relative clause, "and")."""
    if np is None:
        return set()
    heads = {np.head.en} | _heads(np.also)
    if np.relative is not None:
        for inner in (np.relative.subject, np.relative.obj, np.relative.recipient, np.relative.companion):
            heads |= _heads(inner)
    return heads


@functools.cache
def _adjectives_for(noun: Noun) -> list[Adjective]:
    return [a for a in ADJECTIVES if _can_fill(noun, a.applies_to)]


Combination = tuple[str, str, str]  # ("subject-verb", "cat", "eat") or ("adjective-noun", "big", "cat")

# How often each construction is drawn. The joined clauses (and, but, when) and relative clauses are
# drawn often enough that sentences of three clauses (a joined pair with a relative clause, or a
# clause with two) are some 3 % of the corpus: at 1 % the default model dropped their clauses.
CONSTRUCTION_WEIGHTS = {
    "statement": 30, "yes_no_question": 8, "wh_question": 9, "adjective_predicate": 7,
    "noun_predicate": 4, "like": 4, "existential": 7, "location": 5, "request": 5,
    "and": 8, "but": 8, "when": 6,
}
RELATIVE_CLAUSE_CHANCE = 0.25   # of a noun phrase that may take one ("the cat that ate the fish")
MAX_TOKENS = 20


@dataclass
class Sentence:
    english: str
    japanese: str
    construction: str
    combinations: frozenset  # of Combination
    alignment: tuple = ()    # gold links (English word, Japanese word), see alignment.py
    verb_object: tuple = ()  # (verb, head noun of its object) pairs of English words
    verb_subject: tuple = ()  # (verb, head noun of its subject) pairs of English words
    clauses: tuple = ()      # the clauses of the meaning (main, joined and relative), for checks


# Who a person word refers to: "i" and "we" share the speaker, so "i ... us" names one person twice.
REFERENTS = {"i": {"speaker"}, "me": {"speaker"}, "we": {"speaker", "we"}, "us": {"speaker", "we"},
             "you": {"you"}, "he": {"he"}, "him": {"he"}, "she": {"she"}, "her": {"she"},
             "they": {"they"}, "them": {"they"}, **{n.en: {n.en} for n in NAMES}}
# The unspoken subject of a request: "let 's ..." is we (you and I), "please ..." is you.
REQUEST_REFERENTS = {"let": {"speaker", "we", "you"}, "please": {"you"}}
# あげる (and 見せる, 送る, 貸す) give away from the speaker's side; no first- or second-person recipient.
RECIPIENT_EXCLUDED = {"i", "we", "you"}


def names_someone_twice(english: list[str]) -> bool:
    """Whether one person is named twice ("hanako ..., but hanako", "i ... us", "let 's look for me"):
    head nouns (not possessives like "my") that are names or pronouns, and a request's unspoken subject."""
    seen: set[str] = set()
    for word in english:
        links = getattr(word, "links", frozenset())
        if word in REQUEST_REFERENTS and word in links:
            referents = REQUEST_REFERENTS[word]
        elif word in REFERENTS and any(isinstance(link, tuple) and link[1:] == ("head",) for link in links):
            referents = REFERENTS[word]
        else:
            continue
        if seen & referents:
            return True
        seen |= referents
    return False


# Sentence ends and the words that join or frame clauses, linked across the languages (alignment.py).
STOP_EN, STOP_JA = linked(["."], "end"), linked(["。"], "end")
QUESTION_EN, QUESTION_JA = linked(["?"], "end"), linked(["か", "？"], "end")


def _predicate(words: list[str]) -> list[str]:
    """A Japanese predicate after its first word: linked to English "be", its negative ending also to "not"."""
    return [linked([w], "be", "not")[0] if w in NEGATIVE_ENDINGS else linked([w], "be")[0] for w in words]


def _be_words(be: list[str]) -> list[str]:
    return [linked([w], "not")[0] if w == "not" else linked([w], "be")[0] for w in be]


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
        self.clauses: list[Clause] = []           # the clauses of the sentence being built (note_clause)
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
        self.clauses.append(clause)
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
            noun = next((n for n in nouns_named(noun_name) if _can_fill(n, classes)), None)
            if noun is not None and noun_name not in exclude:
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
            if relative and self.chance(RELATIVE_CLAUSE_CHANCE):
                self.add_relative(np, case)
            elif noun.kind in (ANIMAL, OBJECT, PLACE) and self.chance(0.1):
                np.possessor = self.choice(PRONOUNS + NAMES + PROFESSIONS[:3])
        return np

    def add_relative(self, np: NounPhrase, case: str = "subject") -> None:
        """Attach "that ..." with the head as subject or object of the inner clause.

        A relative clause on an object has no place phrase, and its main clause has none either
        (``clause``): in "cooked the tomato that the baby washed in the museum" the place could belong
        to either clause, and the two readings have two Japanese translations."""
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
        if case == "object":
            clause.place = None
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
            exclude |= _heads(clause.obj)   # not "showed the desk that taro showed to the nurse to the nurse"
        if verb.frame == "ditrans":
            clause.recipient = self.noun_phrase(frozenset({PERSON}), "object", exclude=exclude | RECIPIENT_EXCLUDED,
                                                decorate=False)
            exclude.add(clause.recipient.head.en)
        if verb.frame == "motion":
            clause.goal = self.common_noun(frozenset({PLACE}))
        if verb.companion and self.chance(0.2):
            clause.companion = self.noun_phrase(frozenset({PERSON, ANIMAL}) & verb.subjects | {PERSON},
                                                "object", exclude=exclude, decorate=False)
        object_relative = clause.obj is not None and clause.obj.relative is not None
        if verb.place and verb.frame != "motion" and not object_relative and self.chance(0.15 if simple else 0.3):
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
        return en_statement(clause) + STOP_EN, ja_clause(clause, "polite", topic=True) + STOP_JA

    def yes_no_question(self):
        clause = self.action_clause()
        self.tense_and_time(clause, negative=0.0)
        self.note_clause(clause)
        return en_question(clause) + QUESTION_EN, ja_clause(clause, "polite", topic=True) + QUESTION_JA

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
            return en_question(clause) + QUESTION_EN, ja_clause(clause, "polite", topic=True) + QUESTION_JA
        clause.wh = self.choice(options)
        if clause.wh == "who":
            clause.subject = None
        elif clause.wh in ("what", "whom"):
            clause.obj = None
        elif clause.wh == "where":
            clause.goal = clause.place = None
        self.note_clause(clause)
        return en_question(clause) + QUESTION_EN, ja_clause(clause, "polite", topic=True) + QUESTION_JA

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
        be = _be_words([_be(subject.agreement, past)] + (["not"] if negative else []))
        predicate = adjective.predicate(past, negative)
        ja = ja_np_particle(subject, "は") + linked(predicate[:1], "adjective") + _predicate(predicate[1:])
        if question:
            return be + en_np(subject) + linked([adjective.en], "adjective") + QUESTION_EN, ja + QUESTION_JA
        return en_np(subject) + be + linked([adjective.en], "adjective") + STOP_EN, ja + STOP_JA

    def noun_predicate(self):
        subject = NounPhrase(self.choice(NAMES + PRONOUNS[:4]))
        predicate = NounPhrase(self.choice(PROFESSIONS))
        if self.chance(0.3):
            predicate.adjective = self.choice([a for a in ADJECTIVES if PERSON in a.applies_to])
        self.note_np(predicate)
        past, negative, question = self.chance(0.4), self.chance(0.25), self.chance(0.2)
        negative = negative and not question
        be = _be_words([_be(subject.agreement, past)] + (["not"] if negative else []))
        if negative:
            copula = ["で", "は", "あり", "ません"] + (["でした"] if past else [])
        else:
            copula = ["でした" if past else "です"]
        ja = ja_np_particle(subject, "は") + ja_np(predicate) + _predicate(copula)
        if question:
            return be + en_np(subject) + en_np(predicate, indefinite=True) + QUESTION_EN, ja + QUESTION_JA
        return en_np(subject) + be + en_np(predicate, indefinite=True) + STOP_EN, ja + STOP_JA

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
        ja = ja_np_particle(subject, "は") + ja_np_particle(obj, "が") + ja_verb_group(["好き"] + copula, clause)
        if question:
            return en_question(clause) + QUESTION_EN, ja + QUESTION_JA
        return en_statement(clause) + STOP_EN, ja + STOP_JA

    def location_phrase(self, exclude: set, person: bool = False) -> tuple[list[str], list[str]]:
        """("under the table", テーブル の 下 に) or ("in the park", 公園 に); people only at places."""
        if person or self.chance(0.5):
            place = self.common_noun(frozenset({PLACE}), exclude)
            return (linked([place.prep], "at") + ["the"] + linked([place.en], "place"),
                    linked([place.ja], "place") + linked(["に"], "at"))
        relation_en, relation_ja, landmarks = self.choice(RELATIONS)
        landmark = self.common_noun(landmarks, exclude)
        return (linked(relation_en.split(), "relation") + ["the"] + linked([landmark.en], "landmark"),
                linked([landmark.ja], "landmark") + ["の"] + linked([relation_ja, "に"], "relation"))

    def existential(self):
        things = frozenset({PERSON, ANIMAL, "physical", FOOD})   # not "there is a song under the table"
        thing = self.noun_phrase(things, countable=True, relative=False, pronouns=False)
        # A fish is always the animal here: いる (animate) and ある (inanimate) must not compete.
        while thing.head.name or thing.possessor is not None or thing.head in FOODS_ALSO_ANIMALS:
            thing = self.noun_phrase(things, countable=True, relative=False, pronouns=False)
        where_en, where_ja = self.location_phrase({thing.head.en}, person=thing.head.kind == PERSON)
        self.note_np(thing)
        past, question = self.chance(0.4), self.chance(0.2)
        be = linked([_be(thing.agreement, past)], "be")[0]
        there = linked(["there"], "be")[0]                # "there is" is いる / ある
        verb = IRU if thing.head.kind in ANIMATE else ARU
        ja = where_ja + ja_np_particle(thing, "が") + linked(verb.polite(past), "be")
        if question:
            return [be, there] + en_np(thing, indefinite=True) + where_en + QUESTION_EN, ja + QUESTION_JA
        return [there, be] + en_np(thing, indefinite=True) + where_en + STOP_EN, ja + STOP_JA

    def location(self):
        subject = self.noun_phrase(frozenset({PERSON, ANIMAL, "portable"}), relative=False)
        while subject.number is not None or subject.head in FOODS_ALSO_ANIMALS:
            subject = self.noun_phrase(frozenset({PERSON, ANIMAL, "portable"}), relative=False)
        self.note_np(subject)
        past = self.chance(0.4)
        be = linked([_be(subject.agreement, past)], "be")[0]
        verb = IRU if subject.head.kind in ANIMATE else ARU
        if self.chance(0.25):  # where is the cat ?
            ja = (ja_np_particle(subject, "は") + linked(["どこ"], "wh") + ["に"] + linked(verb.polite(past), "be")
                  + QUESTION_JA)
            return linked(["where"], "wh") + [be] + en_np(subject) + QUESTION_EN, ja
        exclude = {subject.head.en}
        where_en, where_ja = self.location_phrase(exclude, person=subject.head.kind == PERSON)
        ja = ja_np_particle(subject, "は") + where_ja + linked(verb.polite(past), "be") + STOP_JA
        return en_np(subject) + [be] + where_en + STOP_EN, ja

    def request(self):
        verbs = [v for v in VERBS if v.request and PERSON in v.subjects]
        clause = self.clause(self.choice(verbs), subject=None)
        self.note_clause(clause)
        verb = linked([clause.verb.base], (id(clause), "verb"), roles=[("verb", id(clause))])
        if self.chance(0.5):  # please eat the apple . -> りんご を 食べ て ください 。
            english = linked(["please"], "please") + verb + en_complements(clause) + STOP_EN
            return english, ja_clause(clause, "te") + linked(["ください"], "please") + STOP_JA
        english = linked(["let", "'s"], "let") + verb + en_complements(clause) + STOP_EN
        return english, ja_clause(clause, "polite")[:-1] + linked(["ましょう"], "let") + STOP_JA

    def two_clauses(self) -> tuple[Clause, Clause]:
        first = self.action_clause(conjoin=False, simple=True)
        second = self.action_clause(conjoin=False, simple=True)
        self.note_clause(first)
        self.note_clause(second)
        return first, second

    def and_(self):
        first, second = self.two_clauses()
        first.past = second.past = self.chance(0.6)
        english = en_statement(first) + linked(["and"], "join") + en_statement(second) + STOP_EN
        japanese = (ja_clause(first, "te", topic=True) + linked(["、"], "join")
                    + ja_clause(second, "polite", topic=True) + STOP_JA)
        return english, japanese

    def but(self):
        first, second = self.two_clauses()
        for clause in (first, second):
            self.tense_and_time(clause, time=False, negative=0.4)
        english = en_statement(first) + linked([","], "comma") + linked(["but"], "join") + en_statement(second) + STOP_EN
        japanese = (ja_clause(first, "polite", topic=True) + linked(["が"], "join") + linked(["、"], "comma")
                    + ja_clause(second, "polite", topic=True) + STOP_JA)
        return english, japanese

    def when(self):
        first, second = self.two_clauses()
        first.past = True
        self.tense_and_time(second, time=False)
        second.past = True
        english = (linked(["when"], "join") + en_statement(first) + linked([","], "comma") + en_statement(second)
                   + STOP_EN)
        japanese = (ja_clause(first, "plain") + linked(["とき"], "join") + linked(["、"], "comma")
                    + ja_clause(second, "polite", topic=True) + STOP_JA)
        return english, japanese

    # --- driver ----------------------------------------------------------------------
    def sentence(self, force: Combination | None = None) -> Sentence | None:
        """One sentence pair, or None if it came out too long (the caller draws again)."""
        self.combinations, self.clauses = set(), []
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
        if names_someone_twice(english):
            return None
        english_text, japanese_text = " ".join(english), " ".join(japanese)
        if not (3 <= len(english_text.split()) <= MAX_TOKENS and 3 <= len(japanese_text.split()) <= MAX_TOKENS):
            return None
        return Sentence(english_text, japanese_text, construction, frozenset(self.combinations),
                        word_alignment(english, japanese), relations(english, "object"), relations(english, "subject"),
                        tuple(self.clauses))


_LIKE = _verb("like liked", ichidan("好き"), "trans", PEOPLE_ONLY, {OBJECT}, progressive=False)
