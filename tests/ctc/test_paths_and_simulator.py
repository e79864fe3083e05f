"""Token collapse, timestamps and word spans; the emission simulator."""

import dataclasses

import numpy as np
import pytest

from wfstdecode import Hypothesis
from wfstdecode.ctc import CtcBeamOptions, decode_ctc
from wfstdecode.testing import (
    lexicon_graph,
    random_graph,
    random_log_probs,
    simulate_ctc,
    word_error_rate,
)

BACKENDS = ["reference", "cpu"]


def _frames(graph, labels):
    tok = graph.tokens
    lp = np.full((1, len(labels), graph.num_tokens), -15.0, np.float32)
    for t, c in enumerate(labels):
        lp[0, t, tok.id(c)] = 0.0
    return lp


@pytest.mark.parametrize("backend", BACKENDS)
def test_tokens_timestamps_and_word_spans(backend):
    g = lexicon_graph(["see", "sea", "a"])
    tok = g.tokens
    labels = ["<blk>", "s", "s", "e", "<blk>", "e", "e", "<blk>", "a", "<blk>", "<blk>"]
    (h,) = decode_ctc(_frames(g, labels), None, g, CtcBeamOptions(beam=20.0), backend=backend)[0]
    assert h.words == ("see", "a")
    assert h.tokens == tuple(tok.id(c) for c in "seea")
    assert h.timestamps == (1, 3, 5, 8)
    assert h.word_timestamps == ((1, 6), (8, 8))
    assert h.score == pytest.approx(h.acoustic_score + h.graph_score)


@pytest.mark.parametrize("backend", BACKENDS)
def test_repeat_without_blank_is_one_token(backend):
    g = lexicon_graph(["se", "see"])
    labels = ["s", "e", "e", "e", "<blk>"]
    (h,) = decode_ctc(_frames(g, labels), None, g, CtcBeamOptions(beam=20.0), backend=backend)[0]
    assert h.words == ("se",)
    assert len(h.tokens) == 2 and h.timestamps == (0, 1)


def test_simulator_is_seeded_and_peaky():
    seqs = [[1, 2, 2, 3], [4], []]
    a, la = simulate_ctc(seqs, 6, seed=7, confusion_prob=0.2, deletion_prob=0.1)
    b, lb = simulate_ctc(seqs, 6, seed=7, confusion_prob=0.2, deletion_prob=0.1)
    assert np.array_equal(a, b) and np.array_equal(la, lb)
    assert a.dtype == np.float32 and a.shape == (3, la.max(), 6)
    assert np.allclose(np.exp(a).sum(-1), 1.0, atol=1e-4)
    clean, lengths = simulate_ctc(seqs, 6, seed=1)
    greedy = clean[0, : lengths[0]].argmax(-1)
    collapsed = [int(x) for i, x in enumerate(greedy) if x and (i == 0 or greedy[i - 1] != x)]
    assert collapsed == [1, 2, 2, 3]  # a blank separates the repeated 2s
    assert lengths[2] >= 1 and (clean[2, : lengths[2]].argmax(-1) == 0).all()


def test_clean_simulation_decodes_to_the_reference():
    words = ["tap", "pat", "apt", "at", "pa"]
    g = lexicon_graph(words, word_cost=1.0)
    rng = np.random.default_rng(0)
    refs = [list(rng.choice(words, size=3)) for _ in range(10)]
    seqs = [[g.tokens.id(c) for c in "".join(r)] for r in refs]
    lp, lengths = simulate_ctc(seqs, g.num_tokens, seed=2, noise=0.5)
    hyps = decode_ctc(lp, lengths, g, CtcBeamOptions(beam=12.0))
    # word boundaries are ambiguous for spellings alone ("at"+"pa" vs "a"...), tokens are not
    assert [list(h[0].tokens) for h in hyps] == seqs
    assert word_error_rate(refs, [list(h[0].words) for h in hyps]) < 0.5


