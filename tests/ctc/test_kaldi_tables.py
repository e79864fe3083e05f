"""Kaldi matrix tables as decode input: every matrix kind Kaldi writes (binary float / double,
text, the three compressed formats; archives and scripts) reads exactly as Kaldi's own reader
(kaldi_native_io, a port of Kaldi's table code) reads it; ``decode`` gives on a table what it
gives on the same emissions in an ``.npz``; bad tables are named by file, entry and byte."""

import numpy as np
import pytest

from wfstdecode.cli import main
from wfstdecode.errors import InputFileError
from wfstdecode.kaldi_matrices import read_kaldi_matrices
from wfstdecode.kaldi_tables import is_kaldi_table, table_files
from wfstdecode.testing import random_graph, random_log_probs

kio = pytest.importorskip("kaldi_native_io", reason="the oracle: pip install kaldi_native_io")

COMPRESSIONS = ["kSpeechFeature", "kTwoByteAuto", "kOneByteAuto", "kAutomaticMethod",
                "kTwoByteSignedInteger", "kOneByteUnsignedInteger", "kOneByteZeroOne"]  # fmt: skip


def _random_matrices(seed, count=12):
    rng = np.random.default_rng(seed)
    out = {}
    for i in range(count):  # (1..3 rows: Kaldi's small-matrix paths; many: the percentiles')
        shape = (int(rng.choice([1, 2, 3, 7, 40])), int(rng.integers(1, 9)))
        scale, shift = rng.uniform(0.01, 60), rng.uniform(-40, 40)
        out[f"utt-{seed}-{i}"] = (rng.normal(size=shape) * scale + shift).astype(np.float32)
    return out


def _kaldi_reads(rspecifier, double=False):
    reader = kio.SequentialDoubleMatrixReader if double else kio.SequentialFloatMatrixReader
    return {key: np.array(m, np.float32) for key, m in reader(rspecifier)}  # (copies: reused)


def _same(got, want):
    assert list(got) == list(want)
    for key in want:
        assert got[key].dtype == np.float32 and got[key].shape == want[key].shape, key
        assert np.array_equal(got[key], want[key]), key


@pytest.mark.parametrize("seed", range(3))
def test_every_matrix_kind_reads_as_kaldi_reads_it(tmp_path, seed):
    matrices = _random_matrices(seed)
    ark, scp = tmp_path / "m.ark", tmp_path / "m.scp"
    for method in COMPRESSIONS:
        with kio.CompressedMatrixWriter(f"ark,scp:{ark},{scp}") as w:
            for key, m in matrices.items():
                w.write(key, m, getattr(kio.CompressionMethod, method))
        want = _kaldi_reads(f"ark:{ark}")
        for spec in (ark, f"ark:{ark}", scp, f"scp:{scp}", f"scp,s,cs:{scp}", f"b,ark:{ark}",
                     f"ns,t,scp:{scp}"):  # (options in any order, as Kaldi takes them) # fmt: skip
            _same(read_kaldi_matrices(spec), want)
    for writer, spec, double in ((kio.FloatMatrixWriter, "ark", False),
                                 (kio.FloatMatrixWriter, "ark,t", False),
                                 (kio.DoubleMatrixWriter, "ark", True)):  # fmt: skip
        with writer(f"{spec},scp:{ark},{scp}") as w:
            for key, m in matrices.items():
                w.write(key, m.astype(np.float64) if double else m)
        want = _kaldi_reads(f"scp:{scp}", double)
        if spec == "ark":  # binary: the values themselves
            _same(want, {key: m.astype(np.float32) for key, m in matrices.items()})
        _same(read_kaldi_matrices(ark), want)
        _same(read_kaldi_matrices(f"scp:{scp}"), want)


def test_an_empty_compressed_matrix_does_not_shift_the_next_key(tmp_path):
    """Kaldi writes an empty compressed matrix's whole 20-byte header but reads 16: its own
    reader then names the next entry '\\0\\0\\0\\0b'. Read here as written."""
    ark = tmp_path / "m.ark"
    with kio.CompressedMatrixWriter(f"ark:{ark}") as w:
        for key, m in (("a", np.ones((2, 3))), ("e", np.zeros((0, 0))), ("b", np.ones((4, 3)))):
            w.write(key, m.astype(np.float32), kio.CompressionMethod.kAutomaticMethod)
    got = read_kaldi_matrices(ark)
    assert {k: m.shape for k, m in got.items()} == {"a": (2, 3), "e": (0, 0), "b": (4, 3)}
    assert np.array_equal(got["b"], np.ones((4, 3), np.float32))


