"""Files other tools write (kaldiio, kaldi_native_io, kaldifst), read as those tools read them;
files written here, read back by OpenFst as written."""

import numpy as np
import pytest

from wfstdecode.fstio import FstArrays, write_openfst
from wfstdecode.kaldi_matrices import read_kaldi_matrices


@pytest.mark.parametrize("method", [4, 6, 7])  # kaldiio's CM2 / CM3 methods
def test_an_empty_matrix_kaldiio_compressed_keeps_the_next_key(tmp_path, method):
    """kaldiio writes an empty compressed matrix as its 16-byte header and nothing more (Kaldi's
    reader reads it so); the 4 bytes skipped for Kaldi's own 20-byte empty "CM" ate the next
    key's first 4 bytes: 'spk1-utt3' was read as '-utt3', silently."""
    kaldiio = pytest.importorskip("kaldiio")
    kio = pytest.importorskip("kaldi_native_io")
    matrices = {"spk1-utt1": np.ones((2, 3), np.float32),
                "spk1-utt2": np.zeros((0, 0), np.float32),
                "spk1-utt3": np.full((4, 3), 7, np.float32)}  # fmt: skip
    ark = tmp_path / "m.ark"
    kaldiio.save_ark(str(ark), matrices, compression_method=method)
    want = {k: np.array(m, np.float32) for k, m in kio.SequentialFloatMatrixReader(f"ark:{ark}")}
    got = read_kaldi_matrices(ark)
    assert list(got) == list(want) == list(matrices)
    for key in want:
        assert np.array_equal(got[key], want[key]), key


def test_a_const_fst_written_here_is_no_mutable_fst_to_openfst(tmp_path):
    """The header of a ``const`` FST claimed kMutable (0x2): pywrapfst then wraps it as a
    MutableFst, and mutating that ConstFst aborts the process (free(): invalid pointer)."""
    fst = pytest.importorskip("pywrapfst")
    arrays = FstArrays(start=1, final=np.array([0.5, np.inf, 0], np.float32), src=[1, 0, 1],
                       dst=[0, 2, 2], ilabel=[3, 0, 2], olabel=[1, 0, 2],
                       weight=[0.1, 0.2, 0.3])  # fmt: skip
    for fst_type in ("vector", "const"):
        write_openfst(arrays, tmp_path / f"{fst_type}.fst", fst_type)
        read = fst.Fst.read(str(tmp_path / f"{fst_type}.fst"))
        assert read.fst_type() == fst_type
        assert isinstance(read, fst.MutableFst) == (fst_type == "vector"), fst_type


@pytest.mark.parametrize("content", [
    b"a\t[ 1 2\n 3 4 ]\nb\t[ 5 6 ]\n",  # a tab after the key (Kaldi consumes it)
    b"a\n[ 1 2\n 3 4 ]\nb\n[ 5 6 ]\n",  # a newline after the key (Kaldi leaves it)
    b"a \n[ 1 2\n 3 4 ]\nb \r\n[ 5 6 ]\n",  # line breaks before '[' (Kaldi's `is >> str`)
    b"a [ 1 2 ; 3 4 ]\nb [ 5 6 ]\n",  # ';' ends a row as a line break does
])  # fmt: skip
def test_text_archives_kaldi_reads_are_read_as_kaldi_reads_them(tmp_path, content):
    """Kaldi's archive reader takes ' ', a tab or a newline after a key, skips any whitespace
    before a text matrix's '[' and ends a row at '\\n' or ';'; all were refused here ("expected
    'KEY ' and a matrix", "';' is not a number")."""
    kio = pytest.importorskip("kaldi_native_io")
    ark = tmp_path / "t.ark"
    ark.write_bytes(content)
    want = {k: np.array(m, np.float32) for k, m in kio.SequentialFloatMatrixReader(f"ark:{ark}")}
    assert {k: m.tolist() for k, m in want.items()} == {"a": [[1, 2], [3, 4]], "b": [[5, 6]]}
    got = read_kaldi_matrices(ark)
    assert list(got) == ["a", "b"]
    for key in want:
        assert np.array_equal(got[key], want[key]), key


def test_a_lattice_after_a_tab_is_read_as_kaldi_reads_it(tmp_path):
    kaldifst = pytest.importorskip("kaldifst")
    from wfstdecode.lattice_io import read_kaldi_archive

    lat = kaldifst.Lattice()
    s0, s1 = lat.add_state(), lat.add_state()
    lat.start = s0
    lat.add_arc(s0, kaldifst.LatticeArc(1, 5, kaldifst.LatticeWeight(1.0, 2.0), s1))
    lat.set_final(s1, kaldifst.LatticeWeight(0.0, 0.0))
    lat.write(str(tmp_path / "l.fst"))
    ark = tmp_path / "l.ark"
    ark.write_bytes(b"utt1\t\0B" + (tmp_path / "l.fst").read_bytes())
    assert read_kaldi_archive(ark)["utt1"].best_cost == pytest.approx(3.0)


def test_a_text_matrix_number_with_an_underscore_is_refused(tmp_path):
    """Python's float() reads ``1_0`` as 10; Kaldi refuses it, and so must this reader (it was
    read as 10, silently)."""
    from wfstdecode.errors import InputFileError

    ark = tmp_path / "t.ark"
    ark.write_bytes(b"a [ 1 2\n 1_0 4 ]\n")
    with pytest.raises(InputFileError, match=r"text matrix row 1: '1_0' is not a number"):
        read_kaldi_matrices(ark)
