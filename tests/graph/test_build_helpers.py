"""The graph builder's helpers: the pynini operations TLG goes through (arc sorting,
determinize + minimize, connected composition, sizes), the stage lines, the ARPA's words for a
lexicon-free build, the oov slot's labels, and what the OCR demo reports."""

import io

import numpy as np

# --- graph/ops ------------------------------------------------------------------------------


def test_sort_arcs_orders_each_states_arcs_by_input_label():
    """Each state's arcs in OpenFst's input-label order (output label second), as its docstring
    promises (TLG is built through it)."""
    from wfstdecode.fstio import FstArrays
    from wfstdecode.graph.ops import sort_arcs

    fst = FstArrays(0, np.array([np.inf, 0.0], np.float32), np.array([0, 0, 0, 1]),
                    np.array([1, 1, 1, 1]), np.array([3, 1, 2, 1]), np.array([1, 3, 2, 0]),
                    np.zeros(4, np.float32))  # fmt: skip
    s = sort_arcs(fst)
    assert s.src.tolist() == [0, 0, 0, 1]
    assert s.ilabel.tolist() == [1, 2, 3, 1] and s.olabel.tolist() == [3, 2, 1, 0]


def test_determinize_minimize_minimizes():
    """determinize_minimize minimizes (without it LG, hence TLG, stays correct but larger). Two
    words ``ab``/``cb`` whose tails can be shared: 3 states, not 4 (or 5)."""
    import pynini

    from wfstdecode.graph.ops import determinize_minimize

    fst = pynini.union(pynini.accep("ab"), pynini.accep("cb"))  # not optimized: redundant
    fst.rmepsilon()
    out = determinize_minimize(fst)
    assert out.num_states() == 3


def test_compose_leaves_no_dead_states():
    """Composition trims the states that lead nowhere (kept, TLG would give the same answers from a
    larger graph). ``yz`` ∘ ``yw`` matches ``y`` then dies."""
    import pynini

    from wfstdecode.graph.ops import compose

    a = pynini.union(pynini.accep("x"), pynini.accep("yz")).optimize()
    b = pynini.union(pynini.accep("x"), pynini.accep("yw")).optimize()
    out = compose(a, b)
    assert out.num_states() == 2  # start -x-> final; nothing of the dead ``y`` branch


def test_size_counts_the_arcs_of_a_pynini_fst():
    """The arc count of the pynini stages (LG, min(det(LG))) in every build stage's line and
    build.json is their arcs, for a pynini FST as for FstArrays."""
    import pynini

    from wfstdecode.graph.ops import from_pynini, size

    fst = pynini.union(pynini.accep("ab"), pynini.accep("cd"), pynini.accep("e"))
    arcs = sum(1 for s in fst.states() for _ in fst.arcs(s))
    assert size(fst) == {"states": fst.num_states(), "arcs": arcs} and arcs != fst.num_states()
    assert size(from_pynini(fst)) == size(fst)


# --- progress -------------------------------------------------------------------------------


def test_print_stage_flushes_each_line():
    """Each stage line is flushed: with stdout a pipe or a file (a log, a batch job) they would come
    only at the end of a build of hours, or never if it is killed."""
    from wfstdecode.progress import print_stage

    class Recording(io.StringIO):
        flushed = 0

        def flush(self):
            Recording.flushed += 1
            super().flush()

    out = Recording()
    print_stage({"stage": "G", "states": 1, "arcs": 2, "seconds": 0.5, "peak_rss_mb": 10.0},
                file=out)  # fmt: skip
    assert Recording.flushed >= 1 and out.getvalue().startswith("  G ")


# --- demo -----------------------------------------------------------------------------------