def test_a_script_may_name_whole_files_and_paths_from_the_current_folder(tmp_path, monkeypatch):
    one = np.arange(6, dtype=np.float32).reshape(2, 3)
    header = b"\0BFM \x04" + (2).to_bytes(4, "little") + b"\x04" + (3).to_bytes(4, "little")
    (tmp_path / "one.mat").write_bytes(header + one.tobytes())
    (tmp_path / "t.mat").write_bytes(b" [ 1 2 3\n 4 5 -inf ]\n")
    (tmp_path / "m.scp").write_text("x one.mat\ny t.mat:0\n\n")
    monkeypatch.chdir(tmp_path)
    got = read_kaldi_matrices("m.scp")
    assert np.array_equal(got["x"], one)
    assert np.array_equal(got["y"], np.array([[1, 2, 3], [4, 5, -np.inf]], np.float32))
    assert table_files("scp:m.scp") == ["m.scp", "one.mat", "t.mat"]


def test_names(tmp_path):
    assert is_kaldi_table("a.ark") and is_kaldi_table("x.SCP") and is_kaldi_table("ark,t:x")
    assert not is_kaldi_table("a.npz") and not is_kaldi_table("arkive.npz")
    assert table_files("e.npz") == ["e.npz"] and table_files("ark:e.ark") == ["e.ark"]


def _binary(key: str, rows: int, cols: int, data: bytes = b"") -> bytes:
    dims = b"\x04" + rows.to_bytes(4, "little", signed=True) + b"\x04" + cols.to_bytes(4, "little")
    return key.encode() + b" \0BFM " + dims + data


@pytest.mark.parametrize(
    "content, says",
    [
        (_binary("a", 2, 2, bytes(16)) + _binary("b", 1 << 30, 1 << 20),
         r"entry 'b' \(byte 35\): a matrix of 1073741824 x 1048576 needs .* the file holds 0"),
        (_binary("a", -1, 2), r"entry 'a' .*sizes must not be negative"),
        (b"a \0BFM \x04\x01", r"entry 'a' .*truncated or corrupt matrix header"),
        (b"a \0BFV \x04\x01\x00\x00\x00", r"entry 'a' .*holds a 'FV' object, not a matrix"),
        (b"a \0BCM2 \x00\x00", r"entry 'a' .*truncated compressed-matrix header"),
        (b"a [ 1 2\n 3 ]\n", r"entry 'a' .*text matrix row 1 has 1 values; row 0 has 2"),
        (b"a [ 1 x\n]\n", r"entry 'a' .*text matrix row 0: 'x' is not a number"),
        (b"a [ 1 2\n", r"entry 'a' .*no closing '\]'"),
        (b"a 1 2\n", r"entry 'a' .*expected a matrix"),
        (_binary("a", 1, 1, bytes(4)) * 2, r"byte 21: the key 'a' appears twice"),
        (b"\xff\xfe [ 1 ]", r"byte 0: the key .* is not UTF-8"),
        (b"lonely", r"byte 0: expected 'KEY ' and a matrix"),
    ],
)  # fmt: skip
def test_bad_archives_are_named_by_entry_and_byte(tmp_path, content, says):
    ark = tmp_path / "bad.ark"
    ark.write_bytes(content)
    with pytest.raises(InputFileError, match=rf"^{ark}: {says}"):
        read_kaldi_matrices(ark)


@pytest.mark.parametrize(
    "script, says",
    [
        ("a m.ark:0[0:1]", r"m.scp:1: 'm.ark:0\[0:1\]': row and column ranges are not read"),
        ("a gunzip -c m.ark.gz |", r"m.scp:1: .* is a pipe or standard input"),
        ("a", r"m.scp:1: expected 'KEY FILE\[:OFFSET\]'"),
        ("a m.ark:2\na m.ark:2", r"m.scp:2: the key 'a' appears twice"),
        ("a m.ark:999", r"m.scp:1: offset 999 is beyond the end of .*m.ark \(21 bytes\)"),
        ("a none.ark:0", r"m.scp:1: .*none.ark: cannot read"),
        ("a m.ark:\u00b2", r"m.scp:1: .*m.ark:\u00b2: cannot read"),  # (an offset: ASCII digits)
        ("a m.ark:\u0662", r"m.scp:1: .*m.ark:\u0662: cannot read"),
    ],
)  # fmt: skip
def test_bad_scripts_are_named_by_line(tmp_path, monkeypatch, script, says):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.ark").write_bytes(_binary("a", 1, 1, bytes(4)))
    (tmp_path / "m.scp").write_text(script + "\n")
    with pytest.raises(InputFileError, match=says):
        read_kaldi_matrices("m.scp")
    table_files("scp:m.scp")  # (what it cannot read is the read's to say)


