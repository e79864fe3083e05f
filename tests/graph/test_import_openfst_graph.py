"""A TLG built elsewhere, read from OpenFst: what the file cannot say (its T's topology, the word
separator) given by the user — `DecodingGraph.from_openfst(topology=, separator=)` and
``wfstdecode import-graph``, which writes the graph directory ``decode`` reads."""

import itertools
import subprocess
import sys

import numpy as np
import pytest

from wfstdecode import DecodingGraph, SymbolTable
from wfstdecode.ctc import CtcBeamOptions, decode_ctc
from wfstdecode.errors import GraphError
from wfstdecode.graph import build_tlg
from wfstdecode.graph.lexicon import LexiconEntry

ARPA = "\\data\\\nngram 1=4\n\n\\1-grams:\n-1.0 <s>\n-0.5 </s>\n-0.3 ab\n-0.3 b\n\n\\end\\\n"
TOKENS = SymbolTable.from_list(["<blk>", "|", "a", "b"])
LEXICON = [LexiconEntry("ab", ("a", "b")), LexiconEntry("b", ("b",))]


@pytest.fixture
def minimal(tmp_path):
    """A minimal-topology TLG with a separator, as built, and its OpenFst file and tables."""
    (tmp_path / "lm.arpa").write_text(ARPA)
    g = build_tlg(TOKENS, LEXICON, str(tmp_path / "lm.arpa"), "minimal", separator="|").graph
    g.to_openfst(tmp_path / "TLG.fst")
    g.tokens.write(tmp_path / "tokens.txt")
    g.words.write(tmp_path / "words.txt")
    return g


def _best(graph, labels):
    lp = np.full((1, len(labels), len(TOKENS)), -15.0, np.float32)
    for t, c in enumerate(labels):
        lp[0, t, TOKENS.id(c)] = 0.0
    (h, *_) = decode_ctc(lp, None, graph, CtcBeamOptions(beam=20.0))[0]
    return h.words, h.tokens, h.timestamps, h.word_timestamps, round(h.score, 4)


def test_topology_and_separator_given_decode_as_the_built_graph(tmp_path, minimal):
    fst = tmp_path / "TLG.fst"
    told = DecodingGraph.from_openfst(fst, minimal.tokens, minimal.words, topology="minimal",
                                      separator="|")  # fmt: skip
    untold = DecodingGraph.from_openfst(fst, minimal.tokens, minimal.words)
    differ = 0
    for n in range(1, 5):  # every frame sequence of up to 4 one-hot frames
        for labels in itertools.product(TOKENS.symbols(), repeat=n):
            want = _best(minimal, labels)
            assert _best(told, labels) == want, labels
            differ += _best(untold, labels) != want
    assert differ > 100  # without them: "| |" one separator, "b |" a word ending at the "|"


def test_what_cannot_be_given(tmp_path, minimal):
    fst = tmp_path / "TLG.fst"
    with pytest.raises(GraphError, match="topology must be one of"):
        DecodingGraph.from_openfst(fst, minimal.tokens, topology="ctc")
    with pytest.raises(GraphError, match="separator '@' is not in the token table"):
        DecodingGraph.from_openfst(fst, minimal.tokens, separator="@")
    with pytest.raises(GraphError, match=r"not in the token table \(none given\)"):
        DecodingGraph.from_openfst(fst, separator="|")
    with pytest.raises(GraphError, match="is token 0, the blank"):
        DecodingGraph.from_openfst(fst, minimal.tokens, separator="<blk>")


def _import(tmp_path, *extra):
    cmd = [sys.executable, "-m", "wfstdecode.cli", "import-graph", str(tmp_path / "TLG.fst"),
           "--tokens", str(tmp_path / "tokens.txt"), "--words", str(tmp_path / "words.txt"),
           *extra]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True)


