"""TLG equals the naive composition T∘L∘G, and agrees with a TLG built by the standard Kaldi
recipe (kaldilm arpa2fst + kaldifst) under kaldi-decoder's FasterDecoder."""

import math

import numpy as np
import pynini
import pytest

from wfstdecode import DecodingGraph
from wfstdecode.fstio import read_openfst
from wfstdecode.graph import build_grammar, build_lexicon_fst, build_tlg, ctc_topology, read_arpa
from wfstdecode.graph.lexicon import LexiconEntry
from wfstdecode.graph.ops import compose, from_pynini, relabel_inputs_above, to_pynini
from wfstdecode.graph.tlg import make_word_table
from wfstdecode.symbols import SymbolTable
from wfstdecode.testing.data import shared_file
from wfstdecode.testing.lm import random_arpa, random_words
from wfstdecode.testing.oracles import KaldiFasterDecoder, linear_acceptor, paths

LETTERS = "abc"
TOKENS = SymbolTable.from_list(["<blk>", "|", *LETTERS])


def random_setup(tmp_path, seed, homophones=True):
    rng = np.random.default_rng(seed)
    words = random_words(int(rng.integers(4, 9)), LETTERS, seed=seed, max_len=3)
    lexicon = [LexiconEntry(w, tuple(w)) for w in words]
    if homophones:  # an extra homophone and a pronunciation variant with a probability
        lexicon.append(LexiconEntry(words[0] + "_h", tuple(words[0])))
        lexicon.append(LexiconEntry(words[1], (*tuple(words[1]), "a"), 0.4))
    arpa = tmp_path / f"lm{seed}.arpa"
    arpa.write_text(random_arpa(sorted({e.word for e in lexicon}), order=3, seed=seed, density=0.4))
    return lexicon, arpa


def naive_tlg(lexicon, arpa, topology, separator=None):
    words = make_word_table(lexicon)
    g = build_grammar(read_arpa(arpa), words)
    l_fst, num_disambig = build_lexicon_fst(lexicon, TOKENS, words, separator)
    t = ctc_topology(TOKENS.next_id, topology, num_disambig=num_disambig)
    lg = compose(to_pynini(l_fst), to_pynini(g))
    tlg = from_pynini(compose(to_pynini(t), lg))
    return to_pynini(relabel_inputs_above(tlg, TOKENS.next_id)), words


def output_costs(fst, frames):
    """{word-id sequence: best cost} over all paths reading ``frames``."""
    out = pynini.compose(linear_acceptor(frames), fst).project("output").rmepsilon()
    if out.start() == pynini.NO_STATE_ID:
        return {}
    result = {}
    for _, olabels, weight in paths(pynini.determinize(out)):
        result[tuple(olabels)] = min(result.get(tuple(olabels), math.inf), weight)
    return result


def sampled_inputs(fst, rng, count, num_tokens=TOKENS.next_id):
    """Input sequences of random successful paths (so most have outputs), plus random noise."""
    seed = int(rng.integers(1 << 30))
    sampled = pynini.randgen(fst, npath=count, seed=seed, max_length=12)
    out = [ilabels for ilabels, _, _ in paths(sampled) if ilabels]
    out += [list(rng.integers(1, num_tokens + 1, int(rng.integers(1, 7)))) for _ in range(count)]
    return out


@pytest.mark.parametrize("topology", ["normal", "compact"])
@pytest.mark.parametrize("separator", [None, "|"])
def test_tlg_equals_naive_composition(tmp_path, topology, separator):
    rng = np.random.default_rng(7)
    compared = nonempty = 0
    for seed in range(3):
        lexicon, arpa = random_setup(tmp_path, seed)
        built = build_tlg(TOKENS, lexicon, str(arpa), topology, separator=separator)
        ours = to_pynini(built.graph.to_arrays()).arcsort("ilabel")
        naive, _ = naive_tlg(lexicon, arpa, topology, separator)
        naive.arcsort("ilabel")
        for frames in sampled_inputs(naive, rng, 25):
            got, expected = output_costs(ours, frames), output_costs(naive, frames)
            assert got.keys() == expected.keys(), frames
            for key, cost in expected.items():
                assert math.isclose(got[key], cost, abs_tol=1e-3), (frames, key)
            compared += 1
            nonempty += bool(expected)
    assert nonempty >= compared // 3


