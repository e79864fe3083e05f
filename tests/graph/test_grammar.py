"""G from ARPA: costs equal ARPA log-probabilities (checked against KenLM); errors name lines."""

import gzip
import itertools
import math

import numpy as np
import pynini
import pytest

from wfstdecode.errors import InputFileError
from wfstdecode.graph import build_grammar, read_arpa
from wfstdecode.graph.grammar import LN10, read_arpa_vocabulary
from wfstdecode.graph.ops import to_pynini
from wfstdecode.symbols import SymbolTable
from wfstdecode.testing.data import PACKAGE_DATA, shared_file
from wfstdecode.testing.lm import (
    BackoffScorer,
    arpa_text,
    random_arpa,
    random_words,
    restrict_arpa,
)
from wfstdecode.testing.lm import sample_sentences as sample_from_ngrams
from wfstdecode.testing.oracles import linear_acceptor

kenlm = pytest.importorskip(
    "kenlm", reason="kenlm-ex (pip install kenlm-ex) is the independent scorer"
)


def word_table(model):
    words = sorted(w for w in model.vocabulary if w not in ("<s>", "</s>"))
    return SymbolTable.from_list(["<eps>", *words, "#0", "<s>", "</s>"])


def sample_sentences(model, rng, count):
    """Half uniform over the vocabulary, half following the model's own n-grams (so explicit
    higher-order n-grams and backoffs are both exercised)."""
    vocab = [w for w in model.vocabulary if w not in ("<s>", "</s>")]
    by_history = {}
    for level in model.ngrams[1:]:
        for k in level:
            by_history.setdefault(k[:-1], []).append(k[-1])
    out = []
    for i in range(count):
        length = int(rng.integers(1, 12))
        if i % 2 == 0:
            out.append([vocab[j] for j in rng.integers(0, len(vocab), length)])
            continue
        sent, hist = [], ("<s>",)
        while len(sent) < length:
            nxt = [w for w in by_history.get(hist, []) if w != "</s>"] or vocab
            w = nxt[int(rng.integers(0, len(nxt)))]
            sent.append(w)
            hist = (*hist, w)[-(model.order - 1) :]
            while hist and hist not in by_history:
                hist = hist[1:]
        out.append(sent)
    return out


def check_against_kenlm(arpa_path, num_sentences, seed=0):
    model = read_arpa(arpa_path)
    words = word_table(model)
    g = build_grammar(model, words)
    lm = kenlm.Model(str(arpa_path))
    rng = np.random.default_rng(seed)
    scorer = BackoffScorer(g, words.id("#0"))
    worst = 0.0
    for sent in sample_sentences(model, rng, num_sentences):
        expected = -lm.score(" ".join(sent), bos=True, eos=True) * LN10
        got = scorer.cost([words.id(w) for w in sent])
        worst = max(worst, abs(got - expected))
        assert math.isclose(got, expected, abs_tol=1e-4, rel_tol=1e-5), (sent, got, expected)
    return g, words, worst


def test_random_arpa_costs_equal_kenlm(tmp_path):
    for seed in range(4):
        path = tmp_path / f"lm{seed}.arpa"
        path.write_text(random_arpa(random_words(12, seed=seed), order=3, seed=seed))
        check_against_kenlm(path, 200, seed)


def test_shipped_lm_costs_equal_kenlm():
    arpa = next(iter(sorted(PACKAGE_DATA.glob("lm.arpa*"))), None)
    if arpa is None:
        pytest.skip("the shipped demo LM is not present yet")
    check_against_kenlm(arpa, 300)


def test_turtle_costs_equal_kenlm():
    check_against_kenlm(shared_file("turtle.arpa"), 300)


@pytest.mark.slow
def test_real_lm_costs_equal_kenlm():
    """en-us.arpa.gz: 72k words, 3.7M n-grams; 500 random sentences."""
    check_against_kenlm(shared_file("en-us.arpa.gz"), 500)