def test_import_graph_writes_a_directory_decode_reads(tmp_path, minimal):
    out = _import(tmp_path, "--topology", "minimal", "--separator", "|", "--out", tmp_path / "g")
    assert out.returncode == 0, out.stderr
    g = DecodingGraph.load(tmp_path / "g")
    assert g.metadata["topology"] == "minimal" and g.metadata["separator"] == "|"
    for name in ("start", "final_cost", "e_offsets", "next_state", "weight", "ilabel", "olabel"):
        assert np.array_equal(getattr(g, name), getattr(minimal, name)), name
    assert list(g.words) == list(minimal.words) and list(g.tokens) == list(minimal.tokens)
    info = subprocess.run([sys.executable, "-m", "wfstdecode.cli", "info", str(tmp_path / "g")],
                          capture_output=True, text=True)  # fmt: skip
    assert info.returncode == 0 and "import" in info.stdout, info.stderr
    # a second import into it is refused (before the FST is read), then replaced with --force
    again = _import(tmp_path, "--out", tmp_path / "g")
    assert again.returncode == 2 and "already exists (use --force" in again.stderr
    again = _import(tmp_path, "--out", tmp_path / "g", "--force")
    assert again.returncode == 0 and "topology" not in DecodingGraph.load(tmp_path / "g").metadata


def test_import_of_a_bad_file_leaves_nothing(tmp_path, minimal):
    (tmp_path / "TLG.fst").write_bytes((tmp_path / "TLG.fst").read_bytes()[:40])
    out = _import(tmp_path, "--out", tmp_path / "g")
    assert out.returncode != 0 and "TLG.fst" in out.stderr and "Traceback" not in out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["TLG.fst", "lm.arpa", "tokens.txt",
                                                           "words.txt"]  # fmt: skip
    out = _import(tmp_path, "--separator", "@", "--out", tmp_path / "g")
    assert out.returncode != 0 and "separator '@' is not in the token table" in out.stderr


def test_a_kaldi_token_table_counting_from_eps_is_read_one_lower(tmp_path, minimal):
    """Kaldi's (EESEN's) tokens.txt: ``<eps> 0``, ``<blk> 1``, …, its TLG reading token id =
    input label, which is this graph's id + 1: the same graph once the table counts from the
    blank. Read as it is, every token (and the separator) was named one off."""
    kaldi = SymbolTable([("<eps>", 0), *((s, i + 1) for s, i in TOKENS)])
    g = DecodingGraph.from_openfst(tmp_path / "TLG.fst", kaldi, minimal.words,
                                   topology="minimal", separator="|")  # fmt: skip
    assert g.tokens == TOKENS and "tokens_renumbered" in g.metadata
    for labels in (["a", "b", "|", "b"], ["b", "b", "|", "a", "b"]):
        assert _best(g, labels) == _best(minimal, labels)
    # k2's phone tables have <eps> 0 as their blank (no <blk> at 1): kept as they are
    k2 = SymbolTable.from_list(["<eps>", "|", "a", "b"])
    assert DecodingGraph.from_openfst(tmp_path / "TLG.fst", k2).tokens == k2


def test_a_riva_token_table_with_the_blank_after_the_units_is_read_one_lower(tmp_path, minimal):
    """riva's prepare_TLG_fst (blank_first=false, its default) writes tokens.txt as ``<eps> 0``,
    the units from 1, ``<blk>`` after them (a NeMo model's blank is its last column), then
    ``#0``…; its TLG reads token id = input label. Only ``<eps> 0, <blk> 1`` was read one lower:
    this table was kept, one column more than the model's, and every decode was refused (and a
    separator was refused as "token 0, the blank")."""
    from wfstdecode.fstio import FstArrays, write_openfst

    riva = SymbolTable.from_list(["<eps>", "|", "a", "b", "<blk>", "#0", "#1"])
    a = minimal.to_arrays()
    ilabel = a.ilabel - 1  # token t >= 1 (input label t + 1 here) is riva's id t ...
    ilabel[a.ilabel == 1] = riva.id("<blk>")  # ... and the blank is riva's <blk>
    write_openfst(FstArrays(a.start, a.final, a.src, a.dst, ilabel, a.olabel, a.weight),
                  tmp_path / "riva.fst")  # fmt: skip
    g = DecodingGraph.from_openfst(tmp_path / "riva.fst", riva, minimal.words,
                                   topology="minimal", separator="|")  # fmt: skip
    model = ["|", "a", "b", "<blk>"]  # the model's columns: the blank last
    assert g.tokens.symbols() == model and "tokens_renumbered" in g.metadata
    for labels in (["a", "b", "|", "b"], ["b", "b", "|", "a", "b"], ["<blk>", "b", "a"]):
        lp = np.full((1, len(labels), len(model)), -15.0, np.float32)
        for t, c in enumerate(labels):
            lp[0, t, model.index(c)] = 0.0
        (h, *_) = decode_ctc(lp, None, g, CtcBeamOptions(beam=20.0))[0]
        words, tokens, times, word_times, score = _best(minimal, labels)
        got = (h.words, h.timestamps, h.word_timestamps, round(h.score, 4))
        assert got == (words, times, word_times, score), labels
        assert [g.tokens.symbol(t) for t in h.tokens] == [TOKENS.symbol(t) for t in tokens]


