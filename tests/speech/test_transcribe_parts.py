"""The speech pipeline's parts without audio (or with the shipped clips): padding, batching
beyond one batch (each row as alone), the transducer's lengths honoured, what the API and the
CLI refuse or pass on, the speech transducer's configuration and input checks, the graph cache
location, the lexicon's G2P filtering, and the speech demo's WER."""

import contextlib
import io
import json
import types
from pathlib import Path

import numpy as np
import pytest

from wfstdecode import Hypothesis, SymbolTable
from wfstdecode.errors import DecodeInputError, InputFileError, OptionsError


# ----- phone model padding, batching ------------------------------------------------------------
def test_padding_is_certain_blanks():
    from wfstdecode.speech.phone_model import pad_log_probs

    rows = [np.log(np.full((3, 4), 0.25, np.float32)), np.log(np.full((5, 4), 0.25, np.float32))]
    out, lengths = pad_log_probs(rows, 4)
    assert out.shape == (2, 5, 4) and lengths.tolist() == [3, 5]
    np.testing.assert_array_equal(out[0, :3], rows[0])
    assert (out[0, 3:, 0] == 0.0).all() and (out[0, 3:, 1:] <= -1e29).all()
    np.testing.assert_allclose(np.logaddexp.reduce(out, axis=2), 0.0, atol=1e-6)


def _random_rows(n: int, vocab: int, seed: int = 0) -> list[np.ndarray]:
    from wfstdecode.testing.ctc import random_log_probs

    rng = np.random.default_rng(seed)
    return [random_log_probs(seed + i, 1, int(rng.integers(4, 12)), vocab)[0] for i in range(n)]


def _key(h: Hypothesis):
    return (h.words, h.tokens, round(h.score, 3))


def test_decode_log_probs_over_more_than_one_batch_equals_each_alone():
    """More rows than `BATCH`: every row decoded, in order, as it decodes alone."""
    from wfstdecode.speech.transcribe import BATCH, decode_log_probs
    from wfstdecode.testing.ctc import random_graph

    graph = random_graph(3)
    rows = _random_rows(BATCH + 3, graph.num_tokens)
    together = decode_log_probs(rows, graph, backend="reference")
    assert len(together) == len(rows)
    alone = [decode_log_probs([r], graph, backend="reference")[0] for r in rows]
    assert [[_key(h) for h in hs] for hs in together] == [[_key(h) for h in hs] for hs in alone]


def test_decode_log_probs_defaults_to_the_speech_options():
    from wfstdecode.speech.transcribe import SPEECH_OPTIONS, decode_log_probs
    from wfstdecode.testing.ctc import random_graph

    graph = random_graph(4)
    rows = _random_rows(3, graph.num_tokens, seed=7)
    default = decode_log_probs(rows, graph, backend="reference")
    given = decode_log_probs(rows, graph, SPEECH_OPTIONS, backend="reference")
    assert [_key(h[0]) for h in default] == [_key(h[0]) for h in given]


class FakePhoneModel:
    """`HamaPhoneModel`'s interface over fixed log-prob rows, one per path name."""

    def __init__(self, rows: dict, vocab: int):
        self.rows = rows
        self.tokens = SymbolTable.from_list(["<blk>", *(f"t{i}" for i in range(1, vocab))])
        self.frame_seconds = 0.02

    def log_probs_of_file(self, path):
        if self.rows[str(path)] is None:
            raise InputFileError(path, None, "unreadable")
        return self.rows[str(path)]


def test_iter_transcribe_yields_every_file_in_order_across_batches():
    from wfstdecode.speech.transcribe import BATCH, decode_log_probs, iter_transcribe
    from wfstdecode.testing.ctc import random_graph

    graph = random_graph(3)
    rows = _random_rows(BATCH + 2, graph.num_tokens, seed=3)
    paths = [f"u{i}.wav" for i in range(len(rows))]
    model = FakePhoneModel(dict(zip(paths, rows, strict=True)), graph.num_tokens)
    got = list(iter_transcribe(paths, graph, model=model, backend="reference"))
    assert [p for p, _ in got] == paths
    alone = [decode_log_probs([r], graph, backend="reference")[0] for r in rows]
    assert [_key(h[0]) for _, h in got] == [_key(h[0]) for h in alone]