def test_restricted_arpa_is_a_well_formed_cut(tmp_path):
    """restrict_arpa: the most probable words, the n-grams of highest chain probability, closed
    under prefix and suffix, numbers unchanged; its ARPA text reads back exactly and KenLM scores
    it as G does; its sampled sentences stay in its vocabulary."""
    src = tmp_path / "lm.arpa"
    src.write_text(random_arpa(random_words(16, seed=5), order=3, seed=5, density=0.7))
    full = read_arpa(src)
    cut = restrict_arpa(src, num_words=9, max_ngrams=(25, 12))
    unigram = {k[0]: lp for k, (lp, _) in full.ngrams[0].items()}
    ranked = sorted((w for w in unigram if w not in ("<s>", "</s>")), key=lambda w: -unigram[w])
    assert set(cut.vocabulary) == {"<s>", "</s>", *ranked[:9]}
    chain = {("<s>",): unigram["</s>"]} | {(w,): lp for w, lp in unigram.items() if w != "<s>"}
    for n in (2, 3):
        lower, level = cut.ngrams[n - 2], cut.ngrams[n - 1]
        eligible = {k: chain[k[:-1]] + v[0] for k, v in full.ngrams[n - 1].items()
                    if k[:-1] in lower and k[1:] in lower}  # fmt: skip
        assert set(level) <= set(eligible) and len(level) == min(len(eligible), (25, 12)[n - 2])
        assert all(level[k] == full.ngrams[n - 1][k] for k in level)
        dropped = [eligible[k] for k in eligible if k not in level]
        assert not dropped or min(eligible[k] for k in level) >= max(dropped)
        chain |= {k: eligible[k] for k in level}
    path = tmp_path / "cut.arpa"
    path.write_text(arpa_text(cut))
    assert read_arpa(path).ngrams == cut.ngrams
    check_against_kenlm(path, 200)
    assert set(restrict_arpa(full, 50, alphabet="ab").vocabulary) == {
        "<s>", "</s>", *(w for w in unigram if w not in ("<s>", "</s>") and set(w) <= {"a", "b"})
    }  # fmt: skip
    sents = sample_from_ngrams(cut, 30, seed=0, min_words=2, max_words=6)
    assert all(2 <= len(s) <= 6 and set(s) <= set(cut.vocabulary) - {"<s>", "</s>"} for s in sents)
    assert sents == sample_from_ngrams(cut, 30, seed=0, min_words=2, max_words=6)


def test_shortest_path_never_beats_the_arpa_score(tmp_path):
    """Through plain epsilon semantics a backoff path may only cost more or the same."""
    path = tmp_path / "lm.arpa"
    path.write_text(random_arpa(random_words(8, seed=3), order=3, seed=3))
    model = read_arpa(path)
    words = word_table(model)
    g_arrays = build_grammar(model, words)
    g = to_pynini(g_arrays).arcsort("ilabel")
    scorer = BackoffScorer(g_arrays, words.id("#0"))
    rng = np.random.default_rng(0)
    equal = 0
    for sent in sample_sentences(model, rng, 100):
        ids = [words.id(w) for w in sent]
        phi = scorer.cost(ids)
        linear = linear_acceptor(ids, loop_label=words.id("#0"))
        best = float(pynini.shortestdistance(pynini.compose(linear, g), reverse=True)[0])
        assert best <= phi + 1e-4
        equal += math.isclose(best, phi, abs_tol=1e-4)
    assert equal > 0


def test_oov_words_are_dropped_and_counted(tmp_path):
    path = tmp_path / "lm.arpa"
    path.write_text(random_arpa(["aa", "bb", "cc"], order=2, seed=1, density=1.0))
    model = read_arpa(path, vocabulary={"aa", "bb"})
    assert set(model.dropped) == {"cc"}
    assert all("cc" not in k for level in model.ngrams for k in level)
    assert model.dropped["cc"] == sum(
        k.count("cc") > 0 for level in read_arpa(path).ngrams for k in level
    )


def test_gzip_and_vocabulary_pass(tmp_path):
    text = random_arpa(["x", "y"], order=2, seed=2)
    (tmp_path / "lm.arpa.gz").write_bytes(gzip.compress(text.encode()))
    assert read_arpa(tmp_path / "lm.arpa.gz").counts()[0] == 4
    assert read_arpa_vocabulary(tmp_path / "lm.arpa.gz") == ["<s>", "</s>", "x", "y"]


