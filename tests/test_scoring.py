"""`wfstdecode score` / `scoring.score_lattices` (Kaldi's local/score.sh): at every LM weight and
word insertion penalty each lattice's best path is the cheapest of all its paths by brute force
(graph + WIP * words + acoustic / LMWT), and the error counts are compute-wer's (an edit
distance split into insertions, deletions and substitutions by one minimum alignment)."""

import numpy as np
import pytest

from wfstdecode import OptionsError, SymbolTable
from wfstdecode.cli import main
from wfstdecode.metrics import ErrorCounts, alignment, edit_distance, error_counts
from wfstdecode.scoring import best_setting, score_lattices
from wfstdecode.testing.lattices import sausage_lattice, sausage_paths

WEIGHTS, PENALTIES = (0.25, 0.5, 1.0, 2.0, 4.0), (-1.0, 0.0, 0.7)


def _words(vocab):
    return SymbolTable.from_list(["<eps>", *(f"w{i}" for i in range(1, vocab + 1))])


@pytest.mark.parametrize("seed", range(3))
def test_each_setting_takes_the_cheapest_path_of_every_lattice(seed):
    rng = np.random.default_rng(seed)
    lattices = {f"u{k}": sausage_lattice(rng, positions=4, width=4, vocab=5) for k in range(3)}
    words = _words(5)
    refs = {key: " ".join(f"w{int(x)}" for x in rng.integers(1, 6, size=3)) for key in lattices}
    settings = score_lattices(lattices, words, refs, WEIGHTS, PENALTIES)
    assert [(s.lm_weight, s.word_penalty) for s in settings] == [
        (w, p) for p in PENALTIES for w in WEIGHTS]  # fmt: skip
    for s in settings:
        for key, lat in lattices.items():
            costs: dict[tuple, float] = {}
            for arcs in sausage_paths(lat):
                labels = tuple(f"w{int(lat.olabel[a])}" for a in arcs if lat.olabel[a])
                per_arc = [float(lat.graph_cost[a]) + float(lat.acoustic_cost[a]) / s.lm_weight
                           for a in arcs]  # fmt: skip
                cost = sum(per_arc) + s.word_penalty * len(labels) + float(lat.final[-1])
                costs[labels] = min(costs.get(labels, np.inf), cost)
            chosen = costs[tuple(s.hypotheses[key])]
            assert chosen == pytest.approx(min(costs.values()), abs=1e-4)
        refs_w = [refs[k].split() for k in lattices]
        hyps = [s.hypotheses[k] for k in lattices]
        assert s.counts.errors == sum(map(edit_distance, refs_w, hyps))
        assert s.counts.words == 9
    best = best_setting(settings)
    assert best.counts.errors == min(s.counts.errors for s in settings)
    # the settings differ: the grid matters on these lattices
    assert len({tuple(map(tuple, s.hypotheses.values())) for s in settings}) > 1


def _kaldi_counts(ref, hyp):
    """(ins, del, sub) as Kaldi's util/edit-distance-inl.h LevenshteinEditDistance(ref, hyp,
    &ins, &del, &sub) counts them (compute-wer), transcribed: a forward pass over the
    hypothesis carrying (cost, ins, del, sub) per reference prefix; a match or substitution
    only when strictly cheaper than both others, then a deletion strictly cheaper than an
    insertion, else an insertion."""
    e = [(i, 0, i, 0) for i in range(len(ref) + 1)]
    for h in hyp:
        cur = [(e[0][0] + 1, e[0][1] + 1, e[0][2], e[0][3])]
        for i in range(1, len(ref) + 1):
            ins, dels, sub = e[i][0] + 1, cur[i - 1][0] + 1, e[i - 1][0] + (h != ref[i - 1])
            if sub < ins and sub < dels:
                _, i_, d_, s_ = e[i - 1]
                cur.append((sub, i_, d_, s_ + (h != ref[i - 1])))
            elif dels < ins:
                _, i_, d_, s_ = cur[i - 1]
                cur.append((dels, i_, d_ + 1, s_))
            else:
                _, i_, d_, s_ = e[i]
                cur.append((ins, i_ + 1, d_, s_))
        e = cur
    return e[-1][1:]