def test_output_labels_are_pushed_to_the_first_arc_of_unique_words(tmp_path):
    """With words that share no prefix, each word's label sits on its first token arc."""
    lexicon = [LexiconEntry(w, tuple(w)) for w in ("aab", "bcc", "cab")]
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(random_arpa([e.word for e in lexicon], order=2, seed=1, density=1.0))
    graph = build_tlg(TOKENS, lexicon, str(arpa), "compact").graph
    start_arcs = slice(graph.e_offsets[graph.start], graph.e_offsets[graph.start + 1])
    labels = {
        int(i): int(o)
        for i, o in zip(graph.ilabel[start_arcs], graph.olabel[start_arcs], strict=True)
    }
    for word in ("aab", "bcc", "cab"):
        assert labels[TOKENS.id(word[0]) + 1] == graph.words.id(word)


# ---------------------------------------------------------------- the standard Kaldi recipe
kaldifst = pytest.importorskip("kaldifst", reason="kaldifst builds the Kaldi-recipe oracle")
kaldi_decoder = pytest.importorskip("kaldi_decoder", reason="kaldi-decoder is the oracle decoder")
kaldilm = pytest.importorskip("kaldilm", reason="kaldilm runs Kaldi's arpa2fst")


def kaldi_recipe_tlg(tmp_path, lexicon, arpa, words, tokens=TOKENS):
    """TLG the way Kaldi / icefall scripts make it, independent of wfstdecode.graph:
    arpa2fst G, a text lexicon FST with Kaldi-style disambiguation, fsttablecompose,
    determinize-star, minimize-encoded, EESEN-style CTC token FST."""
    words.write(tmp_path / "words.txt")
    g_text = kaldilm.arpa2fst(
        str(arpa), "", disambig_symbol="#0", read_symbol_table=str(tmp_path / "words.txt")
    )
    g = kaldifst.compile(g_text)
    v = tokens.next_id
    prons = [e.tokens for e in lexicon]
    seen, lines, disambig_max, next_state = {}, [], 0, 1
    prefixes = {p[:i] for p in prons for i in range(1, len(p))}
    for e in lexicon:
        labels = [tokens.id(t) + 1 for t in e.tokens]
        if prons.count(e.tokens) > 1 or e.tokens in prefixes:
            seen[e.tokens] = seen.get(e.tokens, 0) + 1
            disambig_max = max(disambig_max, seen[e.tokens])
            labels.append(v + 1 + seen[e.tokens])
        state = 0
        for i, lab in enumerate(labels):
            nxt = 0 if i == len(labels) - 1 else next_state
            next_state += nxt != 0
            out = words.id(e.word) if i == 0 else 0
            cost = -math.log(e.prob) if i == 0 else 0.0
            lines.append(f"{state} {nxt} {lab} {out} {cost}")
            state = nxt
    lines.append(f"0 0 {v + 1} {words.id('#0')} 0")
    lines.append("0 0")
    lex = kaldifst.compile("\n".join(lines))
    kaldifst.arcsort(lex, sort_type="olabel")
    kaldifst.arcsort(g, sort_type="ilabel")
    lg = kaldifst.compose(lex, g)
    kaldifst.determinize_star(lg)
    kaldifst.minimize_encoded(lg)
    # EESEN ctc_token_fst: state 0 blank loop; state t+... per token; all states final.
    t_lines, non_blank = [], range(1, v)
    t_lines.append("0 0 1 0")
    for tok in non_blank:
        lab = tok + 1
        t_lines += [f"0 {tok} {lab} {lab}", f"{tok} {tok} {lab} 0", f"{tok} 0 1 0"]
        t_lines += [f"{tok} {o} {o + 1} {o + 1}" for o in non_blank if o != tok]
    for s in range(v):
        t_lines += [f"{s} {s} {v + 1 + d} {v + 1 + d}" for d in range(disambig_max + 1)]
        t_lines.append(f"{s} 0")
    t = kaldifst.compile("\n".join(t_lines))
    kaldifst.arcsort(t, sort_type="olabel")
    kaldifst.arcsort(lg, sort_type="ilabel")
    tlg = kaldifst.compose(t, lg)
    tlg.write(str(tmp_path / "kaldi_tlg.fst"))
    # Disambiguation symbols become epsilon, as in Kaldi's fstrmsymbols.
    return DecodingGraph.from_arrays(
        relabel_inputs_above(read_openfst(tmp_path / "kaldi_tlg.fst"), v)
    )