BAD_ARPA = [
    ("\\data\\\nngram 1=2\n\n\\1-grams:\n-1.0\t<s>\n-0.5\t</s>\tx\ty\n\\end\\\n", 6, "fields"),
    ("\\data\\\nngram 1=2\n\n\\1-grams:\n-1.0\t<s>\nabc\t</s>\n\\end\\\n", 6, "bad number"),
    (
        "\\data\\\nngram 1=3\n\n\\1-grams:\n-1.0\t<s>\n-1.0\t</s>\n\\end\\\n",
        None,
        "declares ngram 1=3",
    ),
    ("\\data\\\nngram 1=2\n\n\\1-grams:\n-1.0\t<s>\n-1.0\t</s>\n", 6, "missing \\\\end"),
    ("hello\nworld\n", None, "no \\\\data"),
    ("\\data\\\nngram 1=1\n\n\\1-grams:\n-1.0\ta\n\\end\\\n", None, "no <s>"),
    ("\\data\\\nngram one=2\n", 2, "ngram N=count"),
    ("\\data\\\nngram 1=1\n\n\\2-grams:\n-1 a b\n\\end\\\n", 4, "unexpected section"),
    ("\\data\\\nngram 1=2\n\n\\1-grams:\n-1.0\t<s>\n1.5\t</s>\n\\end\\\n", 6, "<= 0"),
    (  # a bigram of a word no unigram lists (KenLM refuses it: what would it back off to?)
        "\\data\\\nngram 1=3\nngram 2=2\n\n\\1-grams:\n-1\t<s>\t-0.5\n-1\t</s>\n-1\ta\t-0.3\n"
        "\n\\2-grams:\n-0.5\t<s> a\n-0.5\ta c\n\n\\end\\\n",
        12,
        "2-gram 'a c' has the word 'c', which no 1-gram lists",
    ),
]


@pytest.mark.parametrize("text,line,message", BAD_ARPA)
def test_malformed_arpa_names_file_and_line(tmp_path, text, line, message):
    path = tmp_path / "bad.arpa"
    path.write_text(text)
    with pytest.raises(InputFileError, match=message) as info:
        read_arpa(path)
    assert info.value.path == str(path)
    assert info.value.line_no == line
    assert str(path) in str(info.value)


def test_unreadable_and_binary_arpa(tmp_path):
    with pytest.raises(InputFileError, match="cannot read"):
        read_arpa(tmp_path / "missing.arpa")
    path = tmp_path / "binary.arpa"
    path.write_bytes(b"\\data\\\n\xff\xfe\x00bad")
    with pytest.raises(InputFileError, match="UTF-8"):
        read_arpa(path)


def test_unk_is_kept_only_when_asked(tmp_path, caplog):
    from wfstdecode.graph import build_tlg
    from wfstdecode.graph.lexicon import LexiconEntry

    path = tmp_path / "lm.arpa"
    path.write_text(random_arpa(["ab", "ba"], order=2, seed=4, unk=True))
    tokens = SymbolTable.from_list(["<blk>", "a", "b"])
    lexicon = [LexiconEntry("ab", ("a", "b")), LexiconEntry("ba", ("b", "a")),
               LexiconEntry("<unk>", ("a", "a"))]  # fmt: skip
    dropped = build_tlg(tokens, lexicon, str(path), "compact")
    kept = build_tlg(tokens, lexicon, str(path), "compact", keep_unk=True)
    unk = kept.words.id("<unk>")
    assert "<unk>" in dropped.dropped_words and unk not in dropped.graph.olabel
    assert "<unk>" not in kept.dropped_words and unk in kept.graph.olabel
    # asked for, and nothing to keep: said why
    build_tlg(tokens, lexicon[:2], str(path), "compact", keep_unk=True)
    assert "keep_unk: <unk> is not in the lexicon" in caplog.text
    path.write_text(random_arpa(["ab", "ba"], order=2, seed=4, unk=False))
    build_tlg(tokens, lexicon, str(path), "compact", keep_unk=True)
    assert "keep_unk: the ARPA file has no <unk> n-grams" in caplog.text


_BOS_BACKOFF_ONLY = """\\data\\
ngram 1=4
ngram 2=1

\\1-grams:
-99\t<s>\t-0.5
-0.7\t</s>
-0.8\ta\t-0.2
-0.9\tb

\\2-grams:
-0.3\ta b
\\end\\
"""