@pytest.mark.parametrize("backend", BACKENDS)
def test_nbest_distinct_word_sequences_best_first(backend):
    # n-best comes from the surviving end tokens (one per state), so it needs several final
    # states: a lexicon loop with a single final root state yields one hypothesis.
    g = random_graph(11, num_states=20, final_prob=0.6)
    lp = random_log_probs(3, 2, 12, g.num_tokens)
    hyps = decode_ctc(lp, None, g, CtcBeamOptions(beam=12.0, nbest=5), backend=backend)
    best = decode_ctc(lp, None, g, CtcBeamOptions(beam=12.0), backend=backend)
    for h, b in zip(hyps, best, strict=True):
        assert 2 <= len(h) <= 5
        assert len({x.words for x in h}) == len(h)
        scores = [x.score for x in h]
        assert scores == sorted(scores, reverse=True)
        assert h[0] == b[0]


@pytest.mark.parametrize("seed", range(6))
def test_batched_hypothesis_building_equals_the_one_path_version(seed):
    from wfstdecode.ctc._paths import NOTE_NO_FINAL, to_hypotheses
    from wfstdecode.ctc.cpu import decode_cpu
    from wfstdecode.ctc.search import prepare_problem
    from wfstdecode.testing.paths import path_hypothesis

    if seed % 2:
        g = random_graph(seed, num_states=15, eps_arcs_per_state=1.0, final_prob=0.2)
        lp = random_log_probs(seed, 4, 10, g.num_tokens)
        lengths = np.array([10, 0, 3, 7])
        boosts = [{"w1": 1.0}, None, {"w2": 2.0, "w3": -1.0}, None]
    else:
        g = lexicon_graph(["see", "sea", "a", "sas"], word_cost=[1.0, 1.5, 0.5, 2.0])
        seqs = [[g.tokens.id(c) for c in w] for w in ("seea", "sas", "aseasee", "")]
        lp, lengths = simulate_ctc(seqs, g.num_tokens, seed=seed, confusion_prob=0.3)
        boosts = [None, {"sas": 1.0}, None, {"a": 3.0}]
    p = prepare_problem(lp, lengths, g, CtcBeamOptions(beam=8.0, nbest=3), boosts)
    raw = decode_cpu(p)
    fast = to_hypotheses(p, raw)
    for b, r in enumerate(raw):
        final = not r.status & 1
        notes = () if final else (NOTE_NO_FINAL,)
        slow = [path_hypothesis(p, b, a, f, final, notes) for a, f, _ in r.paths]
        assert len(slow) == len(fast[b])
        for x, y in zip(slow, fast[b], strict=True):
            for field in ("tokens", "timestamps", "words", "word_ids", "word_timestamps", "notes"):
                assert getattr(x, field) == getattr(y, field), field
            for field in ("score", "acoustic_score", "graph_score"):
                assert getattr(x, field) == pytest.approx(getattr(y, field), abs=1e-9)
            # made without __init__ (`results.made_from`): the same object __init__ makes
            rebuilt = Hypothesis(**{f.name: getattr(y, f.name) for f in dataclasses.fields(y)})
            assert vars(rebuilt) == vars(y) and rebuilt == y and hash(rebuilt) == hash(y)
            assert all(type(v) is float for v in (y.score, y.acoustic_score, y.graph_score))


@pytest.fixture(scope="module")
def separator_graph(tmp_path_factory):
    """A character TLG with '|' between words, output labels pushed (so a word's output arc need
    not sit on its first letter)."""
    from wfstdecode import SymbolTable
    from wfstdecode.graph import build_tlg
    from wfstdecode.graph.lexicon import spell_lexicon
    from wfstdecode.testing.lm import random_arpa

    words = ["see", "sea", "a", "as", "seas", "ease", "tea", "eat", "set"]
    tokens = SymbolTable.from_list(["<blk>", "|", *sorted(set("".join(words)))])
    arpa = tmp_path_factory.mktemp("sep") / "lm.arpa"
    arpa.write_text(random_arpa(words, order=2, seed=4))
    lexicon, _ = spell_lexicon(words, tokens, "|")
    return build_tlg(tokens, lexicon, str(arpa), "normal", separator="|").graph, words