@pytest.mark.parametrize("path", ["good.wav", Path("good.wav")])
def test_one_path_instead_of_a_list_is_named(path):
    """transcribe("good.wav") read the letters as files ("g: cannot read the audio file"), and
    a Path was "not iterable"."""
    from wfstdecode.speech.transcribe import transcribe
    from wfstdecode.testing.ctc import random_graph

    graph = random_graph(3)
    model = FakePhoneModel({}, graph.num_tokens)
    with pytest.raises(DecodeInputError, match="a list of audio files; got one path.*good.wav"):
        transcribe(path, graph, model=model, backend="reference")


@pytest.mark.parametrize("graph", ["mygraph/", Path("mygraph")])
@pytest.mark.parametrize("boosts", [None, {"hello": 2.0}])
def test_a_graph_directory_instead_of_a_graph_is_named(graph, boosts):
    """transcribe(paths, "mygraph/") ran the phone model on every file and then raised
    AttributeError: 'str' object has no attribute 'tokens' (with boosts: 'words'), where
    decode_ctc names the type."""
    from wfstdecode.speech.transcribe import transcribe

    model = FakePhoneModel({"a.wav": _random_rows(1, 5)[0]}, 5)
    with pytest.raises(DecodeInputError, match=r"graph must be a DecodingGraph.*got (str|\w*Path)"):
        transcribe(["a.wav"], graph, model=model, backend="reference", boosts=boosts)


def test_boosts_with_a_transducer_are_refused_by_the_api():
    """Not silently dropped (the CLI says so for --boost; the Python API must too)."""
    from wfstdecode.speech.transcribe import iter_transcribe

    for kind in ("rnnt", "tdt"):
        with pytest.raises(DecodeInputError, match="boosts and rescoring apply"):
            list(iter_transcribe(["a.wav"], kind=kind, boosts={"hello": 2.0}))


def test_the_phone_model_takes_exactly_640_samples():
    """The documented minimum ("at least 640 samples") is accepted; one fewer is refused."""
    pytest.importorskip("hama", reason="the speech tests need PyPI hama")
    from wfstdecode.speech.phone_model import HamaPhoneModel

    model = HamaPhoneModel()
    x = np.random.default_rng(0).uniform(-0.1, 0.1, 640).astype(np.float32)
    assert model.log_probs_of(x).shape[1] == 191
    with pytest.raises(DecodeInputError, match="audio of 639 samples is too short"):
        model.log_probs_of(x[:639])


@pytest.mark.parametrize("kind", ["rnnt", "tdt"])
def test_transducer_transcripts_do_not_depend_on_the_batch(kind):
    """Each file's lengths are honoured: a short utterance batched with a long one decodes as
    it does alone (the shipped encoders are bidirectional: padding would change them)."""
    pytest.importorskip("torch", reason="the transducer needs torch")
    from wfstdecode.speech.transcribe import transcribe_transducer
    from wfstdecode.testing.ctc import random_log_probs

    rows = {f"u{i}": random_log_probs(10 + i, 1, t, 191, peaky=4.0)[0]
            for i, t in enumerate((13, 61, 30))}  # fmt: skip
    model = FakePhoneModel(rows, 191)
    together = transcribe_transducer(list(rows), kind, model=model)
    alone = [transcribe_transducer([p], kind, model=model)[0] for p in rows]
    for t, a in zip(together, alone, strict=True):
        assert t[0].tokens == a[0].tokens and t[0].timestamps == a[0].timestamps
        assert t[0].score == pytest.approx(a[0].score, abs=1e-3)


def test_read_transcripts_refuses_a_line_without_an_id(tmp_path):
    from wfstdecode.speech.transcribe import read_transcripts

    (tmp_path / "t.tsv").write_text("a\tone two\n\tthree\n")
    with pytest.raises(InputFileError, match="t.tsv.*2.*expected 'ID<TAB>words'"):
        read_transcripts(tmp_path / "t.tsv")


