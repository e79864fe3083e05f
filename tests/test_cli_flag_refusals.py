"""The CLI's search flags: a refused value is said of its flag, and a flag that would change
nothing in the combination given is refused rather than ignored."""

from __future__ import annotations

import numpy as np
import pytest

from wfstdecode.cli import main
from wfstdecode.testing import random_graph, random_log_probs


@pytest.fixture
def graph_and_log_probs(tmp_path):
    g = random_graph(3, num_states=10)
    g.save(tmp_path / "TLG.npz")
    np.savez(tmp_path / "e.npz", log_probs=random_log_probs(3, 2, 8, g.num_tokens),
             lengths=np.array([8, 6]))  # fmt: skip
    return str(tmp_path / "TLG.npz"), str(tmp_path / "e.npz")


@pytest.mark.parametrize(
    "flags, said",
    [
        (["--max-active", "0"], "--max-active must be >= 1"),
        (["--min-active", "5", "--max-active", "3"], "--min-active (5) exceeds --max-active (3)"),
        (["--mbr-candidates", "3"], "--mbr-candidates ranks a lattice's word sequences"),
        (["--acoustic-scale", "0"], "--acoustic-scale must be in"),
        (["--word-insertion-penalty", "nan"], "--word-insertion-penalty must be in"),
        (["--beam", "0"], "--beam must be > 0"),
        (["--posteriors", "x"], "--posteriors must be"),
        (["--blank-skip-threshold", "1.5"], "--blank-skip-threshold must be a probability"),
    ],
)
def test_decode_names_the_flag_of_a_refused_search_option(graph_and_log_probs, capsys, flags,
                                                          said):  # fmt: skip
    """decode --max-active 0 said 'CtcBeamOptions.max_active must be >= 1' (the dataclass
    field), where --frame-shift, --lm-scale and rescore's flags name themselves."""
    assert main(["decode", *graph_and_log_probs, *flags]) == 2
    err = capsys.readouterr().err
    assert said in err and "CtcBeamOptions" not in err and "Traceback" not in err, err


def test_posteriors_without_a_lattice_is_refused_not_ignored(graph_and_log_probs, tmp_path,
                                                             capsys):  # fmt: skip
    """--posteriors determinized without --lattice-beam decoded as without it (no lattice:
    no confidences, no MBR), saying nothing: decode, decode-corpus and transcribe refuse it as
    they refuse --frame-shift without --json."""
    graph, log_probs = graph_and_log_probs
    assert main(["decode", graph, log_probs, "--posteriors", "determinized"]) == 2
    assert "--posteriors determinized" in capsys.readouterr().err
    out = str(tmp_path / "o")
    assert main(["decode-corpus", log_probs, "--graph", graph, "--out", out, "--executor",
                 "local", "--quiet", "--posteriors", "determinized"]) == 2  # fmt: skip
    assert "--lattice-beam" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    assert main(["decode", graph, log_probs, "--posteriors", "determinized", "--lattice-beam",
                 "4", "--json"]) == 0  # fmt: skip
    assert '"confidence"' in capsys.readouterr().out


def test_transcribe_transducer_refuses_a_boost_file_even_an_empty_one(tmp_path, capsys):
    """transcribe --transducer --boost-file EMPTY was accepted and ignored (only the phrases
    read were checked, not the flag); the transducer's --nbest was checked as the graph
    search's ('CtcBeamOptions.nbest must be >= 1')."""
    (tmp_path / "empty.tsv").write_text("")
    audio = str(tmp_path / "none.wav")  # (refused before any audio is read)
    assert main(["transcribe", "--transducer", "tdt", "--boost-file", str(tmp_path / "empty.tsv"),
                 audio]) == 2  # fmt: skip
    assert "--boost" in capsys.readouterr().err
    assert main(["transcribe", "--transducer", "tdt", "--beam-size", "2", "--nbest", "0",
                 audio]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "--nbest must be >= 1" in err and "CtcBeamOptions" not in err
    assert main(["transcribe", "--posteriors", "determinized", audio]) == 2
    assert "--lattice-beam" in capsys.readouterr().err


@pytest.mark.parametrize(
    "flags, said",
    [
        (["--workers", "0"], "argument --workers: must be at least 1; got 0"),
        (["--threads-per-worker", "0"], "argument --threads-per-worker: must be at least 1"),
        (["--max-attempts", "x"], "argument --max-attempts: expected a whole number >= 1"),
        (["--shard-timeout", "nan"], "argument --shard-timeout: must be a positive number"),
    ],
)
def test_decode_corpus_names_the_flag_of_a_refused_run_option(graph_and_log_probs, tmp_path,
                                                              capsys, flags, said):  # fmt: skip
    """They were said by the library's names ('workers must be at least 1',
    'CtcBeamOptions.num_threads ...'), after the graph was loaded; now by argparse, naming the
    flag, before anything is read or written."""
    graph, emissions = graph_and_log_probs
    with pytest.raises(SystemExit) as exit_:
        main(["decode-corpus", emissions, "--graph", graph, "--out", str(tmp_path / "out"),
              "--executor", "local", *flags])  # fmt: skip
    assert exit_.value.code == 2 and said in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_decode_skips_blank_frames_and_refuses_to_write_their_lattices(
    graph_and_log_probs, tmp_path, capsys
):
    """--blank-skip-threshold decodes with the input's frame numbers (the JSON's times);
    written lattices would count the frames searched, so --write-lattices refuses it."""
    graph, log_probs = graph_and_log_probs
    assert main(["decode", graph, log_probs, "--blank-skip-threshold", "0.5", "--json"]) == 0
    assert '"words"' in capsys.readouterr().out
    ark = tmp_path / "lat.ark"
    assert main(["decode", graph, log_probs, "--blank-skip-threshold", "0.5", "--lattice-beam",
                 "4", "--write-lattices", str(ark)]) == 2  # fmt: skip
    assert "--write-lattices writes lattices over the frames searched" in capsys.readouterr().err
    assert not ark.exists()