@pytest.mark.parametrize("seed", range(4))
def test_word_times_span_the_tokens_that_spell_the_word(separator_graph, seed):
    """With a separator, word i's span runs from its first letter's first frame to its last
    letter's last frame: the letters in the span spell the word, separators are outside it, and
    the batched hypotheses equal the one-path oracle."""
    from wfstdecode.ctc._paths import to_hypotheses
    from wfstdecode.ctc.cpu import decode_cpu
    from wfstdecode.ctc.search import prepare_problem
    from wfstdecode.testing.paths import path_hypothesis

    g, words = separator_graph
    rng = np.random.default_rng(seed)
    sentences = [list(rng.choice(words, size=int(rng.integers(1, 5)))) for _ in range(6)]
    sep = g.tokens.id("|")
    seqs = [[t for w in s for t in [*(g.tokens.id(c) for c in w), sep]][:-1] for s in sentences]
    lp, lengths = simulate_ctc(seqs, g.num_tokens, seed=seed, frames_per_token=(1, 3),
                               blanks_between=(0, 2), noise=0.5)  # fmt: skip
    p = prepare_problem(lp, lengths, g, CtcBeamOptions(beam=12.0), None)
    raw = decode_cpu(p)
    hyps = to_hypotheses(p, raw)
    moved = 0
    right = 0
    for b, (h,) in enumerate(hyps):
        right += list(h.words) == sentences[b]
        arcs, frames = raw[b].paths[0][:2]
        oracle = path_hypothesis(p, b, arcs, frames)
        assert oracle.word_timestamps == h.word_timestamps
        # the token each frame of the path reads (blank included), from its emitting arcs
        label = {f: g.ilabel[a] - 1 for a, f in zip(arcs, frames, strict=True)
                 if a < g.num_emitting_arcs}  # fmt: skip
        for word, (start, end) in zip(h.words, h.word_timestamps, strict=True):
            inside = [t for t, f in zip(h.tokens, h.timestamps, strict=True) if start <= f <= end]
            assert "".join(g.tokens.symbol(t) for t in inside) == word
            assert label[start] == g.tokens.id(word[0]) and label[end] == g.tokens.id(word[-1])
            assert label.get(start - 1) != label[start]  # the letter's first frame
            assert label.get(end + 1) != label[end]  # and its last (normal topology)
        word_arc_frames = [f for a, f in zip(arcs, frames, strict=True) if g.olabel[a]]
        moved += sum(f != s for f, (s, _) in zip(word_arc_frames, h.word_timestamps, strict=True))
    assert moved  # label pushing moved output arcs off the first letters: the case that matters
    assert right >= 4  # mostly the sentences simulated


def _checked_against_the_oracle(p, raw):
    """Each decoded path's hypothesis, checked field by field against the one-path oracle
    (`path_hypothesis`): ``(whether it reached a final state, hypothesis)``."""
    from wfstdecode.ctc._paths import NOTE_NO_FINAL, to_hypotheses
    from wfstdecode.testing.paths import path_hypothesis

    for b, (r, hyps) in enumerate(zip(raw, to_hypotheses(p, raw), strict=True)):
        final = not r.status & 1
        notes = () if final else (NOTE_NO_FINAL,)
        for (arcs, frames, _), h in zip(r.paths, hyps, strict=True):
            oracle = path_hypothesis(p, b, arcs, frames, final, notes)
            for field in ("tokens", "timestamps", "words", "word_timestamps", "notes"):
                assert getattr(oracle, field) == getattr(h, field), field
            yield final, h


