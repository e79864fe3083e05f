import os

import numpy as np
import pytest

from wfstdecode import DecodeInputError, InputFileError
from wfstdecode.ctc import CtcBeamOptions, decode_npz, greedy_ctc_texts
from wfstdecode.testing import lexicon_graph, simulate_ctc


@pytest.fixture
def graph():
    return lexicon_graph(["ab", "ba", "abba"], tokens=["<blk>", "a", "b"])


def test_decode_npz_roundtrip(tmp_path, graph):
    seqs = [[1, 2], [1, 2, 2, 1]]
    lp, lengths = simulate_ctc(seqs, 3, seed=0)
    path = tmp_path / "e.npz"
    np.savez(path, log_probs=lp, lengths=lengths, texts=np.array(["ab", "ab ba"]),
             tokens=np.array(["<blk>", "a", "b"]), ids=np.array(["x", "y"]))  # fmt: skip
    res = decode_npz(path, graph, CtcBeamOptions(beam=10.0), boosts={"abba": 5.0}, backend="cpu")
    assert res.ids == ["x", "y"]
    assert res.texts == ["ab", "abba"]  # the boost picks "abba" over "ab ba"
    assert res.greedy_texts == ["ab", "abba"]
    assert res.wer == pytest.approx(2 / 3)


def test_decode_npz_bad_files(tmp_path, graph):
    bad = tmp_path / "bad.npz"
    np.savez(bad, logits=np.zeros((1, 2, 3)))
    with pytest.raises(InputFileError, match="no 'log_probs'"):
        decode_npz(bad, graph)
    wrong = tmp_path / "wrong.npz"
    np.savez(wrong, log_probs=np.zeros((1, 2, 3), np.float32) - 1.0,
             tokens=np.array(["<blk>", "b", "a"]))  # fmt: skip
    with pytest.raises(DecodeInputError, match="column 1"):
        decode_npz(wrong, graph)
    with pytest.raises(InputFileError, match="cannot read"):
        decode_npz(tmp_path / "missing.npz", graph)
    # an array named like one that is read: said (without lengths the padding is decoded)
    lens = tmp_path / "lens.npz"
    np.savez(lens, log_probs=np.zeros((1, 2, 3), np.float32) - 1.0, lens=np.array([1]),
             audio=np.zeros(4))  # fmt: skip
    said = "array 'lens' is not read .*did you mean 'lengths'"
    with pytest.warns(UserWarning, match=said) as rec:
        decode_npz(lens, graph)
    assert not any("audio" in str(w.message) for w in rec)


def test_greedy_ctc_texts(graph):
    lp = np.full((1, 5, 3), -9.0, np.float32)
    for t, k in enumerate([1, 1, 0, 1, 2]):
        lp[0, t, k] = 0.0
    assert greedy_ctc_texts(lp, [5], graph.tokens) == ["aab"]
    assert greedy_ctc_texts(lp, None, graph.tokens) == ["aab"]  # (all frames, as decode_ctc)
    assert greedy_ctc_texts(lp, [4], graph.tokens) == ["aa"]


def test_a_file_without_lengths_decodes_every_frame(tmp_path, graph):
    """No ``lengths``: every utterance is all T frames (a final token is not cut off)."""
    lp = np.full((1, 3, 3), -9.0, np.float32)
    lp[0, [0, 1, 2], [1, 0, 2]] = 0.0  # a, blank, b
    path = tmp_path / "e.npz"
    np.savez(path, log_probs=lp)
    res = decode_npz(path, graph, backend="cpu")
    assert list(res.lengths) == [3] and res.greedy_texts == ["ab"] and res.texts == ["ab"]


def test_a_graph_without_a_token_table_reports_no_greedy_wer(tmp_path, graph, capsys):
    """Without a token table there is no greedy transcript: its WER was reported as 100%
    (every reference word 'deleted' from the empty texts standing in for it)."""
    import dataclasses

    from wfstdecode.cli import main

    lp, lengths = simulate_ctc([[1, 2], [2, 1]], 3, seed=0)
    path = tmp_path / "e.npz"
    np.savez(path, log_probs=lp, lengths=lengths, texts=np.array(["ab", "ba"]))
    bare = dataclasses.replace(graph, tokens=None)
    res = decode_npz(path, bare, backend="cpu")
    assert res.texts == ["ab", "ba"] and res.wer == 0.0 and res.greedy_wer is None
    bare.save(tmp_path / "g.npz")
    assert main(["decode", str(tmp_path / "g.npz"), str(path), "--backend", "cpu"]) == 0
    err = capsys.readouterr().err
    assert "WER 0.00% (no greedy CTC: the graph has no token table)" in err, err