def peaky_emissions(rng, frames, num_frames, v=TOKENS.next_id):
    """Log-probs peaked on ``frames`` (a token-label path), with random competitors."""
    logits = rng.normal(0.0, 1.5, (num_frames, v)).astype(np.float32)
    for t, lab in enumerate(frames[:num_frames]):
        logits[t, lab - 1] += float(rng.uniform(0.5, 4.0))
    return (logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)).astype(np.float32)


def compare_with_kaldi_recipe(tmp_path, tokens, lexicon, arpa, rng, utterances, topology="normal"):
    built = build_tlg(tokens, lexicon, str(arpa), topology)
    ours = KaldiFasterDecoder(built.graph, beam=1e9)
    kaldi = KaldiFasterDecoder(kaldi_recipe_tlg(tmp_path, lexicon, arpa, built.words, tokens), 1e9)
    sampled = sampled_inputs(to_pynini(built.graph.to_arrays()), rng, 20, tokens.next_id)
    agree = 0
    for i in range(utterances):
        frames = sampled[i % len(sampled)]
        num_frames = max(len(frames), int(rng.integers(3, 14)))
        lp = peaky_emissions(rng, frames, num_frames, tokens.next_id)
        (w1, c1), (w2, c2) = ours.best_path(lp), kaldi.best_path(lp)
        # Kaldi quantises weights to 1/1024 per arc in minimize_encoded.
        assert math.isclose(c1, c2, abs_tol=1e-2), (i, c1, c2)
        agree += w1 == w2
    return agree


@pytest.mark.parametrize("seed", range(3))
def test_same_best_path_as_the_kaldi_recipe_under_faster_decoder(tmp_path, seed):
    rng = np.random.default_rng(100 + seed)
    lexicon, arpa = random_setup(tmp_path, seed)
    agree = compare_with_kaldi_recipe(tmp_path, TOKENS, lexicon, arpa, rng, 40)
    # Equal costs; word sequences may differ only on exact ties (homophones / equal paths).
    assert agree >= 38


def test_same_best_path_as_the_kaldi_recipe_on_a_real_lm(tmp_path):
    """turtle.arpa (a real trigram of ../shared/data), spelled with characters."""
    arpa = shared_file("turtle.arpa")
    tokens = SymbolTable.from_list(["<blk>", "'", *"abcdefghijklmnopqrstuvwxyz"])
    words = [w for w in read_arpa(arpa).vocabulary if w not in ("<s>", "</s>")]
    lexicon = [LexiconEntry(w, tuple(w)) for w in words]
    agree = compare_with_kaldi_recipe(tmp_path, tokens, lexicon, arpa, np.random.default_rng(5), 60)
    assert agree >= 59


def test_icefall_token_tables_lose_their_trailing_disambiguation_symbols(tmp_path, caplog):
    """icefall's prepare_lang*.py append #0, #1, … to tokens.txt after the model's tokens. Kept as
    tokens, they gave the graph V + k columns and every decode of the model's V columns was
    refused; they are left out (said in a warning) and the graph is the one the model's own
    table builds. Between the model's tokens such a symbol is refused, naming it."""
    lexicon, arpa = random_setup(tmp_path, 3)
    icefall = SymbolTable.from_list([*TOKENS.symbols(), "#0", "#1"])
    with caplog.at_level("WARNING", logger="wfstdecode.symbols"):
        graph = build_tlg(icefall, lexicon, arpa, "compact").graph
    assert "disambiguation symbols" in caplog.text and "#0" in caplog.text
    plain = build_tlg(TOKENS, lexicon, arpa, "compact").graph
    assert graph.tokens == TOKENS and graph.summary() == plain.summary()
    for name in ("ilabel", "olabel", "weight", "next_state"):
        assert np.array_equal(getattr(graph, name), getattr(plain, name)), name
    interleaved = SymbolTable([("<blk>", 0), ("#0", 1), ("|", 2), ("a", 3), ("b", 4), ("c", 5)])
    with pytest.raises(Exception, match="'#0' \\(id 1\\)"):
        build_tlg(interleaved, lexicon, arpa, "compact")