@pytest.mark.parametrize("keep_pronunciations", [True, False])
def test_batched_word_spans_equal_the_one_path_version_on_paths_cut_short(
    separator_graph, keep_pronunciations
):
    """Noisy emissions cut short give partial paths, n-best paths and words whose separator
    runs do not match the words; the batched spans (separator runs for all paths at once, the
    pronunciations or the output arcs for the others) equal the one-path oracle's."""
    from dataclasses import replace

    from wfstdecode.ctc.cpu import decode_cpu
    from wfstdecode.ctc.search import prepare_problem

    g, words = separator_graph
    if not keep_pronunciations:
        g = replace(g, pronunciations=None)
    sep = g.tokens.id("|")
    unsplit = 0
    for seed in range(12):
        rng = np.random.default_rng(seed)
        sentences = [list(rng.choice(words, size=int(rng.integers(1, 5)))) for _ in range(6)]
        seqs = [[t for w in s for t in [*(g.tokens.id(c) for c in w), sep]][:-1]
                for s in sentences]  # fmt: skip
        lp, lengths = simulate_ctc(seqs, g.num_tokens, seed=seed, frames_per_token=(1, 3),
                                   blanks_between=(0, 2), noise=2.0,
                                   confusion_prob=0.3)  # fmt: skip
        lengths = np.maximum(lengths - rng.integers(0, 4, len(lengths)), 0)
        p = prepare_problem(lp, lengths, g, CtcBeamOptions(beam=10.0, nbest=4), None)
        raw = decode_cpu(p)
        for _, h in _checked_against_the_oracle(p, raw):
            runs = [t != sep and (i == 0 or h.tokens[i - 1] == sep)
                    for i, t in enumerate(h.tokens)]  # fmt: skip
            unsplit += sum(runs) != len(h.words)
    assert unsplit  # paths whose separator runs are not their words were among them


def test_pronunciation_spans_of_paths_cut_short_leave_the_words_still_to_come(tmp_path):
    """Without a separator, a path cut short (a partial result, or one without a final state)
    usually ends in tokens of a word whose output label is still to come (determinization
    delays it until the word is told apart): the split of the path's first tokens into the
    words' pronunciations gives the words' tokens (no split of all of them fits); a final path
    is split whole, as before. The one-path oracle agrees, on decoded paths too."""
    from wfstdecode import SymbolTable
    from wfstdecode.ctc._paths import token_spans
    from wfstdecode.ctc.cpu import decode_cpu
    from wfstdecode.ctc.search import prepare_problem
    from wfstdecode.graph import build_tlg
    from wfstdecode.graph.lexicon import spell_lexicon
    from wfstdecode.testing.lm import random_arpa

    prons = {1: [(0, 1, 1)], 2: [(0, 1, 0)], 3: [(0,)], 4: [(0, 2)], 5: [(1, 0, 1), (1, 0, 1, 2)]}
    tokens = [0, 1, 1, 0, 2]  # word 1 (s e e), then "a s" of a word to come
    for words, cut, want in [
        ([1], True, [(0, 2)]),
        ([1], False, None),
        ([1, 4], True, [(0, 2), (3, 4)]),  # all the tokens fit: as before
        ([1, 3], True, [(0, 2), (3, 3)]),  # the earliest split, "s" still to come
        ([1, 3], False, None),
        ([5], True, None),
    ]:
        assert token_spans(tokens, words, prons, None, cut) == want, (words, cut)
    assert token_spans([1, 0, 1, 2], [5], prons, None, True) == [(0, 3)]  # all fit: as before
    assert token_spans([1, 0, 1, 2, 0], [5], prons, None, True) == [(0, 2)]  # the earliest end
    assert token_spans([1, 0], [5], prons, None, True) == [(0, 1)]  # ended inside the word

    words = ["see", "sea", "a", "as", "seas", "ease", "tea", "eat", "set"]
    table = SymbolTable.from_list(["<blk>", *sorted(set("".join(words)))])
    (tmp_path / "lm.arpa").write_text(random_arpa(words, order=2, seed=4))
    lexicon, _ = spell_lexicon(words, table)
    g = build_tlg(table, lexicon, str(tmp_path / "lm.arpa"), "normal").graph
    by_word = g.pronunciations.by_word
    left = 0
    for seed in range(8):
        rng = np.random.default_rng(seed)
        sentences = [list(rng.choice(words, size=int(rng.integers(1, 5)))) for _ in range(6)]
        seqs = [[g.tokens.id(c) for w in s for c in w] for s in sentences]
        lp, lengths = simulate_ctc(seqs, g.num_tokens, seed=seed, frames_per_token=(1, 3),
                                   blanks_between=(0, 2), noise=1.0)  # fmt: skip
        lengths = np.maximum(lengths - rng.integers(0, 6, len(lengths)), 0)
        p = prepare_problem(lp, lengths, g, CtcBeamOptions(beam=10.0, nbest=3), None)
        raw = decode_cpu(p)
        for final, h in _checked_against_the_oracle(p, raw):
            split = token_spans(h.tokens, h.word_ids, by_word, None, not final)
            if final:  # split whole, or not at all
                assert split is None or not split or split[-1][1] == len(h.tokens) - 1
            elif split and split[-1][1] < len(h.tokens) - 1:  # tokens left
                assert token_spans(h.tokens, h.word_ids, by_word, None) is None
                left += 1
    assert left  # paths with tokens of words still to come were among them