def test_demo_reports_its_wers_and_shows_eight_lines(tmp_path, monkeypatch, capsys):
    """The OCR demo shows eight example lines and returns and prints the greedy and TLG WERs each
    under its name: its whole point is the before/after comparison. The build is a tiny TLG and the
    decode a stand-in, so only what the demo reports is under test."""
    from types import SimpleNamespace

    import wfstdecode.ctc
    import wfstdecode.graph
    from wfstdecode.demo import run_demo
    from wfstdecode.graph import build_tlg
    from wfstdecode.graph.lexicon import LexiconEntry
    from wfstdecode.symbols import SymbolTable
    from wfstdecode.testing.lm import random_arpa

    tokens = SymbolTable.from_list(["<blk>", "|", "a", "b"])
    lexicon = [LexiconEntry(w, tuple(w)) for w in ("ab", "ba", "aab")]
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(random_arpa([e.word for e in lexicon], order=2, seed=1, density=1.0))
    tiny = build_tlg(tokens, lexicon, str(arpa), "compact")
    monkeypatch.setattr(wfstdecode.graph, "build_tlg", lambda *a, **k: tiny)
    lines = [f"line {i}" for i in range(10)]
    result = SimpleNamespace(texts=lines, references=lines, greedy_texts=lines,
                             greedy_wer=0.5, wer=0.25)  # fmt: skip
    monkeypatch.setattr(wfstdecode.ctc, "decode_npz", lambda *a, **k: result)
    assert run_demo(tmp_path / "demo") == {"greedy_wer": 0.5, "wer": 0.25}
    out = capsys.readouterr().out
    assert out.count("  reference: ") == 8
    assert "WER greedy CTC 50.0%  ->  TLG beam search 25.0%" in out


def test_print_stage_writes_to_the_file_given(capsys):
    """Stage lines go to the file given (`speech.graph` sends them to stderr so that stdout stays
    the command's output), with thousands separators, the extra figures once, and nothing for no
    extras."""
    from wfstdecode.progress import print_stage

    out = io.StringIO()
    print_stage({"stage": "LG", "states": 1234, "arcs": 5678, "seconds": 1.25,
                 "peak_rss_mb": 99.5, "words": 3}, file=out)  # fmt: skip
    assert capsys.readouterr().out == ""
    line = out.getvalue()
    assert "1,234 states" in line and "5,678 arcs" in line and "{'words': 3}" in line
    assert line.count("1.25") == 1  # (seconds once, not again among the extra figures)
    out = io.StringIO()
    print_stage({"stage": "G", "states": 1, "arcs": 2, "seconds": 0.5, "peak_rss_mb": 1.0},
                file=out)  # fmt: skip
    assert not out.getvalue().rstrip().endswith("{}")  # no extras: nothing


# --- graph/build_dir ------------------------------------------------------------------------


def test_arpa_words_leave_out_the_special_words(tmp_path):
    """The ARPA's words leave out ``<s>``, ``</s>`` and ``<unk>``: ``build-tlg --chars/--spm``
    without a lexicon would otherwise spell ``<unk>`` as a word (with --spm: pieces ``<``, ``unk``,
    ``>``) or warn that it cannot."""
    from wfstdecode.graph.build_dir import arpa_words

    arpa = tmp_path / "lm.arpa"
    arpa.write_text("\\data\\\nngram 1=5\n\n\\1-grams:\n-1.0\t<s>\t-0.5\n-1.0\t</s>\n-1.0\t<unk>\n"
                    "-0.5\tab\n-0.5\tba\n\n\\end\\\n")  # fmt: skip
    assert arpa_words(arpa) == ["ab", "ba"]


# --- graph/oov_slot -------------------------------------------------------------------------


def test_only_the_slots_own_labels_are_slot_labels():
    """Only the slot's own labels are slot labels: a word in angle brackets (``<unk>``, ``</s>``, a
    tagged word such as ``<laugh>``) is a word of its own, not part of a spelled word."""
    from wfstdecode.graph.oov_slot import CLOSE, OPEN, is_slot_label, spell_label

    assert all(is_slot_label(w) for w in (OPEN, CLOSE, spell_label("a"), spell_label("▁x")))
    assert not any(is_slot_label(w) for w in ("<unk>", "</s>", "<laugh>", "<oov:a", "oov:a>"))
