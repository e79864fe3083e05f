"""Boosted words the graph cannot output although its word table lists them (a lexicon word the
ARPA lacks, <s>, #0, the oov slot's own labels): warned of, or spelled through the slot."""

import warnings

import numpy as np
import pytest

from wfstdecode.ctc import CtcBeamOptions, decode_ctc
from wfstdecode.graph import build_tlg
from wfstdecode.graph.lexicon import spell_lexicon
from wfstdecode.symbols import SymbolTable
from wfstdecode.testing import simulate_ctc
from wfstdecode.testing.lm import random_arpa

pytest.importorskip("pynini")

TOKENS = SymbolTable.from_list(["<blk>", "|", *"abcde"])
LM_WORDS = ["ab", "cd", "ea"]
UNSAID = "bead"  # in the lexicon (so in words.txt), not in the ARPA: no path outputs it
BEAM = CtcBeamOptions(beam=16)


def _graph(tmp_path, slot: bool):
    lexicon, _ = spell_lexicon([*LM_WORDS, UNSAID], TOKENS, separator="|")
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(random_arpa(LM_WORDS, order=2, seed=0, unk=False))
    extra = dict(oov_slot={"spelling": "chars"}, oov_logprob=-3.0) if slot else {}
    return build_tlg(TOKENS, lexicon, arpa, "compact", separator="|", **extra).graph


def _spoken(text, seed=3):
    seq = [TOKENS.id(c) for c in "|".join(text.split())]
    return simulate_ctc([seq], TOKENS.next_id, seed=seed)


def _decode(g, lp, lengths, boosts):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        h = decode_ctc(lp, lengths, g, BEAM, boosts)[0][0]
    return h, [str(w.message) for w in rec]


@pytest.mark.parametrize("word", [UNSAID, "<s>", "#0"])
def test_a_boosted_word_no_arc_outputs_is_reported_not_silently_dropped(tmp_path, word):
    """words.txt holds every lexicon word (and <s>, </s>, #0), but a lexicon word the ARPA lacks
    is on no arc (build-tlg says so): boosting it can never act, yet it was accepted without a
    word, unlike a word missing from words.txt, which warns."""
    g = _graph(tmp_path, slot=False)
    assert g.words.get(UNSAID) is not None
    assert g.words.get(UNSAID) not in set(np.asarray(g.olabel).tolist())
    lp, lengths = _spoken(f"ab {UNSAID} cd")
    _, said = _decode(g, lp, lengths, {word: 5.0})
    assert any(word in s for s in said), said


def test_a_boosted_lexicon_word_the_lm_lacks_goes_through_the_oov_slot(tmp_path):
    """On a graph with an oov slot, a boosted word absent from words.txt is spelled through the
    slot; one in words.txt that no arc outputs was taken as a graph word and never decoded
    (nor warned of): the same audio decodes "beade" when boosted, but never "bead"."""
    g = _graph(tmp_path, slot=True)
    lp, lengths = _spoken(f"ab {UNSAID} cd")
    other, _ = _decode(g, *_spoken(f"ab {UNSAID}e cd"), {f"{UNSAID}e": 5.0})
    assert other.words == ("ab", f"{UNSAID}e", "cd")  # a word not in words.txt: spelled
    h, said = _decode(g, lp, lengths, {UNSAID: 5.0})
    assert h.words == ("ab", UNSAID, "cd"), (h.words, said)


@pytest.mark.parametrize("key", ["<oov> <oov:e> </oov>", "<oov:e>", "</oov>", "<oov>"])
def test_the_oov_slots_own_labels_are_not_words_to_boost(tmp_path, key):
    """The slot labels are the last ids of words.txt, so "<oov> <oov:e> </oov>" resolved as a
    phrase of three words: it opened the slot for a spelling nobody boosted and the audio came
    back as a run of words "e" (score far above the real path); "<oov:e>" alone was silently
    accepted. A slot label is no word: it is reported as one the graph lacks."""
    g = _graph(tmp_path, slot=True)
    lp, lengths = _spoken("ab cd ea")
    plain, _ = _decode(g, lp, lengths, None)
    h, said = _decode(g, lp, lengths, {key: 5.0})
    assert h.words == plain.words and h.score == pytest.approx(plain.score)
    assert any(key.split()[0] in s for s in said), said