def test_shipped_ocr_word_times_follow_the_letters(tmp_path):
    """Issue 16's example: in the shipped OCR data, "as" is spelled a(2) s(4) |(6)."""
    from wfstdecode.ctc import decode_npz
    from wfstdecode.demo import run_demo  # noqa: F401  (the demo builds this graph)
    from wfstdecode.graph import read_lexicon
    from wfstdecode.graph.build_dir import build_graph_dir
    from wfstdecode.symbols import SymbolTable
    from wfstdecode.testing.data import PACKAGE_DATA

    def inputs():
        tokens = SymbolTable.read(PACKAGE_DATA / "tokens.txt")
        return tokens, read_lexicon(PACKAGE_DATA / "lexicon.txt", tokens)

    _, build = build_graph_dir(tmp_path / "g", inputs, PACKAGE_DATA / "lm.arpa.gz", "compact",
                                 separator="|")  # fmt: skip
    result = decode_npz(PACKAGE_DATA / "ocr_emissions.npz", build.graph,
                        CtcBeamOptions(beam=16.0, max_active=2000, acoustic_scale=2.0))  # fmt: skip
    found = 0
    for hyps in result.hypotheses:
        h = hyps[0]
        for i, (word, (start, end)) in enumerate(zip(h.words, h.word_timestamps, strict=True)):
            letters = [(g, f) for g, f in zip(h.tokens, h.timestamps, strict=True)
                       if start <= f <= end]  # fmt: skip
            spelled = "".join(build.graph.tokens.symbol(t) for t, _ in letters)
            if h.notes and i == len(h.words) - 1:  # a line cut short: no final state reached
                assert word.startswith(spelled)
            else:
                assert spelled == word
            found += 1
    # Issue 16's example: the first line's "lots" is l(1) o(3) t(5) s(7) |(8); the word's
    # output arc sits at frame 7 after label pushing (reported as (7, 8) before).
    first = result.hypotheses[0][0]
    assert first.words[0] == "lots" and first.word_timestamps[0] == (1, 7)
    assert found > 300


def _all_splits(tokens, words, prons):
    """Brute force: every way to cut ``tokens`` into consecutive spellings of ``words``."""
    import itertools

    n, m = len(tokens), len(words)
    out = []
    for cuts in itertools.combinations(range(1, n), m - 1):
        bounds = [0, *cuts, n]
        pieces = [tuple(tokens[a:b]) for a, b in itertools.pairwise(bounds)]
        if all(p in prons[w] for p, w in zip(pieces, words, strict=True)):
            out.append([(a, b - 1) for a, b in itertools.pairwise(bounds)])
    return out


