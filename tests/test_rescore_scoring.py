"""Scoring rescored lattices as Kaldi's scoring does: a word insertion penalty
(lattice-add-penalty) and the WER of the best paths against a Kaldi ``text`` file."""

import math

import numpy as np
import pytest

from wfstdecode import OptionsError
from wfstdecode.cli import main
from wfstdecode.ctc import CtcBeamOptions, ctc_lattices
from wfstdecode.lattice_io import read_kaldi_archive
from wfstdecode.metrics import word_error_rate
from wfstdecode.testing import lexicon_graph, random_graph, random_log_probs, simulate_ctc
from wfstdecode.testing.lm import random_arpa

WORDS = ["cat", "cap", "act", "tact", "pat", "tapa"]


@pytest.mark.parametrize("seed", range(4))
def test_a_word_penalty_moves_every_path_by_its_words(seed):
    """Every word sequence of the lattice (enumerated, each by its best alignment) costs the
    penalty times its words more, and nothing else changes."""
    g = random_graph(seed, num_states=12, word_prob=0.5)
    lp = random_log_probs(seed, 1, 5, g.num_tokens)
    (lat,) = ctc_lattices(lp, None, g, CtcBeamOptions(beam=math.inf, lattice_beam=math.inf))

    def by_words(lattice):  # (each word sequence's best alignment: ties may pick another)
        paths = [(lattice.olabel[arcs], cost) for arcs, cost in lattice.nbest(100_000)]
        return {tuple(labels[labels != 0].tolist()): cost for labels, cost in paths}

    before = by_words(lat)
    assert 3 < len(before) < 100_000  # all of them
    penalised = lat.with_word_penalty(2.5)
    after = by_words(penalised)
    assert set(after) == set(before)
    for words, cost in before.items():
        assert after[words] == pytest.approx(cost + 2.5 * len(words), abs=1e-4)
    assert np.array_equal(penalised.acoustic_cost, lat.acoustic_cost)
    assert lat.with_word_penalty(0) is lat
    for bad in (math.nan, math.inf, True, "1"):
        with pytest.raises(OptionsError, match="word penalty"):
            lat.with_word_penalty(bad)


@pytest.fixture
def archive(tmp_path, capsys):
    """A lattice archive of three utterances decoded with a unigram graph, the two LMs, the
    references, and the rescore command's common arguments."""
    g = lexicon_graph(WORDS, word_cost=[1.0, 1.2, 2.0, 2.5, 1.1, 2.4])
    g.save(tmp_path / "TLG.npz")
    g.words.write(tmp_path / "words.txt")
    texts = {"u1": "cat pat", "u2": "tapa act cat", "u3": "tact cap"}
    seqs = [[g.tokens.id(c) for c in t.replace(" ", "")] for t in texts.values()]
    lp, lengths = simulate_ctc(seqs, g.num_tokens, seed=7, confusion_prob=0.45, noise=2.5)
    np.savez(tmp_path / "e.npz", log_probs=lp, lengths=lengths, ids=np.array(list(texts)))
    old, new = tmp_path / "old.arpa", tmp_path / "new.arpa"
    old.write_text(random_arpa(WORDS, order=1, seed=1, density=1.0))
    new.write_text(random_arpa(WORDS, order=2, seed=2, density=0.6))
    (tmp_path / "text").write_text("".join(f"{k} {t}\n" for k, t in texts.items()))
    assert main(["decode", str(tmp_path / "TLG.npz"), str(tmp_path / "e.npz"), "--backend",
                 "cpu", "--lattice-beam", "8", "--write-lattices",
                 str(tmp_path / "lat.ark")]) == 0  # fmt: skip
    capsys.readouterr()
    return tmp_path, ["rescore", str(tmp_path / "lat.ark"), "--words", str(tmp_path / "words.txt"),
                      "--new-lm", str(new), "--old-lm", str(old)]  # fmt: skip


def _printed(out: str) -> dict[str, tuple[float, list[str]]]:
    rows = [line.split("\t") for line in out.splitlines()]
    return {key: (float(score), text.split()) for key, score, text in rows}


def test_rescore_applies_the_penalty_to_what_it_prints_and_writes(archive, capsys):
    tmp_path, rescore = archive
    assert main([*rescore, "--out", str(tmp_path / "r0.ark")]) == 0
    plain = _printed(capsys.readouterr().out)
    counts = []
    for penalty in (-3.0, 0.0, 1.5, 6.0):
        out = tmp_path / f"r{penalty}.ark"
        assert main([*rescore, "--word-insertion-penalty", str(penalty), "--out", str(out),
                     "--no-determinize-lattice"]) == 0  # fmt: skip
        printed = _printed(capsys.readouterr().out)
        for key, (score, words) in printed.items():  # the best path's score: its own, penalised
            written = read_kaldi_archive(out)[key]
            assert -written.best_cost == pytest.approx(score, abs=2e-3)
            if words == plain[key][1]:
                assert score == pytest.approx(plain[key][0] - penalty * len(words), abs=2e-3)
            else:  # another path won: it beats the unpenalised best once penalised
                assert score >= plain[key][0] - penalty * len(plain[key][1]) - 2e-3
        counts.append(sum(len(w) for _, w in printed.values()))
    assert counts == sorted(counts, reverse=True) and counts[0] > counts[-1]
    assert main([*rescore, "--word-insertion-penalty", "nan"]) == 2
    assert "--word-insertion-penalty" in capsys.readouterr().err


def test_rescore_scores_its_best_paths_against_a_text(archive, capsys):
    tmp_path, rescore = archive
    text = tmp_path / "text"
    assert main([*rescore, "--text", str(text)]) == 0
    captured = capsys.readouterr()
    printed = _printed(captured.out)
    refs = {line.split()[0]: line.split()[1:] for line in text.read_text().splitlines()}
    wer = word_error_rate([refs[k] for k in printed], [w for _, w in printed.values()])
    assert f"WER {100 * wer:.2f}% (3 utterances, 7 reference words)" in captured.err
    text.write_text("u1 cat pat\nu3 tact cap\nu9 extra\n")  # u2 missing: refused, named
    assert main([*rescore, "--text", str(text)]) == 2
    captured = capsys.readouterr()
    assert "'u2'" in captured.err and not captured.out
    assert main([*rescore, "--text", str(text), "--out", str(text)]) == 2
    assert "would overwrite the input" in capsys.readouterr().err


def test_rescore_reads_the_words_of_a_graph_given_as_its_tlg_npz(archive, capsys):
    """--words TLG.npz was read as a words.txt ('not UTF-8'); a graph's file is the graph."""
    tmp_path, rescore = archive
    assert main(rescore) == 0
    want = capsys.readouterr().out
    at = rescore.index("--words") + 1
    assert main([*rescore[:at], str(tmp_path / "TLG.npz"), *rescore[at + 1 :]]) == 0
    assert capsys.readouterr().out == want


def test_decode_rescore_lm_on_a_graph_without_words_is_refused_before_the_lms(tmp_path, capsys):
    """Rescoring scores words: a graph without a word table is refused naming it, before the
    LMs (here missing) and the log-probs are read."""
    import dataclasses

    g = dataclasses.replace(lexicon_graph(WORDS), words=None)
    g.save(tmp_path / "TLG.npz")
    missing = str(tmp_path / "missing.arpa")
    assert main(["decode", str(tmp_path / "TLG.npz"), str(tmp_path / "e.npz"), "--lattice-beam",
                 "6", "--rescore-lm", missing, "--first-pass-lm", missing]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "no word table" in err and "TLG.npz" in err and "missing" not in err