@pytest.mark.parametrize("seed", range(20))
def test_error_counts_split_the_edit_distance_as_kaldis_compute_wer_does(seed):
    rng = np.random.default_rng(seed)
    refs = [list(rng.integers(0, 4, size=int(rng.integers(0, 9))).astype(str)) for _ in range(4)]
    hyps = [list(rng.integers(0, 4, size=int(rng.integers(0, 9))).astype(str)) for _ in range(4)]
    counts = error_counts(refs, hyps)
    want = np.sum([_kaldi_counts(r, h) for r, h in zip(refs, hyps, strict=True)], axis=0)
    assert (counts.insertions, counts.deletions, counts.substitutions) == tuple(want)
    assert counts.errors == sum(map(edit_distance, refs, hyps))
    assert counts.words == sum(map(len, refs))
    assert counts.kaldi().startswith(f"%WER {100 * counts.wer:.2f} [ {counts.errors} / ")
    with pytest.raises(TypeError):
        error_counts(["a b"], ["a b"])


def test_error_counts_take_compute_wers_split_where_the_alignments_differs():
    """compute-wer's counts come from a forward pass, not from the alignment's backtrace: of
    the equal-cost splits of 'a b b a' / 'a c b b' it takes 1 ins 1 del (the backtrace: 2
    sub); likewise 'b b a' / 'c a c': 1 ins 1 del 1 sub (the backtrace: 3 sub)."""
    for ref, hyp, want in (("a b b a", "a c b b", (1, 1, 0)), ("b b a", "c a c", (1, 1, 1)),
                           ("a b", "a b", (0, 0, 0)), ("", "a b", (2, 0, 0)),
                           ("a b", "", (0, 2, 0))):  # fmt: skip
        c = error_counts([ref.split()], [hyp.split()])
        assert (c.insertions, c.deletions, c.substitutions) == want, (ref, hyp)
    pairs = alignment(["a", "b", "b", "a"], ["a", "c", "b", "b"])
    assert sum(a is not None and b is not None and a != b for a, b in pairs) == 2


def test_bad_settings_and_missing_references_are_refused():
    lat = sausage_lattice(np.random.default_rng(0), positions=2, width=2, vocab=2)
    words, refs = _words(2), {"u": "w1"}
    for weights, penalties, says in (([0.0], [0.0], "lm weight must be in"),
                                     ([float("nan")], [0.0], "lm weight must be in"),
                                     ([1.0], [1e9], "word penalty must be in"),
                                     ([], [0.0], "at least one lm weight"),
                                     ([True], [0.0], "must be a number")):  # fmt: skip
        with pytest.raises(OptionsError, match=says):
            score_lattices({"u": lat}, words, refs, weights, penalties)
    with pytest.raises(OptionsError, match="no reference for lattice 'v'"):
        score_lattices({"v": lat}, words, refs, [1.0])