@pytest.mark.parametrize("spec", ["ark:-", "ark:nnet3-compute ... |", "scp:"])
def test_pipes_are_refused(spec):
    with pytest.raises(InputFileError, match="Kaldi.s pipes .* are not read.*ark:/dev/stdin"):
        read_kaldi_matrices(spec)


@pytest.fixture
def tables(tmp_path):
    """A graph, its emissions as an .npz and as Kaldi tables (binary, text, by script)."""
    g = random_graph(5)
    g.save(tmp_path / "g.npz")
    lp = random_log_probs(5, 4, 9, g.num_tokens, peaky=3.0)
    lengths = np.array([9, 4, 0, 7])
    ids = ["a", "b", "silent", "d"]
    np.savez(tmp_path / "e.npz", log_probs=lp, lengths=lengths, ids=np.array(ids))
    for spec in (f"ark,scp:{tmp_path / 'e.ark'},{tmp_path / 'e.scp'}", f"ark,t:{tmp_path}/t.ark"):
        with kio.FloatMatrixWriter(spec) as w:
            for u, m, n in zip(ids, lp, lengths, strict=True):
                w.write(u, m[:n] if n else np.zeros((0, 0), np.float32))
    (tmp_path / "text").write_text("a w1 w2\nb w3\nsilent\nd w1\nunused w4\n")
    return tmp_path


def test_decode_reads_a_table_as_it_reads_the_same_npz(tables, capsys):
    decode = ["decode", str(tables / "g.npz"), "--backend", "cpu", "--nbest", "2"]
    assert main([*decode, str(tables / "e.npz"), "--text", str(tables / "text")]) == 0
    want = capsys.readouterr()
    assert "WER " in want.err and want.out.count("\n") >= 4
    for spec in (tables / "e.ark", f"scp:{tables / 'e.scp'}", f"ark,t:{tables / 't.ark'}"):
        assert main([*decode, str(spec), "--text", str(tables / "text")]) == 0
        got = capsys.readouterr()
        if "t.ark" not in str(spec):  # (text holds the values rounded to 7 digits)
            assert got.out == want.out, spec
        assert got.err == want.err, spec


def test_decode_names_what_a_table_lacks(tables, capsys):
    decode = ["decode", str(tables / "g.npz"), str(tables / "e.ark")]
    (tables / "short").write_text("a w1\nb w2\n")
    assert main([*decode, "--text", str(tables / "short")]) == 2
    assert "reference texts have no utterance 'silent' of " in capsys.readouterr().err
    with kio.FloatMatrixWriter(f"ark:{tables / 'w.ark'}") as w:
        w.write("a", np.zeros((2, 7), np.float32))
        w.write("b", np.zeros((3, 5), np.float32))
    assert main(["decode", str(tables / "g.npz"), str(tables / "w.ark")]) == 2
    assert "entry 'b' has 5 columns; entry 'a' has 7" in capsys.readouterr().err
    (tables / "none.ark").write_bytes(b"")
    assert main(["decode", str(tables / "g.npz"), str(tables / "none.ark")]) == 2
    assert "none.ark: holds no matrices" in capsys.readouterr().err


def test_lattices_never_overwrite_a_table_the_script_names(tables, capsys):
    before = (tables / "e.ark").read_bytes()
    argv = ["decode", str(tables / "g.npz"), f"scp:{tables / 'e.scp'}", "--lattice-beam", "4",
            "--write-lattices", str(tables / "e.ark")]  # fmt: skip
    assert main(argv) == 2
    assert "would overwrite the input" in capsys.readouterr().err
    assert (tables / "e.ark").read_bytes() == before


@pytest.mark.parametrize("after_key", [b"\r", b"\v", b"\f"])
def test_a_key_must_end_with_a_space_tab_or_newline(tmp_path, after_key):
    """Kaldi's archive reader takes ' ', a tab or a newline after a key, nothing else (mutant
    K1: any whitespace)."""
    ark = tmp_path / "a.ark"
    ark.write_bytes(b"a" + after_key + b"[ 1 2 ]\n")
    with pytest.raises(InputFileError, match=r"byte 0: expected 'KEY ' and a matrix"):
        read_kaldi_matrices(ark)


