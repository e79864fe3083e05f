"""The build-tlg / info commands, and bad input: clear errors naming file and line, and no
half-written output directory."""

import json

import numpy as np
import pytest

from wfstdecode import DecodingGraph, InputFileError, SymbolTable
from wfstdecode.cli import main
from wfstdecode.graph import read_lexicon
from wfstdecode.graph.lexicon import add_disambig_symbols
from wfstdecode.testing.ctc import lexicon_graph, simulate_ctc
from wfstdecode.testing.data import PACKAGE_DATA
from wfstdecode.testing.lm import random_arpa

TOKENS = PACKAGE_DATA / "tokens.txt"


@pytest.fixture
def small_inputs(tmp_path):
    lexicon = tmp_path / "lexicon.txt"
    lexicon.write_text("cat c a t\ncar c a r\nca c a\nkat c a t\n")
    arpa = tmp_path / "lm.arpa"
    arpa.write_text(random_arpa(["cat", "car", "ca", "kat", "dog"], order=3, seed=5))
    return lexicon, arpa


def test_build_tlg_writes_a_complete_directory(tmp_path, small_inputs, capsys):
    lexicon, arpa = small_inputs
    out = tmp_path / "graph"
    args = [
        "build-tlg",
        "--tokens",
        str(TOKENS),
        "--lexicon",
        str(lexicon),
        "--arpa",
        str(arpa),
        "--topology",
        "compact",
        "--separator",
        "|",
        "--out",
        str(out),
    ]
    assert main(args) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["TLG.fst", "TLG.npz", "tokens.txt", "words.txt", "build.json"]
    )
    report = json.loads((out / "build.json").read_text())
    assert [s["stage"] for s in report["stages"]] == [
        "G",
        "L",
        "LG",
        "min(det(LG))",
        "T (compact)",
        "TLG",
    ]
    assert report["stages"][0]["dropped_words"] == 1  # "dog" is not in the lexicon
    graph = DecodingGraph.load(out)
    assert graph.summary() == report["graph"]
    assert SymbolTable.read(out / "words.txt").symbols() == [
        "<eps>",
        "ca",
        "car",
        "cat",
        "kat",
        "#0",
        "<s>",
        "</s>",
    ]
    assert DecodingGraph.from_openfst(out / "TLG.fst").num_arcs == graph.num_arcs
    printed = capsys.readouterr().out
    assert "min(det(LG))" in printed and "wrote" in printed
    assert main(args) == 2  # exists: refuses without --force
    assert "--force" in capsys.readouterr().err
    assert main([*args, "--force"]) == 0
    assert main(["info", str(out)]) == 0
    printed = capsys.readouterr().out
    assert '"topology": "compact"' in printed and '"per_utterance_mb"' in printed


def test_chars_and_spm_lexicons_from_the_arpa(tmp_path, small_inputs):
    _, arpa = small_inputs
    assert (
        main(
            [
                "build-tlg",
                "--tokens",
                str(TOKENS),
                "--chars",
                "--separator",
                "|",
                "--arpa",
                str(arpa),
                "--out",
                str(tmp_path / "chars"),
            ]
        )
        == 0
    )
    words = SymbolTable.read(tmp_path / "chars" / "words.txt")
    assert "dog" in words and "kat" in words


def test_chars_from_a_piped_arpa_is_refused_saying_why(tmp_path, small_inputs, capsys):
    """--chars and --spm read the ARPA twice (its words, then the model). From a pipe
    (``--arpa <(zcat lm.gz)``, ``--arpa /dev/stdin``) the second read got nothing and the build
    said "the file is empty" of a file that was not; a named FIFO hung on the second open. The
    pipe is refused up front, saying why."""
    import os
    import threading

    _, arpa = small_inputs
    r, w = os.pipe()
    writer = threading.Thread(target=lambda: (os.write(w, arpa.read_bytes()), os.close(w)))
    writer.start()
    try:
        code = main(["build-tlg", "--tokens", str(TOKENS), "--chars", "--separator", "|",
                     "--arpa", f"/dev/fd/{r}", "--out", str(tmp_path / "graph")])  # fmt: skip
    finally:
        os.close(r)
        writer.join()
    err = capsys.readouterr().err
    assert code != 0 and "not a regular file" in err and "empty" not in err, err
    assert not (tmp_path / "graph").exists()


