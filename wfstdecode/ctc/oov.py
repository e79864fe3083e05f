"""Boosted words the lexicon lacks, decoded through a graph's oov slot (`graph/oov_slot.py`).

At decode time a word absent from ``words.txt`` is spelled the way the graph spelled its own words
(characters; sentencepiece pieces; or, for a graph built from a pronunciation lexicon, the
pronunciations the caller gives) and boosted as the label sequence ``<oov> <oov:t1> … </oov>``
through the utterance's context automaton, which forbids every other spelling (`phrases.py`).
On a path, such a run of labels comes back as one word: `OovSpeller.collapse`.
"""

from __future__ import annotations

import functools
import itertools
import numbers
from collections.abc import Mapping, Sequence

from ..errors import DecodeInputError, InputFileError
from ..graph.oov_slot import OovSlot

MAX_SPELLINGS = 16  # pronunciations per word, and spellings per phrase


class OovSpeller:
    """Spells words through the slot of ``graph`` and reads spelled words off a path.

    lexicon: ``{word: pronunciations}``, a word's pronunciations being one string of token
             symbols separated by spaces, a tuple of token symbols, or a list of either; it
             takes precedence over the graph's own recipe, and is the only way to spell words
             when the graph was built from a pronunciation lexicon. A token the slot cannot
             spell raises `DecodeInputError` naming the word.
    """

    def __init__(self, graph, lexicon: Mapping | None = None):
        slot = OovSlot.of(graph)
        if slot is None:
            raise DecodeInputError("the graph has no oov slot (build-tlg --oov-slot)")
        self.slot, self.tokens = slot, graph.tokens
        self.lexicon = checked_lexicon(lexicon or {})
        for word, prons in self.lexicon.items():
            for pron in prons:
                bad = [t for t in pron if self.tokens.get(t, -1) not in slot.spell]
                if bad:
                    raise DecodeInputError(f"oov lexicon: {word!r} is pronounced with "
                                           f"{bad[0]!r}, which the graph's oov slot does not "
                                           "spell")  # fmt: skip
        self.token_of = {label: t for t, label in slot.spell.items()}
        # per utterance: spelled token ids -> the boosted word (`name_spellings`)
        self.word_of: list[dict[tuple[int, ...], str]] = []
        self._spm = None

    @functools.cached_property
    def recipe(self) -> tuple:
        """What its spellings depend on besides the token table: equal for two spellers of one
        graph and lexicon, so that `phrase_cache` finds a list an earlier call's resolved (made
        when a list is looked up: a call without one pays nothing for a large lexicon)."""
        s = self.slot
        return (s.open, s.close, tuple(s.spell.items()), s.spelling, s.spm,
                tuple((w, tuple(p)) for w, p in self.lexicon.items()))  # fmt: skip

    def name_spellings(self, boosted: Sequence[list[str] | None], words) -> None:
        """Note, per utterance, which of its own boosted words (``boosted``: the words of its
        phrases, in order, or None) each spelling is (`collapse`): another utterance's word
        spelled alike must not name it. Of two words of one list spelled alike, the first
        listed names it (as it alone is boosted)."""
        named: dict[int, dict] = {}  # id of a list given for several utterances -> its names
        self.word_of = []
        for listed in boosted:
            if listed is not None and id(listed) not in named:
                names: dict[tuple[int, ...], str] = {}
                for word in listed:
                    if words is None or word not in words:
                        for ids in self.spellings(word):
                            names.setdefault(ids, word)
                named[id(listed)] = names
            self.word_of.append(named[id(listed)] if listed is not None else {})

    def why_unspelled(self) -> str:
        """Why a word the graph lacks may not be spelled either, for a warning."""
        if self.slot.spelling == "lexicon":
            return (" (the graph spells new words from pronunciations: give theirs in "
                    "oov_lexicon, --oov-lexicon on the command line)")  # fmt: skip
        what = "characters" if self.slot.spelling == "chars" else "pieces"
        return (
            f" (nor spelled: {what} the graph's oov slot does not spell, or no oov_lexicon entry)"
        )

    def spellings(self, word: str) -> list[tuple[int, ...]]:
        """``word``'s spellings as token ids (none when it cannot be spelled)."""
        if word in self.lexicon:
            prons = self.lexicon[word]
        elif self.slot.spelling == "chars":
            prons = [tuple(word)]
        elif self.slot.spelling == "spm":
            prons = [tuple(self._pieces(word))]
        else:
            return []
        out = []
        for pron in prons:
            ids = tuple(self.tokens.get(t, -1) for t in pron)
            if pron and all(i in self.slot.spell for i in ids) and ids not in out:
                out.append(ids)
        return out

    def _pieces(self, word: str) -> list[str]:
        if self._spm is None:
            try:
                import sentencepiece
            except ImportError as exc:  # pragma: no cover - a dependency
                raise ImportError("spelling with pieces needs sentencepiece") from exc
            self._spm = sentencepiece.SentencePieceProcessor()
            try:
                self._spm.load(str(self.slot.spm))
            except (OSError, RuntimeError, TypeError) as exc:
                why = f"cannot load the sentencepiece model the graph's oov slot spells with: {exc}"
                raise InputFileError(self.slot.spm, None, why) from None
        return [self._spm.id_to_piece(i) for i in self._spm.encode(word)]

    def phrase_labels(self, parts: Sequence, words) -> list[tuple[int, ...]] | None:
        """A phrase (its words or word ids) as label sequences: words of ``words`` as their ids,
        others spelled through the slot, one sequence per combination of spellings; None when
        some word is neither known nor spellable."""
        choices = []
        for part in parts:
            wid = words.get(part) if isinstance(part, str) and words is not None else None
            if isinstance(part, numbers.Integral) and not isinstance(part, bool):
                wid = int(part) if part > 0 and (words is None or words.has_id(int(part))) else None
            if wid:
                choices.append([(wid,)])
                continue
            spelled = self.spellings(part) if isinstance(part, str) else []
            if not spelled:
                return None
            choices.append([(self.slot.open, *(self.slot.spell[t] for t in s), self.slot.close)
                            for s in spelled])  # fmt: skip
        combos = list(itertools.islice(itertools.product(*choices), MAX_SPELLINGS + 1))
        if len(combos) > MAX_SPELLINGS:
            raise DecodeInputError(f"{' '.join(map(str, parts))!r} has more than "
                                   f"{MAX_SPELLINGS} spellings")  # fmt: skip
        return [tuple(itertools.chain.from_iterable(c)) for c in combos]

    def collapse(self, labels: Sequence[int], utterance: int = 0) -> tuple[list[int], list, list]:
        """A path's output labels with each spelled run ``<oov> … </oov>`` as one word:
        ``(word ids, (word, its token ids) of a spelled word or None, (first, last) label index
        of each word)``; a spelled word's id is the slot's ``<oov>``, its name the word
        ``utterance`` boosted (`name_spellings`). A run the search cut short (no ``</oov>``)
        still comes back as a word, spelled as far as it went; one cut short at its ``<oov>``
        (a partial result's last label) is no word yet."""
        names = self.word_of[utterance] if utterance < len(self.word_of) else {}
        ids, spelled, spans = [], [], []
        i, n = 0, len(labels)
        while i < n:
            if labels[i] != self.slot.open:
                ids.append(labels[i]), spelled.append(None), spans.append((i, i))
                i += 1
                continue
            j = i + 1
            while j < n and labels[j] in self.token_of:
                j += 1
            tokens = tuple(self.token_of[w] for w in labels[i + 1 : j])
            last = j if j < n and labels[j] == self.slot.close else j - 1
            if not tokens and last == i:  # cut short at its <oov>: no word yet (a partial
                i = j  # result's last label, say), not a word "" with no tokens to time
                continue
            word = names.get(tokens) or "".join(self.tokens.symbol(t) for t in tokens)
            ids.append(self.slot.open), spelled.append((word, tokens)), spans.append((i, last))
            i = last + 1
        return ids, spelled, spans