def test_a_corrupt_second_size_marker_is_refused(tmp_path):
    """Both sizes of a binary header carry a 4 (their byte count) (mutant K2: the second not
    checked)."""
    ark = tmp_path / "a.ark"
    data = bytearray(_binary("a", 1, 1, bytes(4)))
    assert data[7] == data[12] == 4  # (the byte counts before rows and before cols)
    data[12] = 8
    ark.write_bytes(bytes(data))
    with pytest.raises(InputFileError, match=r"entry 'a' .*truncated or corrupt matrix header"):
        read_kaldi_matrices(ark)


def test_a_script_offset_at_the_end_of_its_file_is_named_by_line(tmp_path, monkeypatch):
    """An offset equal to the file's size points past its last byte (mutant K9: ``>``)."""
    monkeypatch.chdir(tmp_path)
    data = _binary("a", 1, 1, bytes(4))
    (tmp_path / "m.ark").write_bytes(data)
    (tmp_path / "m.scp").write_text(f"a m.ark:{len(data)}\n")
    with pytest.raises(InputFileError, match=rf"m.scp:1: offset {len(data)} is beyond the end"):
        read_kaldi_matrices("m.scp")


def test_a_tab_before_a_text_matrix_is_skipped(tmp_path):
    """Whitespace between 'KEY ' and '[' may be tabs too (mutant K13: spaces only)."""
    ark = tmp_path / "a.ark"
    ark.write_bytes(b"a \t[ 1 2\n 3 4 ]\n")
    got = read_kaldi_matrices(ark)
    assert np.array_equal(got["a"], np.array([[1, 2], [3, 4]], np.float32))


def test_a_bad_frame_is_named_by_its_utterance_id(tables, capsys):
    """A NaN (or an all -inf frame) in a table's entry names the entry's key, not only its
    position in the padded batch: a table's entries are found by key (so are an .npz's, by its
    ids)."""
    g = tables / "g.npz"
    width = random_graph(5).num_tokens  # (the fixture's graph)
    lp = np.zeros((3, width), np.float32)
    lp[1, 2] = np.nan
    with kio.FloatMatrixWriter(f"ark:{tables / 'nan.ark'}") as w:
        w.write("first", np.zeros((2, width), np.float32))
        w.write("spk1-utt7", lp)
    assert main(["decode", str(g), str(tables / "nan.ark")]) == 2
    err = capsys.readouterr().err
    assert "nan.ark: utterance 'spk1-utt7': log_probs[1, 1] contains NaN" in err
    np.savez(tables / "nan.npz", log_probs=np.stack([lp, np.full_like(lp, -np.inf)]),
             ids=np.array(["a", "b"]), lengths=np.array([1, 3]))  # fmt: skip
    assert main(["decode", str(g), str(tables / "nan.npz")]) == 2
    assert "nan.npz: utterance 'b': log_probs[1, 0] is -inf in every column" in (
        capsys.readouterr().err)  # fmt: skip


def test_a_table_of_empty_matrices_with_columns_decodes_to_nothing(tables, capsys):
    """kaldiio keeps an empty matrix's width (0 x V): a table of only such utterances (silent
    files) was refused as having "no token columns", where the same utterances in an .npz of
    shape (B, 0, V) decode to nothing; a 0 x 0 matrix (Kaldi's empty one) says no width."""
    kaldiio = pytest.importorskip("kaldiio")
    g = random_graph(5)
    kaldiio.save_ark(str(tables / "silent.ark"), {"s1": np.zeros((0, g.num_tokens), np.float32),
                                                  "s2": np.zeros((0, 0), np.float32)})  # fmt: skip
    assert main(["decode", str(tables / "g.npz"), str(tables / "silent.ark")]) == 0
    lines = capsys.readouterr().out.splitlines()  # id, score, no words
    assert [line.split("\t")[0] for line in lines] == ["s1", "s2"]
    assert all(line.endswith("\t") for line in lines)
    kaldiio.save_ark(str(tables / "unsized.ark"), {"s2": np.zeros((0, 0), np.float32)})
    assert main(["decode", str(tables / "g.npz"), str(tables / "unsized.ark")]) == 2
    assert "no token columns" in capsys.readouterr().err