def test_the_score_command_on_decoded_lattices(tmp_path, capsys):
    """`decode --write-lattices`, then `score`: its lines are score_lattices' (compute-wer's
    format), the best is the fewest errors, --best-text holds its transcripts; at LMWT 1 WIP 0
    it agrees with decode's own WER (the lattice's best path is the search's)."""
    from wfstdecode.graph import LexiconEntry, build_tlg
    from wfstdecode.lattice_io import read_kaldi_archive
    from wfstdecode.testing import simulate_ctc
    from wfstdecode.testing.lm import random_arpa

    words = ["a", "ab", "ba", "bab", "c", "ca"]
    (tmp_path / "lm.arpa").write_text(random_arpa(words, order=2, seed=3, density=0.6))
    tokens = SymbolTable.from_list(["<blk>", "a", "b", "c", "|"])
    lexicon = [LexiconEntry(w, tuple(w)) for w in words]
    g = build_tlg(tokens, lexicon, str(tmp_path / "lm.arpa"), "compact", separator="|").graph
    g.save(tmp_path / "g.npz")
    rng = np.random.default_rng(3)
    refs = [list(rng.choice(words, size=3)) for _ in range(6)]
    seqs = [[tokens.id(c) for c in "|".join(r)] for r in refs]
    lp, lengths = simulate_ctc(seqs, g.num_tokens, seed=3, confusion_prob=0.3, noise=1.5)
    ids = [f"utt{i}" for i in range(len(refs))]
    np.savez(tmp_path / "e.npz", log_probs=lp, lengths=lengths, ids=np.array(ids))
    (tmp_path / "text").write_text(
        "".join(f"{u} {' '.join(r)}\n" for u, r in zip(ids, refs, strict=True))
    )
    ark = tmp_path / "lat.ark"
    assert main(["decode", str(tmp_path / "g.npz"), str(tmp_path / "e.npz"), "--backend", "cpu",
                 "--lattice-beam", "8", "--write-lattices", str(ark), "--text",
                 str(tmp_path / "text")]) == 0  # fmt: skip
    decoded = capsys.readouterr()
    argv = ["score", str(ark), "--words", str(tmp_path / "g.npz"), "--text",
            str(tmp_path / "text"), "--lm-weights", "0.5,1:2", "--word-insertion-penalties=-1,0",
            "--best-text", str(tmp_path / "best.txt")]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert len(lines) == 3 * 2 + 1 and lines[-1].startswith("best: %WER ")
    lattices = read_kaldi_archive(ark)
    want = score_lattices(lattices, g.words, dict(zip(ids, map(" ".join, refs), strict=True)),
                          [0.5, 1.0, 2.0], [-1.0, 0.0])  # fmt: skip
    assert lines[:-1] == [f"{s.counts.kaldi()} LMWT {s.lm_weight:g} WIP {s.word_penalty:g}"
                          for s in want]  # fmt: skip
    best = best_setting(want)
    assert (
        lines[-1]
        == f"best: {best.counts.kaldi()} LMWT {best.lm_weight:g} WIP {best.word_penalty:g}"
    )
    assert (tmp_path / "best.txt").read_text() == "".join(
        f"{u} {' '.join(best.hypotheses[u])}\n".replace(" \n", "\n") for u in ids
    )
    at_one = next(s for s in want if s.lm_weight == 1.0 and s.word_penalty == 0.0)
    assert f"WER {100 * at_one.counts.wer:.2f}%" in decoded.err
    # refused before any work: an output over an input, a bad grid, a lattice without reference
    (tmp_path / "short").write_text("utt0 a\n")
    for extra, says in ((["--best-text", str(tmp_path / "text")], "would overwrite the input"),
                        (["--lm-weights", "2:1"], "--lm-weights: '2:1' must have FIRST <= LAST"),
                        (["--lm-weights", "x"], "--lm-weights: 'x' is not a number"),
                        (["--lm-weights", "1_5"], "--lm-weights: '1_5' is not a number"),
                        (["--lm-weights", "0"], "--lm-weights: lm weight must be in")):  # fmt: skip
        assert main([*argv[:-2], *extra]) == 2
        assert says in capsys.readouterr().err
    assert main(["score", str(ark), "--words", str(tmp_path / "g.npz"), "--text",
                 str(tmp_path / "short")]) == 2  # fmt: skip
    assert "has no reference for lattice 'utt1'" in capsys.readouterr().err


def test_a_word_id_not_in_the_table_is_refused_up_front_naming_the_lattice():
    """A lattice with a word the table lacks (another graph's words.txt) is refused before any
    scoring, naming the lattice — also when no setting's best path takes that word (it was a
    bare 'id 5 is not in the table' from whichever best path met it first, or nothing)."""
    lat = sausage_lattice(np.random.default_rng(2), positions=3, width=3, vocab=5)
    refs = {"u": "w1"}
    assert int(lat.olabel.max()) == 5
    with pytest.raises(OptionsError, match="lattice 'u' has the word id 5, which is not in"):
        score_lattices({"u": lat}, _words(4), refs, [1.0])
    best = score_lattices({"u": lat}, _words(5), refs, WEIGHTS, PENALTIES)
    assert not any("w5" in s.hypotheses["u"] for s in best)  # no best path takes it here
    with pytest.raises(OptionsError, match="lattice 'u' has the word id 5"):
        score_lattices({"u": lat}, _words(4), refs, WEIGHTS, PENALTIES)


