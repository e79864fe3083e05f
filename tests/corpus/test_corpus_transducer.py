"""decode-corpus with a transducer: the shipped TDT on hama-shaped posteriors, greedy and ALSD
beam, equal to single-process `decode_transducer_npz` utterance for utterance."""

import json

import numpy as np
import pytest

from wfstdecode.cli import main
from wfstdecode.corpus import TransducerCorpusDecoder, decode_corpus
from wfstdecode.errors import WfstDecodeError
from wfstdecode.transducer import BeamOptions
from wfstdecode.transducer.files import decode_transducer_npz, load_transducer_model

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Three shards of peaky random 191-column posteriors (hama's width), one with ids."""
    root = tmp_path_factory.mktemp("tshards")
    rng = np.random.default_rng(0)
    for s, size in enumerate((3, 2, 4)):
        logits = rng.normal(size=(size, 40, 191)) * 3
        lp = (logits - np.log(np.exp(logits).sum(-1, keepdims=True))).astype(np.float32)
        arrays = {"log_probs": lp, "lengths": rng.integers(10, 41, size), "texts":
                  np.array(["a b"] * size)}  # fmt: skip
        if s == 1:
            arrays["ids"] = np.array([f"x{i}" for i in range(size)])
        np.savez(root / f"t{s}.npz", **arrays)
    return root


@pytest.mark.parametrize("beam", [None, BeamOptions("alsd", beam_size=2, nbest=2)])
def test_transducer_shards_equal_single_process(shards, tmp_path, beam):
    decoder = TransducerCorpusDecoder("tdt", beam)
    summary = decode_corpus(shards, tmp_path / "out", decoder, workers=2, executor="local",
                            progress="quiet")  # fmt: skip
    assert summary.ok and len(summary.decoded) == 3
    model = load_transducer_model("tdt")
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(decoder.num_threads)  # as the workers: float sums in the same order
    try:
        expected_of = {p: decode_transducer_npz(model, p, beam) for p in shards.glob("*.npz")}
    finally:
        torch.set_num_threads(threads)
    for path in sorted(shards.glob("*.npz")):
        expected = expected_of[path]
        lines = [json.loads(x) for x in (tmp_path / "out" / f"{path.stem}.jsonl").open()]
        assert len(lines) == len(expected.hypotheses)
        for i, (line, hyps) in enumerate(zip(lines, expected.hypotheses, strict=True)):
            best = hyps[0]
            assert line["id"] == (f"x{i}" if path.stem == "t1" else f"{path.stem}-{i}")
            assert line["tokens"] == list(best.tokens)
            assert line["timestamps"] == list(best.timestamps)
            assert line["durations"] == list(best.durations)
            assert line["score"] == pytest.approx(best.score, abs=1e-6)
            assert line["text"] == model.text(best.tokens)
            assert line["frames"] == expected.lengths[i]
            for word in line["words"]:  # spelled by the characters, timed by their frames
                assert word["start"] == round(word["start_frame"] * model.frame_seconds, 3)
            if beam is not None:  # every line has its list, however long
                assert [e["text"] for e in line["nbest"]] == [model.text(h.tokens) for h in hyps]
            else:
                assert "nbest" not in line
    assert summary.rtfx is not None


def test_transducer_cli_and_refusals(shards, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["decode-corpus", str(shards), "--transducer", "rnnt", "--out", str(out),
                 "--executor", "local", "--workers", "1", "--quiet"]) == 0  # fmt: skip
    assert "3 shards decoded" in capsys.readouterr().out
    for bad, message in ((["--beam", "9"], "do not apply"), (["--nbest", "2"], "need --beam-size"),
                         (["--graph", str(shards)], "not both")):  # fmt: skip
        code = main(["decode-corpus", str(shards), "--transducer", "rnnt", "--out",
                     str(tmp_path / "o2"), *bad])  # fmt: skip
        assert code == 2 and message in capsys.readouterr().err
    code = main(["decode-corpus", str(shards), "--graph", str(shards), "--out",
                 str(tmp_path / "o3"), "--segment-size", "2"])  # fmt: skip
    assert code == 2 and "--segment-size: the transducer beam search's" in capsys.readouterr().err
    with pytest.raises(WfstDecodeError, match="BeamOptions"):
        TransducerCorpusDecoder("tdt", beam="alsd")
    with pytest.raises(WfstDecodeError, match="'tokenwise' does not decode TDT models"):
        TransducerCorpusDecoder("tdt", beam=BeamOptions("tokenwise", beam_size=2))
    TransducerCorpusDecoder("tdt", beam=BeamOptions("maes", beam_size=2))  # TDT MAES: fine