def test_a_word_table_with_a_word_at_id_0_is_refused(tmp_path, minimal):
    """Output label 0 is OpenFst's epsilon: a words.txt without its ``<eps> 0`` line (words
    counted from 0) was accepted, its word 0 never output and every other word named one off —
    wrong transcripts, silently."""
    off_by_one = SymbolTable.from_list([w for w, i in minimal.words if i != 0])
    with pytest.raises(GraphError, match="gives id 0 to 'ab'.*starts with '<eps> 0'"):
        DecodingGraph.from_openfst(tmp_path / "TLG.fst", minimal.tokens, off_by_one)
    off_by_one.write(tmp_path / "words.txt")
    out = _import(tmp_path, "--out", tmp_path / "g")
    assert out.returncode == 2 and "gives id 0 to 'ab'" in out.stderr, out.stderr
    assert not (tmp_path / "g").exists()
    # a table without id 0, or with another name in angle brackets there, is kept
    for zero in ((), (("<epsilon>", 0),)):
        words = SymbolTable([*zero, *((w, i) for w, i in minimal.words if i != 0)])
        g = DecodingGraph.from_openfst(tmp_path / "TLG.fst", minimal.tokens, words)
        assert g.words == words


def test_an_icefall_token_table_loses_its_trailing_disambiguation_symbols(tmp_path, minimal):
    """icefall's tokens.txt ends with #0, #1, …: no model emits them and the graph holds none, but
    kept they gave the imported graph more columns than the model's log-probs: every decode was
    refused. They are left out as build-tlg leaves them out."""
    icefall = SymbolTable.from_list([*TOKENS.symbols(), "#0", "#1"])
    icefall.write(tmp_path / "tokens.txt")
    out = _import(tmp_path, "--topology", "minimal", "--separator", "|", "--out", tmp_path / "g")
    assert out.returncode == 0, out.stderr
    assert "disambiguation symbols" in out.stderr
    g = DecodingGraph.load(tmp_path / "g")
    assert g.tokens == TOKENS
    assert _best(g, ["a", "b", "|", "b"]) == _best(minimal, ["a", "b", "|", "b"])


def test_a_graph_still_holding_disambiguation_symbols_is_refused_naming_them(tmp_path, minimal):
    """A TLG whose #0 arcs were not removed (no fstrmsymbols after determinization) was refused
    as "ilabel 6 needs log-prob column 5, but the token table has 4 ids", beside a warning that
    the table's #k were left out: the message now names the symbol and what to do."""
    from wfstdecode.fstio import FstArrays, write_openfst

    icefall = SymbolTable.from_list([*TOKENS.symbols(), "#0", "#1"])
    a = minimal.to_arrays()
    n = a.num_states  # a #1 arc to a new state, as a backoff arc before fstrmsymbols
    write_openfst(FstArrays(a.start, np.append(a.final, np.inf), np.append(a.src, a.start),
                            np.append(a.dst, n), np.append(a.ilabel, icefall.id("#1") + 1),
                            np.append(a.olabel, 0), np.append(a.weight, 0.5)),
                  tmp_path / "TLG.fst")  # fmt: skip
    with pytest.raises(GraphError, match="input label 6 is the token table's disambiguation "
                       "symbol '#1'.*remove them"):  # fmt: skip
        DecodingGraph.from_openfst(tmp_path / "TLG.fst", icefall, minimal.words)