# "a b c" is listed, its context "a b" is not (as pruning leaves them); the filler words give
# KenLM's probing hash table the room it wants for such gaps
_FILLER = [f"f{i}" for i in range(40)]
_MISSING_CONTEXT = "\n".join([
    "\\data\\", f"ngram 1={5 + len(_FILLER)}", f"ngram 2={3 + len(_FILLER) - 1}", "ngram 3=2",
    "", "\\1-grams:", "-1.0\t<s>\t-0.3", "-0.7\t</s>", "-0.8\ta\t-0.2", "-0.9\tb\t-0.4",
    "-1.1\tc\t-0.1", *(f"-3.0\t{w}" for w in _FILLER),
    "", "\\2-grams:", "-0.5\t<s> a\t-0.25", "-0.6\ta c\t-0.15", "-0.4\tb c",
    *(f"-1.0\t{a} {b}" for a, b in itertools.pairwise(_FILLER)),
    "", "\\3-grams:", "-0.2\t<s> a b", "-0.1\ta b c", "\\end\\", "",
])  # fmt: skip


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        (_BOS_BACKOFF_ONLY, [["a"], ["b", "a", "b"], []]),
        (_MISSING_CONTEXT, [["a", "b", "c", "a", "b", "c"], ["c", "a", "b", "c"], ["a", "b"]]),
    ],
    ids=["start-backoff", "missing-context"],
)
def test_g_and_the_rescoring_lm_equal_kenlm_where_pruning_left_gaps(tmp_path, text, sentences):
    """G charges <s>'s backoff weight when no bigram follows <s> (its start state was the empty
    history), and keeps a trigram whose bigram context the file lacks (it backed off past it);
    `NgramLm` and KenLM agree with both."""
    from wfstdecode.rescore import NgramLm

    path = tmp_path / "lm.arpa"
    path.write_text(text)
    model = read_arpa(path)
    words = word_table(model)
    scorer = BackoffScorer(build_grammar(model, words), words.id("#0"))
    lm, rescoring = kenlm.Model(str(path)), NgramLm(path)
    for sent in sentences:
        expected = -lm.score(" ".join(sent), bos=True, eos=True) * LN10
        assert scorer.cost([words.id(w) for w in sent]) == pytest.approx(expected, abs=1e-4)
        assert rescoring.sentence_cost(sent) == pytest.approx(expected, abs=1e-4)


def test_rescoring_cost_reads_unknown_history_words_as_unk(tmp_path):
    """`NgramLm.cost` after a history word the model lacks reads it as <unk>, as `step` and
    KenLM do."""
    from wfstdecode.rescore import NgramLm

    path = tmp_path / "lm.arpa"
    path.write_text(_MISSING_CONTEXT.replace("ngram 1=45", "ngram 1=46").replace(
        "-1.1\tc\t-0.1\n", "-1.1\tc\t-0.1\n-2.0\t<unk>\t-0.7\n"))  # fmt: skip
    lm, oracle = NgramLm(path), kenlm.Model(str(path))
    log10 = oracle.score("a zz c", bos=False, eos=False) - oracle.score(
        "a zz", bos=False, eos=False
    )
    assert lm.cost(("a", "zz"), "c") == pytest.approx(-log10 * LN10, abs=1e-4)
    assert lm.cost(("a", "zz"), "c") == pytest.approx(lm.cost(("a", "<unk>"), "c"))


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (
            lambda t: t.replace("-0.7\t</s>\n", "").replace("ngram 1=45", "ngram 1=44"),
            "no </s> unigram",
        ),
        (lambda t: t + "\\data\\\n", r"text after \\end\\"),
        (lambda t: t.replace("-0.9\tb\t-0.4", "-0_9\tb\t-0.4"), "bad number '-0_9'"),
        (lambda t: t.replace("-0.9\tb\t-0.4", "-0.9\tb\t-inf"), "backoff weight must be finite"),
        (lambda t: t.replace("\tc\t-0.1", "\t#0\t-0.1").replace(" c", " #0"), "'#0' is reserved"),
        (
            lambda t: t.replace("\tc\t-0.1", "\t<eps>\t-0.1").replace(" c", " <eps>"),
            "'<eps>' is reserved",
        ),
    ],
)
def test_arpa_files_kenlm_refuses_are_refused_by_line(tmp_path, change, says):
    path = tmp_path / "lm.arpa"
    path.write_text(change(_MISSING_CONTEXT))
    with pytest.raises(InputFileError, match=f"lm.arpa.*{says}"):
        read_arpa(path)


def test_arpa_fields_are_split_at_spaces_and_tabs_only(tmp_path):
    """A no-break space is part of a word (as KenLM reads it), not a field separator."""
    path = tmp_path / "lm.arpa"
    path.write_text(_MISSING_CONTEXT.replace("-1.1\tc\t-0.1", "-1.1\tc\u00a0d\t-0.1")
                    .replace(" c", " c\u00a0d"))  # fmt: skip
    model = read_arpa(path)
    assert ("c\u00a0d",) in model.ngrams[0] and ("a", "b", "c\u00a0d") in model.ngrams[2]