def test_interrupted_build_leaves_no_output(tmp_path, small_inputs, monkeypatch, capsys):
    lexicon, arpa = small_inputs
    out = tmp_path / "graph"

    def interrupt(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("wfstdecode.graph.output.write_openfst", interrupt)
    code = main(
        [
            "build-tlg",
            "--tokens",
            str(TOKENS),
            "--lexicon",
            str(lexicon),
            "--arpa",
            str(arpa),
            "--out",
            str(out),
        ]
    )
    assert code == 130
    assert "interrupted; no output file was left half-written" in capsys.readouterr().err
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".graph")]


def test_failed_replacement_keeps_the_old_directory(tmp_path, small_inputs, monkeypatch):
    lexicon, arpa = small_inputs
    out = tmp_path / "graph"
    args = [
        "build-tlg",
        "--tokens",
        str(TOKENS),
        "--lexicon",
        str(lexicon),
        "--arpa",
        str(arpa),
        "--out",
        str(out),
        "--force",
    ]
    assert main(args) == 0
    before = (out / "TLG.npz").read_bytes()

    def fail(*_args, **_kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("wfstdecode.graph.output.write_openfst", fail)
    assert main(args) == 2
    assert (out / "TLG.npz").read_bytes() == before


@pytest.mark.parametrize(
    "content,line,message",
    [
        ("cat c a t\ndog d o g X\n", 2, "tokens \\['X'\\] of word 'dog'"),
        ("cat c a t\nlonely\n", 2, "has no tokens"),
        ("cat c a t\n#1 c a\n", 2, "reserved"),
        ("cat c a t\n<s> c a\n", 2, "reserved"),
        ("cat c a t\n</s> c a\n", 2, "reserved"),
        ("<eps> c\n", 1, "reserved"),
        ("", None, "lexicon is empty"),
        ("\n\n", None, "lexicon is empty"),
    ],
)
def test_bad_lexicon(tmp_path, content, line, message):
    path = tmp_path / "lexicon.txt"
    path.write_text(content)
    with pytest.raises(InputFileError, match=message) as info:
        read_lexicon(path, SymbolTable.read(TOKENS))
    assert info.value.line_no == line and str(path) in str(info.value)


def test_lexicon_probabilities(tmp_path):
    path = tmp_path / "lexiconp.txt"
    path.write_text("cat 1.0 c a t\ncat 0.5 k a t\n")
    entries = read_lexicon(path, SymbolTable.read(TOKENS), with_probs=True)
    assert [e.prob for e in entries] == [1.0, 0.5]
    path.write_text("cat 1.0 c a t\ncat 1.5 k a t\n")
    with pytest.raises(InputFileError, match=r"lexiconp.txt:2: pronunciation probability"):
        read_lexicon(path, SymbolTable.read(TOKENS), with_probs=True)
    for bad in ("cat 0 c a t\n", "cat -0.5 c a t\n", "cat nan c a t\n", "cat\n"):
        path.write_text(bad)
        with pytest.raises(InputFileError, match=r"lexiconp.txt:1: pronunciation probability"):
            read_lexicon(path, SymbolTable.read(TOKENS), with_probs=True)
    path.write_text("cat 1.0 c a t\n")  # read without the flag: the number is named as such
    with pytest.raises(InputFileError, match=r"\['1.0'\] .* \(a pronunciation probability\? "
                       r"read it with --lexicon-probs"):  # fmt: skip
        read_lexicon(path, SymbolTable.read(TOKENS))


def test_lexicon_probabilities_are_numbers_as_kaldi_reads_them(tmp_path):
    """A probability with an underscore is no number to Kaldi (nor to the ARPA and boost
    readers, `strict_float`); float() read '1_0e-1' as 1.0 and '0.5_0' as 0.5."""
    path = tmp_path / "lexiconp.txt"
    for bad in ("cat 1_0e-1 c a t\n", "cat 0.5_0 c a t\n"):
        path.write_text(bad)
        with pytest.raises(InputFileError, match=r"lexiconp.txt:1: pronunciation probability"):
            read_lexicon(path, SymbolTable.read(TOKENS), with_probs=True)


def test_a_repeated_lexicon_line_is_read_once(tmp_path):
    """A copy of a line (as stress-stripped CMUdict variants give) would only add a parallel
    path to L: read once, the same as without it; another pronunciation is kept."""
    path = tmp_path / "lexicon.txt"
    path.write_text("cat c a t\ncat c a t\ncat k a t\n")
    entries = read_lexicon(path, SymbolTable.read(TOKENS))
    assert [(e.word, e.tokens, e.line_no) for e in entries] == [
        ("cat", ("c", "a", "t"), 1), ("cat", ("k", "a", "t"), 3)]  # fmt: skip


@pytest.mark.parametrize(
    "content,line,message",
    [
        ("<blk> 0\na 1\na 2\n", 3, "duplicate symbol 'a'"),
        ("<blk> 0\na 1\nb 1\n", 3, "duplicate id 1"),
        ("<blk> 0\na\n", 2, "expected 'symbol id'"),
        ("<blk> 0\na x\n", 2, "expected 'symbol id'"),
        ("<blk> 0\na 1 2\n", 2, "expected 'symbol id'"),  # (a file of another format)
        # (Kaldi takes "a\u00a0b" as one symbol; wfstdecode splits words at any whitespace)
        ("<blk> 0\na\u00a0b 1\n", 2, "it holds U\\+00A0 NO-BREAK SPACE, whitespace to wfst"),
        ("", None, "empty"),
    ],
)
def test_bad_symbol_tables(tmp_path, content, line, message):
    path = tmp_path / "tokens.txt"
    path.write_text(content)
    with pytest.raises(InputFileError, match=message) as info:
        SymbolTable.read(path)
    assert info.value.line_no == line


def test_cli_reports_unreadable_files(tmp_path, small_inputs, capsys):
    lexicon, arpa = small_inputs
    base = [
        "build-tlg",
        "--tokens",
        str(TOKENS),
        "--lexicon",
        str(lexicon),
        "--arpa",
        str(arpa),
        "--out",
        str(tmp_path / "o"),
    ]
    for flag, missing in (
        ("--tokens", "nope.txt"),
        ("--lexicon", "nolex.txt"),
        ("--arpa", "no.arpa"),
    ):
        args = list(base)
        args[args.index(flag) + 1] = str(tmp_path / missing)
        assert main(args) == 2
        assert missing in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_symbols_looked_up_in_bulk():
    from wfstdecode.errors import SymbolError

    table = SymbolTable.from_list(["<eps>", "a", "b"])
    assert table.symbols_of([2, 1, 2, 0]) == ["b", "a", "b", "<eps>"]
    assert table.symbols_of([]) == []
    with pytest.raises(SymbolError, match="id 7 is not in the table"):
        table.symbols_of([1, 7])


@pytest.mark.parametrize("symbol", ["a\x00", "\x00b", "c\udc80", 7])
def test_symbols_that_would_not_come_back_from_a_file_are_refused(symbol):
    """A NUL (NumPy's strings drop a trailing one), a lone surrogate (no UTF-8) or a
    non-string would be saved as another symbol, or not load again."""
    from wfstdecode.errors import SymbolError

    with pytest.raises(SymbolError, match="NUL or a lone surrogate|not a str"):
        SymbolTable().add(symbol)


def test_disambiguation_symbols_follow_kaldi():
    prons = [("a",), ("a", "b"), ("a", "b"), ("c",), ("a",)]
    out, count = add_disambig_symbols(prons)
    assert out == [("a", "#1"), ("a", "b", "#1"), ("a", "b", "#2"), ("c",), ("a", "#2")]
    assert count == 3


def test_disambiguation_marks_every_proper_prefix_as_kaldi_does():
    """Against the definition (every prefix of every pronunciation, Kaldi's add_lex_disambig),
    which the code no longer builds: it was quadratic in a pronunciation's length."""
    import random

    rng = random.Random(0)
    for _ in range(500):
        prons = [tuple(rng.choice("ab") for _ in range(rng.randint(1, 4)))
                 for _ in range(rng.randint(1, 10))]  # fmt: skip
        prefixes = {p[:i] for p in prons for i in range(1, len(p))}
        out, _ = add_disambig_symbols(prons)
        for p, q in zip(prons, out, strict=True):
            assert (q != p) == (prons.count(p) > 1 or p in prefixes), (prons, p)


def test_decode_command_prints_transcripts_and_wer(tmp_path, capsys):
    out = tmp_path / "g"
    build = [
        "build-tlg",
        "--tokens",
        str(TOKENS),
        "--lexicon",
        str(PACKAGE_DATA / "lexicon.txt"),
        "--separator",
        "|",
        "--arpa",
        str(PACKAGE_DATA / "lm.arpa.gz"),
        "--out",
        str(out),
    ]
    assert main(build) == 0
    capsys.readouterr()
    emissions = str(PACKAGE_DATA / "ocr_emissions.npz")
    assert main(["decode", str(out), emissions, "--acoustic-scale", "2", "--backend", "cpu"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    assert len(lines) == 60 and lines[0].startswith("utt0000\t")
    wer = float(captured.err.split("WER ")[1].split("%")[0])
    greedy = float(captured.err.split("greedy CTC ")[1].split("%")[0])
    assert wer < greedy  # the lexicon and LM fix OCR errors
    with pytest.warns(UserWarning, match="notaword"):
        main(["decode", str(out), emissions, "--boost", "notaword=2.0", "--backend", "cpu"])


def test_decode_command_json_and_ctm(tmp_path, capsys):
    """--json carries each word's frames and seconds; --ctm writes the same times as NIST CTM
    (start, duration); --ctm without --frame-shift, and --frame-shift with neither, are
    refused before anything is decoded."""
    out = tmp_path / "g"
    assert main(["build-tlg", "--tokens", str(TOKENS), "--lexicon",
                 str(PACKAGE_DATA / "lexicon.txt"), "--separator", "|", "--arpa",
                 str(PACKAGE_DATA / "lm.arpa.gz"), "--out", str(out)]) == 0  # fmt: skip
    capsys.readouterr()
    emissions = str(PACKAGE_DATA / "ocr_emissions.npz")
    common = ["decode", str(out), emissions, "--acoustic-scale", "2", "--backend", "cpu",
              "--frame-shift", "0.04"]  # fmt: skip
    assert main([*common, "--json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(records) == 60 and records[0]["id"] == "utt0000"
    assert main([*common, "--ctm"]) == 0
    ctm = [line.split() for line in capsys.readouterr().out.splitlines()]
    expected = [(r["id"], w) for r in records for w in r["words"]]
    assert len(ctm) == len(expected)
    for (utt, channel, start, duration, word), (rid, w) in zip(ctm, expected, strict=True):
        assert (utt, channel, word) == (rid, "1", w["word"])
        assert float(start) == pytest.approx(w["start_frame"] * 0.04)
        assert float(duration) == pytest.approx((w["end_frame"] + 1 - w["start_frame"]) * 0.04)
    assert main(["decode", str(out), emissions, "--ctm"]) == 2
    assert "--frame-shift" in capsys.readouterr().err
    assert main(common) == 2  # seconds that nothing would print: refused, not ignored
    err = capsys.readouterr().err
    assert "--frame-shift" in err and "--json" in err


def test_symbol_ids_are_integers():
    """A float or bool id was taken, written as "1.5" / "True", and the file did not read back."""
    import numpy as np

    from wfstdecode.errors import SymbolError

    table = SymbolTable()
    for idx in (1.5, True, "2"):
        with pytest.raises(SymbolError, match="ids are integers"):
            table.add("a", idx)
    assert table.add("a", np.int64(3)) == 3 and type(table.id("a")) is int


def test_ids_out_of_order_keep_the_next_id_beyond_all(tmp_path):
    """``next_id`` (the first disambiguation symbol's label in L) is above every id read, in
    whatever order: else #0 took a token's label."""
    path = tmp_path / "tokens.txt"
    path.write_text("<blk> 0\nb 2\na 1\n")
    table = SymbolTable.read(path)
    assert table.next_id == 3 and table.add("c") == 3


def test_only_hash_and_digits_are_disambiguation_symbols(tmp_path):
    from wfstdecode.symbols import is_disambig

    assert is_disambig("#12") and is_disambig("#0")
    assert not any(is_disambig(s) for s in ("#", "#foo", "#1a", "a#1", "#１"))
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("<blk> 0\nh 1\na 2\n")
    lexicon = tmp_path / "lexicon.txt"
    lexicon.write_text("#hashtag h a\n")  # a word, not a disambiguation symbol
    assert [e.word for e in read_lexicon(lexicon, SymbolTable.read(tokens))] == ["#hashtag"]


@pytest.fixture
def small_decode(tmp_path):
    graph = lexicon_graph(["ab", "ba", "a"])
    gdir = tmp_path / "g"
    gdir.mkdir()
    graph.save(gdir / "TLG.npz")
    tok = graph.tokens
    seqs = [[tok.id("a"), tok.id("b"), tok.id("b"), tok.id("a")], [tok.id("a")]]
    lp, lengths = simulate_ctc(seqs, graph.num_tokens, seed=1)
    return tmp_path, gdir, lp, lengths


def _npz(path, lp, lengths, ids):
    np.savez(path, log_probs=lp, lengths=lengths, ids=np.array(ids))
    return path


def test_json_lines_stay_one_line_for_any_line_splitter(small_decode, capsys):
    """Plain output escapes U+2028/U+0085 in ids 'so every hypothesis is one line'; --json
    writes them raw (ensure_ascii=False), so str.splitlines() (and editors, many JSONL tools)
    split one record into two invalid halves."""
    tmp, gdir, lp, lengths = small_decode
    f = _npz(tmp / "e.npz", lp, lengths, ["x\u2028y", "p\x85q"])
    assert main(["decode", str(gdir), str(f), "--json"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert len(lines) == 2
    assert [json.loads(line)["id"] for line in lines] == ["x\u2028y", "p\x85q"]


def test_a_frame_shift_under_a_millisecond_is_refused(small_decode, capsys):
    """Times are written to the millisecond: at --frame-shift 0.0004 a one-frame word's CTM
    line said it lasted 0.000 s (start and end rounded apart). Refused with the range."""
    tmp, gdir, lp, lengths = small_decode
    f = _npz(tmp / "e.npz", lp, lengths, ["u1", "u2"])
    assert main(["decode", str(gdir), str(f), "--ctm", "--frame-shift", "0.0004"]) == 2
    assert "--frame-shift must be in [0.001, 10] seconds" in capsys.readouterr().err
    assert main(["decode", str(gdir), str(f), "--ctm", "--frame-shift", "0.001"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert rows and all(float(r[3]) > 0 for r in rows), rows


def _write_ark_and_scp(tmp, lp, lengths, keys):
    kio = pytest.importorskip("kaldi_native_io")
    spec = f"ark,scp:{tmp / 'e.ark'},{tmp / 'e.scp'}"
    with kio.FloatMatrixWriter(spec) as w:
        for b, key in enumerate(keys):
            w[key] = lp[b, : lengths[b]]
    return tmp / "e.ark", tmp / "e.scp"


def test_scp_reads_keys_as_the_ark_reader_and_kaldi_do(small_decode, capsys):
    """Kaldi keys end at ASCII whitespace; the .ark reader agrees, but .scp (and --text) split
    at any Unicode whitespace: the .scp Kaldi wrote for an archive that decodes fine is refused."""
    tmp, gdir, lp, lengths = small_decode
    ark, scp = _write_ark_and_scp(tmp, lp, lengths, ["k\u00a0one", "k2"])
    assert main(["decode", str(gdir), str(ark)]) == 0
    from_ark = capsys.readouterr().out
    assert main(["decode", str(gdir), str(scp)]) == 0
    assert capsys.readouterr().out == from_ark


def test_text_references_keyed_as_kaldi_keys(small_decode, capsys):
    """A Kaldi text file's id ends at ASCII whitespace, as an archive key does: an ideographic
    space is part of the id."""
    tmp, gdir, lp, lengths = small_decode
    f = _npz(tmp / "e.npz", lp, lengths, ["k\u3000one", "k2"])
    text = tmp / "text"
    text.write_text("k\u3000one ab ba\nk2 a\n", encoding="utf-8")
    assert main(["decode", str(gdir), str(f), "--text", str(text)]) == 0
    assert "WER" in capsys.readouterr().err


def test_the_recorded_command_can_be_run_again(tmp_path, small_inputs, monkeypatch):
    """build.json's command was the arguments joined by spaces: `--separator '|'` came out as
    `--separator |`, a pipe to a shell, and a path with a space as two. Quoted as a shell reads
    it."""
    import shlex
    import sys

    lexicon, arpa = small_inputs
    args = ["build-tlg", "--tokens", str(TOKENS), "--lexicon", str(lexicon), "--arpa", str(arpa),
            "--separator", "|", "--out", str(tmp_path / "my graph")]  # fmt: skip
    monkeypatch.setattr(sys, "argv", ["wfstdecode", *args])
    assert main(args) == 0
    report = json.loads((tmp_path / "my graph" / "build.json").read_text())
    assert shlex.split(report["command"]) == ["wfstdecode", *args]