@pytest.mark.parametrize("topology", ["normal", "compact"])
def test_word_times_without_a_separator_come_from_the_pronunciations(tmp_path, topology):
    """A phone-like lexicon with no separator (some words with two spellings, some spellings
    prefixes of others): each word's span holds one of its spellings, the split is the one a
    brute-force enumeration finds first, and batched equals the one-path oracle."""
    from wfstdecode import SymbolTable
    from wfstdecode.ctc._paths import to_hypotheses
    from wfstdecode.ctc.cpu import decode_cpu
    from wfstdecode.ctc.search import prepare_problem
    from wfstdecode.graph import build_tlg
    from wfstdecode.graph.lexicon import LexiconEntry
    from wfstdecode.testing.lm import random_arpa
    from wfstdecode.testing.paths import path_hypothesis

    rng = np.random.default_rng(7)
    phones = ["p", "t", "k", "a", "i", "u", "s"]
    tokens = SymbolTable.from_list(["<blk>", *phones])
    words = [f"w{i}" for i in range(12)]
    spellings = {w: {tuple(rng.choice(phones, int(rng.integers(1, 5)))) for _ in range(2)}
                 for w in words}  # fmt: skip
    spellings["w0"] = {("p", "a"), ("p", "a", "t")}  # one spelling a prefix of the other
    spellings["w1"] = {("t", "k"), ("k",)}  # so "p a t k" is w0 w1 in two ways
    lexicon = [LexiconEntry(w, p) for w in words for p in sorted(spellings[w])]
    (tmp_path / "lm.arpa").write_text(random_arpa(words, order=2, seed=2))
    g = build_tlg(tokens, lexicon, str(tmp_path / "lm.arpa"), topology).graph
    prons = {g.words.id(w): {tuple(tokens.id(x) for x in p) for p in s}
             for w, s in spellings.items()}  # fmt: skip
    sentences = [[str(w) for w in rng.choice(words, int(rng.integers(1, 5)))] for _ in range(12)]
    seqs = [[tokens.id(x) for w in s for x in sorted(spellings[w])[0]] for s in sentences]
    sentences.append(["w0", "w1"])
    seqs.append([tokens.id(x) for x in "patk"])
    lp, lengths = simulate_ctc(seqs, g.num_tokens, seed=5, noise=0.3)
    p = prepare_problem(lp, lengths, g, CtcBeamOptions(beam=12.0), None)
    raw = decode_cpu(p)
    moved = ambiguous = 0
    for b, (h,) in enumerate(to_hypotheses(p, raw)):
        arcs, frames = raw[b].paths[0][:2]
        assert path_hypothesis(p, b, arcs, frames).word_timestamps == h.word_timestamps
        splits = _all_splits(list(h.tokens), list(h.word_ids), prons)
        assert splits, (h.words, h.tokens)
        ambiguous += len(splits) > 1
        first = min(splits, key=lambda split: [e for _, e in split])  # words ending earliest
        after = [*h.timestamps[1:], lengths[b]]  # where the next token starts
        for word, (start, end), (a, e) in zip(h.word_ids, h.word_timestamps, first, strict=True):
            assert start == h.timestamps[a]
            assert h.timestamps[e] <= end < after[e]  # the last token's last frame
            inside = tuple(t for t, f in zip(h.tokens, h.timestamps, strict=True)
                           if start <= f <= end)  # fmt: skip
            assert inside in prons[word]
        word_arc_frames = [f for a, f in zip(arcs, frames, strict=True) if g.olabel[a]]
        moved += sum(f != s for f, (s, _) in zip(word_arc_frames, h.word_timestamps, strict=True))
    assert moved and ambiguous