def test_an_imported_graph_with_an_oov_slot_keeps_the_slot_closed(tmp_path):
    """A TLG.fst of ``build-tlg --oov-slot`` (its word table ends with ``<oov>``, ``</oov>``,
    ``<oov:t>``…) read back: the file does not hold the slot's metadata, and the slot was read as
    ordinary words — open to every spelling at no cost, so unboosted utterances came out as
    ``<oov> <oov:a> <oov:b> </oov>``. The slot is recognised (closed unless boosted, spelled
    from pronunciations given as --oov-lexicon), and a separator left out is asked for."""
    pytest.importorskip("pynini")
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(ARPA)
    built = build_tlg(TOKENS, LEXICON, str(arpa), "compact", separator="|",
                      oov_slot={"spelling": "chars"}, oov_logprob=-1.0).graph  # fmt: skip
    built.to_openfst(tmp_path / "TLG.fst")
    g = DecodingGraph.from_openfst(tmp_path / "TLG.fst", built.tokens, built.words,
                                   separator="|")  # fmt: skip
    for labels in (["a", "b"], ["b", "a"], ["a", "a", "|", "b"], ["b", "|", "b", "a"]):
        words = _best(g, labels)[0]
        assert words == _best(built, labels)[0], labels
        assert not any(w.startswith("<") for w in words), (labels, words)
    assert g.metadata["oov_slot"] == {"spelling": "lexicon"}
    lp = np.full((1, 2, len(TOKENS)), -15.0, np.float32)
    lp[0, 0, TOKENS.id("b")] = lp[0, 1, TOKENS.id("a")] = 0.0
    (h, *_) = decode_ctc(lp, None, g, CtcBeamOptions(beam=20.0), boosts=[{"ba": 8.0}],
                         oov_lexicon={"ba": "b a"})[0]  # fmt: skip
    assert h.words == ("ba",)
    with pytest.raises(GraphError, match="--separator"):
        DecodingGraph.from_openfst(tmp_path / "TLG.fst", built.tokens, built.words)


def test_a_lexicon_given_gives_word_times_from_the_pronunciations(tmp_path):
    """Without a separator a graph's word times come from its lexicon (`Pronunciations`), which
    an OpenFst file does not hold: imported, they fell back to the spans between output labels,
    which determinization moves. ``lexicon=`` / ``import-graph --lexicon`` give it back."""
    words = ["ab", "abb", "b", "ba"]
    lexicon = [LexiconEntry(w, tuple(w)) for w in words]
    arpa = "".join(f"-0.5 {w}\n" for w in words)
    (tmp_path / "lm.arpa").write_text(f"\\data\\\nngram 1={len(words) + 2}\n\n\\1-grams:\n"
                                      f"-1.0 <s>\n-0.5 </s>\n{arpa}\n\\end\\\n")  # fmt: skip
    built = build_tlg(TOKENS, lexicon, str(tmp_path / "lm.arpa"), "compact").graph
    built.to_openfst(tmp_path / "TLG.fst")
    (tmp_path / "lexicon.txt").write_text("".join(f"{w} {' '.join(w)}\n" for w in words))
    bare = DecodingGraph.from_openfst(tmp_path / "TLG.fst", built.tokens, built.words)
    told = DecodingGraph.from_openfst(tmp_path / "TLG.fst", built.tokens, built.words,
                                      lexicon=tmp_path / "lexicon.txt")  # fmt: skip
    differ = 0
    for n in range(1, 6):
        for labels in itertools.product(["<blk>", "a", "b"], repeat=n):
            want = _best(built, labels)
            assert _best(told, labels) == want, labels
            differ += _best(bare, labels) != want
    assert differ > 10
    with pytest.warns(UserWarning, match="1 words are not in the word table.*'zz'"):
        DecodingGraph.from_openfst(tmp_path / "TLG.fst", built.tokens, built.words,
                                   lexicon=[*lexicon, LexiconEntry("zz", ("b",))])  # fmt: skip
    built.tokens.write(tmp_path / "tokens.txt")
    built.words.write(tmp_path / "words.txt")
    out = _import(tmp_path, "--lexicon", tmp_path / "lexicon.txt", "--out", tmp_path / "g")
    assert out.returncode == 0, out.stderr
    assert DecodingGraph.load(tmp_path / "g").pronunciations is not None