def test_a_backoff_weight_on_the_longest_n_grams_is_said_and_ignored(tmp_path, caplog):
    """KenLM refuses such a file; nothing backs off from a highest-order n-gram, so the weight
    means nothing: read, with a warning."""
    path = tmp_path / "lm.arpa"
    path.write_text(_MISSING_CONTEXT.replace("-0.1\ta b c", "-0.1\ta b c\t-0.3"))
    with caplog.at_level("WARNING"):
        model = read_arpa(path)
    assert "1 highest-order n-grams carry a backoff weight" in caplog.text
    assert model.ngrams[2][("a", "b", "c")] == (-0.1, -0.3)


def test_a_parsed_model_is_restricted_to_the_lexicon_as_a_path_is(tmp_path):
    """build_tlg with an `ArpaModel` (read once, several graphs) raised SymbolError on a word
    the lexicon lacks (and on <unk> without keep_unk): only a path's n-grams were filtered."""
    import numpy as np

    from wfstdecode.graph import build_tlg
    from wfstdecode.graph.lexicon import LexiconEntry

    path = tmp_path / "lm.arpa"
    path.write_text(random_arpa(["ab", "ba", "zz"], order=3, seed=2, unk=True))
    tokens = SymbolTable.from_list(["<blk>", "a", "b"])
    lexicon = [LexiconEntry("ab", ("a", "b")), LexiconEntry("ba", ("b", "a"))]
    model = read_arpa(path)
    before = model.counts()
    from_path = build_tlg(tokens, lexicon, str(path), "compact")
    from_model = build_tlg(tokens, lexicon, model, "compact")
    assert from_model.dropped_words == from_path.dropped_words
    assert set(from_model.dropped_words) == {"zz", "<unk>"}
    for name in ("arc_source", "next_state", "ilabel", "olabel", "weight", "final_cost"):
        assert np.array_equal(getattr(from_model.graph, name), getattr(from_path.graph, name))
    assert model.counts() == before and not model.dropped  # the caller's model is left as it was


def test_a_blank_named_blank_builds_the_graph_blk_would(tmp_path):
    """NeMo's and hama's token tables call it <blank>: decode_ctc took it, build_tlg refused
    it ("no blank symbol '<blk>'") with no word of what to do."""
    import numpy as np

    from wfstdecode.errors import GraphError
    from wfstdecode.graph import build_tlg
    from wfstdecode.graph.lexicon import LexiconEntry

    path = tmp_path / "lm.arpa"
    path.write_text(random_arpa(["ab", "ba"], order=2, seed=3))
    lexicon = [LexiconEntry("ab", ("a", "b")), LexiconEntry("ba", ("b", "a"))]
    built = [build_tlg(SymbolTable.from_list(["a", blank, "b"]), lexicon, str(path), "compact")
             for blank in ("<blk>", "<blank>")]  # fmt: skip
    for name in ("arc_source", "next_state", "ilabel", "olabel", "weight"):
        assert np.array_equal(getattr(built[0].graph, name), getattr(built[1].graph, name))
    assert built[1].graph.metadata["blank_id"] == 1
    with pytest.raises(GraphError, match=r"no blank symbol: name the blank's column '<blk>'"):
        build_tlg(SymbolTable.from_list(["<eps>", "a", "b"]), lexicon, str(path), "compact")


def test_an_n_gram_predicting_bos_after_a_word_is_left_out_with_a_warning(tmp_path, caplog):
    """``a <s>`` means nothing (<s> only starts a sentence): G has no arc for it, as for other
    n-grams that cannot be used, and says so; the unigram <s> every ARPA lists is not warned of."""
    plain, with_bos = tmp_path / "plain.arpa", tmp_path / "bos.arpa"
    plain.write_text(_MISSING_CONTEXT)
    with_bos.write_text(
        _MISSING_CONTEXT.replace(f"ngram 2={2 + len(_FILLER)}", f"ngram 2={3 + len(_FILLER)}")
        .replace("-0.4\tb c", "-0.4\tb c\n-0.3\ta <s>")
    )  # fmt: skip
    arcs = []
    for path, warned in ((with_bos, True), (plain, False)):
        caplog.clear()
        model = read_arpa(path)
        with caplog.at_level("WARNING"):
            arcs.append(build_grammar(model, word_table(model)).num_arcs)
        assert ("n-grams that predict <s>" in caplog.text) == warned, caplog.text
        assert "skipped 1 n-grams that predict <s> after a word" in caplog.text or not warned
    assert arcs[0] == arcs[1]
