"""`wfstdecode score` / `scoring.score_lattices` (Kaldi's local/score.sh): at every LM weight and
word insertion penalty each lattice's best path is the cheapest of all its paths by brute force
(graph + WIP * words + acoustic / LMWT), and the error counts are compute-wer's (an edit
distance split into insertions, deletions and substitutions by one minimum alignment)."""

import numpy as np
import pytest

from wfstdecode import OptionsError, SymbolTable
from wfstdecode.cli import main
from wfstdecode.metrics import alignment, edit_distance, error_counts
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


@pytest.mark.parametrize("seed", range(20))
def test_error_counts_split_the_edit_distance_as_the_alignment_does(seed):
    rng = np.random.default_rng(seed)
    refs = [list(rng.integers(0, 4, size=int(rng.integers(0, 9))).astype(str)) for _ in range(4)]
    hyps = [list(rng.integers(0, 4, size=int(rng.integers(0, 9))).astype(str)) for _ in range(4)]
    counts = error_counts(refs, hyps)
    ins = dels = subs = 0
    for r, h in zip(refs, hyps, strict=True):
        for a, b in alignment(r, h):
            ins += a is None
            dels += b is None
            subs += a is not None and b is not None and a != b
    assert (counts.insertions, counts.deletions, counts.substitutions) == (ins, dels, subs)
    assert counts.errors == sum(map(edit_distance, refs, hyps))
    assert counts.words == sum(map(len, refs))
    assert counts.kaldi().startswith(f"%WER {100 * counts.wer:.2f} [ {counts.errors} / ")
    with pytest.raises(TypeError):
        error_counts(["a b"], ["a b"])


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
                        (["--lm-weights", "0"], "--lm-weights: lm weight must be in")):  # fmt: skip
        assert main([*argv[:-2], *extra]) == 2
        assert says in capsys.readouterr().err
    assert main(["score", str(ark), "--words", str(tmp_path / "g.npz"), "--text",
                 str(tmp_path / "short")]) == 2  # fmt: skip
    assert "has no reference for lattice 'utt1'" in capsys.readouterr().err