def test_a_phone_graph_reports_no_greedy_wer(tmp_path, capsys):
    """A phone model's greedy transcript is phones, not words: its 'WER' against word
    references was printed (419 % on the shipped speech graph)."""
    from wfstdecode import SymbolTable
    from wfstdecode.cli import main
    from wfstdecode.graph import LexiconEntry, build_tlg
    from wfstdecode.testing.lm import random_arpa

    tokens = SymbolTable.from_list(["<blk>", "AA", "B", "K"])
    words = ["bob", "back", "cab"]
    phones = {"bob": ("B", "AA", "B"), "back": ("B", "AA", "K"), "cab": ("K", "AA", "B")}
    (tmp_path / "lm.arpa").write_text(random_arpa(words, order=1, seed=0))
    lexicon = [LexiconEntry(w, phones[w]) for w in words]
    g = build_tlg(tokens, lexicon, str(tmp_path / "lm.arpa"), "compact").graph
    g.save(tmp_path / "g.npz")
    seqs = [[tokens.id(p) for w in ("bob", "cab") for p in phones[w]]]
    lp, lengths = simulate_ctc(seqs, g.num_tokens, seed=0)
    path = tmp_path / "e.npz"
    np.savez(path, log_probs=lp, lengths=lengths, texts=np.array(["bob cab"]))
    res = decode_npz(path, g, backend="cpu")
    assert res.texts == ["bob cab"] and res.greedy_texts == ["B AA B K AA B"]
    assert res.wer == 0.0 and res.greedy_wer is None
    assert main(["decode", str(tmp_path / "g.npz"), str(path), "--backend", "cpu"]) == 0
    err = capsys.readouterr().err
    assert "WER 0.00% (no greedy CTC WER: the tokens are not characters or word pieces)" in err


def test_probabilities_given_for_log_probs_are_warned_of(tmp_path, graph):
    """A softmax's output in place of log_probs decoded silently (the graph's costs then
    outweigh scores in [0, 1]: wrong words); it is warned of, and log-probs are not."""
    lp, lengths = simulate_ctc([[1, 2], [2, 1]], 3, seed=0)
    lp[1, lengths[1] :] = 5.0  # padding is not looked at
    good, probs = tmp_path / "good.npz", tmp_path / "probs.npz"
    np.savez(good, log_probs=lp, lengths=lengths)
    np.savez(probs, log_probs=np.exp(lp) / np.exp(lp).sum(-1, keepdims=True), lengths=lengths)
    with pytest.warns(UserWarning, match="log_probs holds probabilities"):
        decode_npz(probs, graph, backend="cpu")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        decode_npz(good, graph, backend="cpu")


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reopens a pipe by /dev/fd/N")
def test_an_npz_through_a_pipe_is_named_a_pipe_not_a_bad_archive(tmp_path, graph):
    """``decode G <(cat e.npz)`` (or ``... | decode G /dev/stdin``): zipfile cannot seek in a
    pipe, and the file was said to be "not an .npz archive (BadZipFile)" though it is one."""
    path = tmp_path / "e.npz"
    np.savez(path, log_probs=np.zeros((1, 2, 3), np.float32) - 1.0)
    read, write = os.pipe()
    try:
        os.write(write, path.read_bytes())
        os.close(write)
        with pytest.raises(InputFileError, match=r"not a regular file \(a pipe"):
            decode_npz(f"/dev/fd/{read}", graph)
    finally:
        os.close(read)
    assert decode_npz(path, graph).ids == ["utt0000"]  # (the same bytes, from the file)


def test_decode_npz_refuses_bytes_that_are_not_utf8(tmp_path, graph):
    """Bytes texts, ids and boosts are UTF-8 or refused, naming the entry (as the text files'
    reader refuses them): they were decoded with replacement, so a Latin-1 reference word
    became 'caf\\ufffd' (an error in the WER whatever was decoded) and ids silently changed."""
    lp, lengths = simulate_ctc([[1, 2], [2, 1]], 3, seed=0)
    path = tmp_path / "e.npz"
    np.savez(path, log_probs=lp, lengths=lengths, texts=np.array([b"ab", b"ba"]),
             ids=np.array([b"x", "y\u00e9".encode()]))  # fmt: skip
    res = decode_npz(path, graph, CtcBeamOptions(beam=10.0), backend="cpu")
    assert res.ids == ["x", "y\u00e9"] and res.references == ["ab", "ba"] and res.wer == 0.0
    for member, values, where in (
        ("texts", [b"ab", b"ba caf\xe9"], r"texts\[1\]: byte 0xe9 at 6 is not UTF-8"),
        ("ids", [b"x", b"y\xe9"], r"ids\[1\]: byte 0xe9 at 1 is not UTF-8"),
    ):
        np.savez(path, log_probs=lp, lengths=lengths, **{member: np.array(values)})
        with pytest.raises(InputFileError, match=where):
            decode_npz(path, graph, CtcBeamOptions(beam=10.0), backend="cpu")
    np.savez(path, log_probs=lp, lengths=lengths,
             boosts=np.array(['{"utt0000": {"caf\xe9": 2}}'.encode("latin-1")]))  # fmt: skip
    with pytest.raises(InputFileError, match="boosts: byte 0xe9 at 17 is not UTF-8"):
        decode_npz(path, graph, CtcBeamOptions(beam=10.0), backend="cpu")