def test_read_transcripts_refuses_an_id_given_twice(tmp_path):
    """Read into a dict, the second line of an id replaced the first without a word."""
    from wfstdecode.speech.transcribe import read_transcripts

    (tmp_path / "t.tsv").write_text("a\tone two\nb\tfour\na\tthree\n")
    with pytest.raises(InputFileError, match=r"t\.tsv:3: utterance 'a' is already on line 1"):
        read_transcripts(tmp_path / "t.tsv")


# ----- the speech transducer's weights ---------------------------------------------------------
@pytest.mark.parametrize("change,fault", [
    (dict(durations=[0, 1, 1]), r"durations \[0, 1, 1\] are not distinct"),
    (dict(dropout=1), "dropout 1 is not in"),
    (dict(enc_layers=0), "enc_layers 0 is not an int >= 1"),
    (dict(pred_dim=0), "pred_dim 0 is not an int >= 1"),
])  # fmt: skip
def test_a_bad_configuration_is_named(tmp_path, change, fault):
    pytest.importorskip("torch", reason="the transducer needs torch")
    from wfstdecode.models.speech_transducer import SpeechTransducer

    SpeechTransducer(enc_dim=16, pred_dim=8, joint_dim=12, enc_layers=1).save(tmp_path / "ok.npz")
    with np.load(tmp_path / "ok.npz") as z:
        members = dict(z)
    meta = json.loads(str(members.pop("__meta__")))
    meta["config"].update(change)
    np.savez(tmp_path / "bad.npz", __meta__=np.array(json.dumps(meta)), **members)
    with pytest.raises(InputFileError, match=f"bad.npz.*{fault}"):
        SpeechTransducer.load(tmp_path / "bad.npz")