def checked_lexicon(lexicon: Mapping) -> dict[str, list[tuple[str, ...]]]:
    """``{word: [pronunciation (token symbols), ...]}`` from the forms `OovSpeller` takes: per
    word a string ("t1 t2 …"), a tuple of token symbols, or a list of either."""
    if not isinstance(lexicon, Mapping):
        raise DecodeInputError(f"oov lexicon must be a mapping word -> pronunciations; got "
                               f"{type(lexicon).__name__}")  # fmt: skip
    out = {}
    for word, prons in lexicon.items():
        if not isinstance(word, str) or not word or any(c.isspace() for c in word):
            raise DecodeInputError(f"oov lexicon: {word!r} is not a word")
        if isinstance(prons, (str, tuple)):
            prons = [prons]
        if not isinstance(prons, list) or not prons:
            raise DecodeInputError(f"oov lexicon: the pronunciations of {word!r} must be a "
                                   f"string, a tuple of token symbols or a list of them; got "
                                   f"{prons!r}")  # fmt: skip
        checked = []
        for pron in prons:
            if not isinstance(pron, (str, tuple, list)):
                raise DecodeInputError(f"oov lexicon: a pronunciation of {word!r} must be token "
                                       f"symbols; got {pron!r}")  # fmt: skip
            pron = tuple(pron.split()) if isinstance(pron, str) else tuple(pron)
            if not pron or not all(isinstance(t, str) for t in pron):
                raise DecodeInputError(f"oov lexicon: a pronunciation of {word!r} must be token "
                                       f"symbols; got {pron!r}")  # fmt: skip
            checked.append(pron)
        if len(checked) > MAX_SPELLINGS:
            raise DecodeInputError(f"oov lexicon: {word!r} has more than {MAX_SPELLINGS} "
                                   "pronunciations")  # fmt: skip
        out[word] = checked
    return out


def read_oov_lexicon(path, tokens) -> dict[str, list[tuple[str, ...]]]:
    """``word tok1 tok2 …`` per line, read as any lexicon is (`graph.read_lexicon`: a token the
    graph lacks, or one that spells nothing, raises `InputFileError` naming the line); a word on
    several lines has several pronunciations, up to ``MAX_SPELLINGS`` (the line of one more is
    named)."""
    from ..graph.lexicon import read_lexicon

    out: dict[str, list[tuple[str, ...]]] = {}
    for entry in read_lexicon(path, tokens):
        prons = out.setdefault(entry.word, [])
        if len(prons) == MAX_SPELLINGS:
            raise InputFileError(path, entry.line_no, f"{entry.word!r} has more than "
                                 f"{MAX_SPELLINGS} pronunciations")  # fmt: skip
        prons.append(entry.tokens)
    return out