def _score_files(tmp_path, keys):
    """An archive of sausage lattices under ``keys``, words.txt and a text of their references;
    the score command's arguments for them (LMWT 1)."""
    from wfstdecode.lattice_io import write_kaldi_archive

    rng = np.random.default_rng(0)
    lattices = {k: sausage_lattice(rng, positions=2, width=2, vocab=3) for k in keys}
    write_kaldi_archive(lattices, tmp_path / "lat.ark")
    _words(3).write(tmp_path / "words.txt")
    (tmp_path / "text").write_text("".join(f"{k} w1 w2\n" for k in keys), encoding="utf-8")
    return ["score", str(tmp_path / "lat.ark"), "--words", str(tmp_path / "words.txt"),
            "--text", str(tmp_path / "text"), "--lm-weights", "1"]  # fmt: skip


def test_best_text_writes_ids_as_the_archive_and_the_references_have_them(tmp_path):
    """--best-text is a Kaldi text file of --text's ids (compute-wer's hypotheses): an id is
    written as read (a backslash or a control character was escaped: 'a\\\\b' and
    'x\\x85y', which neither compute-wer nor --text match)."""
    from wfstdecode.ctc import read_reference_texts

    keys = ["a\\b", "x\x85y", "plain"]
    argv = _score_files(tmp_path, keys)
    assert main([*argv, "--best-text", str(tmp_path / "best.txt")]) == 0
    written = (tmp_path / "best.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert [line.split(" ")[0] for line in written] == keys
    assert list(read_reference_texts(tmp_path / "best.txt")) == keys


def test_best_text_standard_output_is_refused(tmp_path, monkeypatch, capsys):
    """--best-text - (Kaldi's standard output) is refused before any work; it made a file
    named '-'."""
    argv = _score_files(tmp_path, ["u"])
    monkeypatch.chdir(tmp_path)
    assert main([*argv, "--best-text", "-"]) == 2
    assert "--best-text -: standard output is not written" in capsys.readouterr().err
    assert not (tmp_path / "-").exists()


def test_references_without_lattices_mark_the_lines_partial(tmp_path, capsys):
    """As compute-wer --mode=present (score.sh's): references without a hypothesis are not
    scored and each WER line says [PARTIAL]; not when every reference has its lattice."""
    argv = _score_files(tmp_path, ["u", "v"])
    assert main(argv) == 0
    assert "[PARTIAL]" not in capsys.readouterr().out
    with open(tmp_path / "text", "a", encoding="utf-8") as f:
        f.write("extra w1\n")
    assert main(argv) == 0
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert len(lines) == 4 and all("] [PARTIAL] LMWT 1 WIP " in line for line in lines)
    assert "1 utterances of" in out.err


def test_lattices_with_oov_slot_labels_are_refused():
    """A spelled word is several lattice labels (the slot's and its characters'), not a word
    to score; rescore refuses such lattices too."""
    lat = sausage_lattice(np.random.default_rng(0), positions=2, width=2, vocab=2)
    words = SymbolTable.from_list(["<eps>", "w1", "<oov>"])
    with pytest.raises(OptionsError, match="holds the oov slot's label '<oov>'"):
        score_lattices({"u": lat}, words, {"u": "w1"}, [1.0])


def test_kaldi_line_rounds_the_rate_as_compute_wer_does():
    """compute-wer prints a float32 percentage (BaseFloat percent_wer): 1074 errors of 1541
    words is 69.6950... in double (69.70) but 69.69 in float32, which compute-wer prints; the
    line said 69.70. The ordinary cases are unchanged."""
    line = "%WER 69.69 [ 1074 / 1541, 0 ins, 0 del, 1074 sub ]"
    assert ErrorCounts(1541, 0, 0, 1074).kaldi() == line
    assert ErrorCounts(1491, 2, 0, 1460).kaldi().startswith("%WER 98.06 [ 1462 / 1491,")
    assert ErrorCounts(40, 1, 2, 2).kaldi() == "%WER 12.50 [ 5 / 40, 1 ins, 2 del, 2 sub ]"
    assert ErrorCounts(3, 0, 0, 0).kaldi().startswith("%WER 0.00 [ 0 / 3,")