# ----- graph cache location, lexicon --------------------------------------------------------------
def test_cache_root_follows_the_environment(monkeypatch, tmp_path):
    from wfstdecode.speech.graph import cache_root

    monkeypatch.setenv("WFSTDECODE_CACHE", str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "mine"
    monkeypatch.delenv("WFSTDECODE_CACHE")
    assert cache_root() == tmp_path / "xdg" / "wfstdecode"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_root() == Path.home() / ".cache" / "wfstdecode"


def test_a_g2p_pronunciation_with_one_non_phone_is_not_used():
    from wfstdecode.speech.lexicon import merge_pronunciations

    phones = {"t", "oʊ", "u", "k", "æ"}
    entries, stats = merge_pronunciations(
        ["to", "cat", "new"],
        {"to": ("t", "u"), "cat": ("k", "æ", "<unk>"), "new": ("n", "u")},
        {"to": [["T", "UW1"]]}, phones,
    )  # fmt: skip
    assert [(e.word, e.tokens) for e in entries] == [("to", ("t", "u"))]
    assert stats["g2p_unusable"] == 2 and stats["g2p_equals_cmudict"] == 1
    assert stats["in_cmudict"] == 1 and stats["without_pronunciation"] == ["cat", "new"]


def test_g2p_drops_the_blank_phones_it_sometimes_writes(monkeypatch):
    from wfstdecode.speech import lexicon

    def fake(word):
        return types.SimpleNamespace(
            alignments=[types.SimpleNamespace(phoneme=p) for p in ("k", " ", "æ", "", "t")]
        )

    monkeypatch.setattr(lexicon, "_g2p", fake)
    assert lexicon.g2p(["cat"]) == [("k", "æ", "t")]


# ----- the demo's figures -------------------------------------------------------------------------
def test_the_demo_word_error_rate_counts_reference_words(monkeypatch, capsys):
    """WER = errors / reference words, whatever the hypotheses' lengths."""
    from wfstdecode.speech import demo
    from wfstdecode.speech.transcribe import read_transcripts

    refs = read_transcripts(demo.CLIPS / "transcripts.tsv")

    class Model:
        frame_seconds = 0.02

        def log_probs_of_file(self, path):
            return np.zeros((10, 3), np.float32)

        def greedy_phones(self, row):
            return [["a"]]

    def decode(rows, graph, options, backend, model):  # every clip: its first word only
        return [[Hypothesis(tokens=(), timestamps=(), score=0.0, words=(r[0],))]
                for r in refs.values()]  # fmt: skip

    monkeypatch.setattr(demo, "HamaPhoneModel", Model)
    monkeypatch.setattr(demo, "load_speech_graph", lambda: None)
    monkeypatch.setattr(demo, "decode_log_probs", decode)
    out = demo.run_speech_demo()
    words = sum(len(r) for r in refs.values())
    assert out["words"] == words and out["errors"] == words - len(refs)
    assert out["wer"] == pytest.approx((words - len(refs)) / words)
    assert f"WER {100 * out['wer']:.1f}%" in capsys.readouterr().out


# ----- the CLI with the real phone model --------------------------------------------------------
def _cli(argv: list[str]) -> tuple[int, str]:
    from wfstdecode.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    return code, out.getvalue()


def _clip():
    from wfstdecode.speech.graph import CLIPS

    return sorted(CLIPS.glob("*.wav"))[1]


def test_transcribe_cli_transducer_times_are_40_ms_frames():
    pytest.importorskip("hama", reason="the speech tests need PyPI hama")
    from wfstdecode.models.speech_transducer import FRAME_SECONDS
    from wfstdecode.speech.transcribe import transcribe_transducer

    code, out = _cli(["transcribe", "--transducer", "rnnt", "--json", str(_clip())])
    assert code == 0
    record = json.loads(out)
    (hyp,) = transcribe_transducer([_clip()], "rnnt")[0]
    assert record["words"] == hyp.word_entries(FRAME_SECONDS) and record["words"]
    assert record["words"][-1]["end"] == pytest.approx((hyp.word_timestamps[-1][1] + 1) * 0.04)


def test_transcribe_cli_search_options_are_the_apis(tmp_path):
    """--nbest, --lattice-beam (and every search option) reach the search: the CLI's ranked
    lines are `transcribe`'s n-best with the same options over the speech defaults."""
    pytest.importorskip("hama", reason="the speech tests need PyPI hama")
    import dataclasses

    from wfstdecode import DecodingGraph
    from wfstdecode.speech.graph import speech_graph_dir
    from wfstdecode.speech.transcribe import SPEECH_OPTIONS, transcribe
    from wfstdecode.testing.speech import tiny_speech_data

    data = tmp_path / "data"  # a 5-word graph: builds in a second
    tiny_speech_data(data)
    graph_dir = speech_graph_dir(tmp_path / "cache", verbose=False, data=data)

    argv = ["transcribe", "--graph", str(graph_dir), "--nbest", "2", "--lattice-beam", "8",
            "--acoustic-scale", "0.9", "--backend", "reference", str(_clip())]  # fmt: skip
    code, out = _cli(argv)
    assert code == 0
    options = dataclasses.replace(SPEECH_OPTIONS, nbest=2, lattice_beam=8.0, acoustic_scale=0.9)
    (hyps,) = transcribe([_clip()], DecodingGraph.load(graph_dir), options, backend="reference")
    assert len(hyps) == 2  # (the lattice has alternatives)
    assert [line.split("\t") for line in out.splitlines()] == [
        [str(_clip()), str(k + 1), h.text] for k, h in enumerate(hyps)
    ]


def test_words_hama_cannot_pronounce_are_left_out_of_the_oov_lexicon(monkeypatch):
    """An empty G2P pronunciation is no pronunciation: the word stays unknown (and
    `decode_ctc` warns of it) rather than entering the slot as an empty token sequence."""
    from wfstdecode.speech import lexicon
    from wfstdecode.speech.transcribe import _pronounced

    monkeypatch.setattr(lexicon, "g2p", lambda words: [("k", "æ", "t") if w == "cat" else ()
                                                       for w in words])  # fmt: skip
    graph = types.SimpleNamespace(metadata={"oov_slot": {"spelling": "lexicon"}})
    assert _pronounced(["cat", "qqq"], graph) == {"cat": ("k", "æ", "t")}
    assert _pronounced(["cat"], types.SimpleNamespace(metadata={})) is None


def test_log_probs_of_another_width_are_named():
    """Not torch's shape error from the first layer: a `DecodeInputError` (a clean CLI line)."""
    torch = pytest.importorskip("torch", reason="the transducer needs torch")
    from wfstdecode.models.speech_transducer import SpeechTransducer

    model = SpeechTransducer(enc_dim=16, pred_dim=8, joint_dim=8).eval()
    with pytest.raises(DecodeInputError, match="V = 190 columns; the model reads 191"):
        model.encode(torch.zeros(1, 6, 190), torch.tensor([6]))


def test_no_rows_decode_to_no_results():
    """An empty batch is [] (it was a false token-count mismatch with a graph's token table)."""
    import dataclasses

    from wfstdecode.speech.transcribe import decode_log_probs
    from wfstdecode.testing.ctc import random_graph

    g = random_graph(0)
    names = ["<blk>", *(f"t{i}" for i in range(1, g.num_tokens))]
    g = dataclasses.replace(g, tokens=SymbolTable.from_list(names))
    assert g.tokens is not None and decode_log_probs([], g) == []


@pytest.mark.parametrize("backend", ["cuda", "reference", "cpu"])
def test_transcribe_transducer_refuses_a_backend_rather_than_ignore_it(backend, capsys):
    """--backend picks the graph search's backend; the transducer decodes with torch on the CPU
    whatever it says, so `transcribe --transducer` refuses it (as decode-corpus --transducer
    does) before any audio or model is read."""
    code, out = _cli(["transcribe", "--transducer", "rnnt", "--backend", backend, "x.wav"])
    assert code == 2 and not out
    assert "--backend" in capsys.readouterr().err


def test_transcribe_cli_rescores_lattices_with_a_larger_lm(tmp_path, capsys):
    """--rescore-lm (with --lattice-beam and, on a graph of one's own, --first-pass-lm): the
    lines are `transcribe`'s with the same `LmRescoring`; what rescoring cannot do is refused
    before the phone model loads."""
    pytest.importorskip("hama", reason="the speech tests need PyPI hama")
    import dataclasses

    from wfstdecode import DecodingGraph
    from wfstdecode.rescore import LmRescoring
    from wfstdecode.speech.graph import speech_graph_dir
    from wfstdecode.speech.transcribe import SPEECH_OPTIONS, transcribe
    from wfstdecode.testing.lm import random_arpa
    from wfstdecode.testing.speech import tiny_speech_data

    data = tmp_path / "data"
    tiny_speech_data(data)
    graph_dir = speech_graph_dir(tmp_path / "cache", verbose=False, data=data)
    new = tmp_path / "new.arpa"
    new.write_text(random_arpa(["he", "was", "not", "a", "man"], order=2, seed=3, density=1.0))
    common = ["transcribe", "--graph", str(graph_dir), "--nbest", "2", "--lattice-beam", "8",
              "--backend", "reference", "--json", str(_clip())]  # fmt: skip
    code, out = _cli([*common, "--rescore-lm", str(new), "--first-pass-lm",
                      str(data / "lm.arpa.gz")])  # fmt: skip
    assert code == 0
    options = dataclasses.replace(SPEECH_OPTIONS, nbest=2, lattice_beam=8.0)
    graph = DecodingGraph.load(graph_dir)
    rescoring = LmRescoring(str(new), str(data / "lm.arpa.gz"))
    (hyps,) = transcribe([_clip()], graph, options, backend="reference", rescore=rescoring)
    (plain,) = transcribe([_clip()], graph, options, backend="reference")
    records = [json.loads(line) for line in out.splitlines()]
    assert [(r["text"], r["score"]) for r in records] == [(h.text, round(h.score, 3)) for h in hyps]
    assert [h.score for h in hyps] != [h.score for h in plain]  # the new LM's scores
    for extra, says in ((["--rescore-lm", str(new)], "--first-pass-lm"),  # (a graph of one's own)
                        (["--lm-scale", "0.5"], "--rescore-lm")):  # fmt: skip
        capsys.readouterr()
        assert _cli([*common, *extra])[0] == 2 and says in capsys.readouterr().err
    assert _cli(["transcribe", "--transducer", "rnnt", "--rescore-lm", str(new), "x.wav"])[0] == 2


def test_transcribe_rescoring_takes_the_shipped_graphs_lm_as_its_first_pass(monkeypatch, tmp_path):
    """Without --graph the first pass is the shipped graph, built from `SHIPPED_LM`: that is
    what rescoring subtracts unless --first-pass-lm says otherwise."""
    import importlib

    from wfstdecode.speech import phone_model
    from wfstdecode.speech.graph import SHIPPED_LM
    from wfstdecode.testing.lm import random_arpa

    seen = {}
    monkeypatch.setattr(phone_model, "HamaPhoneModel", lambda: types.SimpleNamespace(
        frame_seconds=0.02))  # fmt: skip
    monkeypatch.setattr(importlib.import_module("wfstdecode.speech.transcribe"), "iter_transcribe",
                        lambda *a, **kw: seen.update(kw) or iter(()))  # fmt: skip
    new = tmp_path / "new.arpa"
    new.write_text(random_arpa(["he", "was"], order=2, seed=3, density=1.0))
    code, _ = _cli(["transcribe", "--lattice-beam", "8", "--rescore-lm", str(new), "x.wav"])
    assert code == 0
    assert Path(seen["rescore"].old_lm.path) == SHIPPED_LM
    assert Path(seen["rescore"].new_lm.path) == new


def test_rescoring_with_words_the_shipped_graph_lacks_is_refused(monkeypatch, tmp_path):
    """Boosted words the shipped graph lacks switch it to its oov-slot variant, which rescoring
    cannot score: said at once, naming the words, not after the phone model ran."""
    from wfstdecode.rescore import LmRescoring
    from wfstdecode.speech import graph as speech_graph
    from wfstdecode.speech.transcribe import iter_transcribe
    from wfstdecode.testing.lm import random_arpa

    g = types.SimpleNamespace(words=SymbolTable.from_list(["<eps>", "he", "was"]), metadata={})
    monkeypatch.setattr(speech_graph, "load_speech_graph", lambda **kw: g)
    monkeypatch.setattr("wfstdecode.ctc.search.output_words", lambda graph: {"he", "was"})
    lm = tmp_path / "lm.arpa"
    lm.write_text(random_arpa(["he", "was"], order=1, seed=0, density=1.0))
    found = iter_transcribe(["x.wav"], model=object(), boosts={"zyx he": 2.0},
                            rescore=LmRescoring(str(lm), str(lm)))  # fmt: skip
    with pytest.raises(DecodeInputError, match="zyx: boosted words the shipped graph lacks"):
        next(found)


@pytest.mark.parametrize("shipped", [True, False])
def test_a_first_pass_lm_that_is_not_the_graphs_is_refused_before_any_audio(
    monkeypatch, tmp_path, shipped
):
    """As decode: a first-pass LM lacking words of the graph (the shipped one too, where the
    CLI loads none) is refused once, naming the words, before any file is read — not by each
    lattice after its search."""
    from wfstdecode.graph import LexiconEntry, build_tlg
    from wfstdecode.rescore import LmRescoring
    from wfstdecode.speech import graph as speech_graph
    from wfstdecode.speech.transcribe import iter_transcribe
    from wfstdecode.testing.lm import random_arpa

    words = ["ab", "ba", "a"]
    arpa, wrong = tmp_path / "lm.arpa", tmp_path / "wrong.arpa"
    arpa.write_text(random_arpa(words, order=1, seed=0, density=1.0))
    wrong.write_text(random_arpa(words[:1], order=1, seed=0, density=1.0))
    tokens = SymbolTable.from_list(["<blk>", "a", "b", "|"])
    g = build_tlg(tokens, [LexiconEntry(w, tuple(w)) for w in words], str(arpa), "compact",
                  separator="|").graph  # fmt: skip
    monkeypatch.setattr(speech_graph, "load_speech_graph", lambda **kw: g)

    class NoAudio:
        def log_probs_of_file(self, path):
            raise AssertionError("audio was read")

    found = iter_transcribe(["x.wav"], None if shipped else g, model=NoAudio(),
                            rescore=LmRescoring(str(arpa), str(wrong)))  # fmt: skip
    name = "the shipped speech graph" if shipped else "the graph"
    with pytest.raises(OptionsError, match=f"2 of the words of {name} are not in it"):
        next(found)


def test_transcribe_rescore_lm_on_a_slot_graph_is_refused_before_the_lms_and_the_model(
    monkeypatch, tmp_path, capsys
):
    """As decode: a --graph with an oov slot (spelled words are no n-gram words) is refused at
    once, naming the graph, not by the search after the LMs were read and the phone model ran.
    The LMs here do not exist: what is said is the slot, not them."""
    pytest.importorskip("pynini")
    from wfstdecode.graph import build_tlg
    from wfstdecode.graph.lexicon import spell_lexicon
    from wfstdecode.speech import phone_model
    from wfstdecode.testing.lm import random_arpa

    tokens = SymbolTable.from_list(["<blk>", "|", "a", "b"])
    words = ["ab", "ba"]
    lexicon, _ = spell_lexicon(words, tokens, separator="|")
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(random_arpa(words, order=1, seed=0, unk=True))
    build = build_tlg(tokens, lexicon, arpa, "compact", separator="|",
                      oov_slot={"spelling": "chars"})  # fmt: skip
    build.graph.save(tmp_path / "TLG.npz")

    def loaded():
        raise AssertionError("the phone model was loaded")

    monkeypatch.setattr(phone_model, "HamaPhoneModel", loaded)
    missing = str(tmp_path / "missing.arpa")
    code, out = _cli(["transcribe", "--graph", str(tmp_path / "TLG.npz"), "--lattice-beam", "8",
                      "--rescore-lm", missing, "--first-pass-lm", missing, "x.wav"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and not out
    assert "oov slot" in err and "TLG.npz" in err and "missing" not in err


@pytest.mark.parametrize("key", ["zyx ab", ("zyx", "ab")])
def test_a_phrase_given_as_a_tuple_finds_its_unknown_words_as_a_string_does(monkeypatch, key):
    """decode_ctc takes a phrase as a tuple of words as well as a string: a word of either the
    shipped graph lacks takes transcribe to the graph with an oov slot (and refuses rescoring),
    not to a warning that the boost is ignored."""
    from wfstdecode.rescore import LmRescoring
    from wfstdecode.speech import graph as speech_graph
    from wfstdecode.speech.transcribe import iter_transcribe
    from wfstdecode.testing.ctc import lexicon_graph

    g = lexicon_graph(["ab", "ba"])
    calls = []
    monkeypatch.setattr(speech_graph, "load_speech_graph", lambda **kw: calls.append(kw) or g)

    class NoAudio:
        def log_probs_of_file(self, path):
            raise InputFileError(path, None, "no audio here")

    found = iter_transcribe(["x.wav"], model=NoAudio(), boosts={key: 2.0})
    with pytest.raises(InputFileError, match="no audio here"):
        next(found)
    assert calls == [{}, {"oov_slot": True}]
    rescore = LmRescoring.__new__(LmRescoring)  # (refused before it is used)
    with pytest.raises(DecodeInputError, match="zyx: boosted words the shipped graph lacks"):
        next(iter_transcribe(["x.wav"], model=NoAudio(), boosts={key: 2.0}, rescore=rescore))


def test_the_phone_model_refuses_audio_of_several_channels():
    """A stereo (N, 2) array (as soundfile reads one) was flattened into interleaved samples
    of twice the length, and decoded as such without a word; one channel in any shape
    ((N,), (1, N), (N, 1)) is mono."""
    pytest.importorskip("hama", reason="the speech tests need PyPI hama")
    from wfstdecode.speech.phone_model import HamaPhoneModel

    model = HamaPhoneModel()
    x = np.random.default_rng(0).uniform(-0.1, 0.1, 1600).astype(np.float32)
    mono = model.log_probs_of(x)
    for one in (x[None], x[:, None]):
        np.testing.assert_array_equal(model.log_probs_of(one), mono)
    for shape in ((1600, 2), (2, 1600)):
        with pytest.raises(DecodeInputError, match=r"mono samples \(N,\); got shape"):
            model.log_probs_of(np.zeros(shape, np.float32))
