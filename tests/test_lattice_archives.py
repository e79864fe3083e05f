"""Kaldi archives of lattices written by others: kaldifst's (OpenFst's) Lattice leaves the
header's arc count 0 and may put an acoustic cost on a final weight; archives may hold
whitespace between entries. Keys are read exactly: one that is not UTF-8 or appears twice is
an error naming its byte, never a lattice silently replaced."""

import math

import pytest

from wfstdecode.errors import InputFileError, OptionsError
from wfstdecode.lattice_io import read_kaldi_archive, write_kaldi_archive

kaldifst = pytest.importorskip("kaldifst")


def _kaldi_lattice(tmp_path, final_acoustic: float = 0.0) -> bytes:
    lat = kaldifst.Lattice()
    s0, s1, s2 = lat.add_state(), lat.add_state(), lat.add_state()
    lat.start = s0
    lat.add_arc(s0, kaldifst.LatticeArc(1, 5, kaldifst.LatticeWeight(1.0, 2.0), s1))
    lat.add_arc(s1, kaldifst.LatticeArc(2, 0, kaldifst.LatticeWeight(0.5, 1.5), s2))
    lat.set_final(s2, kaldifst.LatticeWeight(0.25, final_acoustic))
    path = tmp_path / "k.fst"
    lat.write(str(path))
    return path.read_bytes()


@pytest.mark.parametrize("final_acoustic", [0.0, 3.0])
def test_a_lattice_kaldi_wrote_is_read_with_every_cost(tmp_path, final_acoustic):
    ark = tmp_path / "k.ark"
    ark.write_bytes(b"utt1 \0B" + _kaldi_lattice(tmp_path, final_acoustic))
    for scale in (1.0, 0.5):
        lat = read_kaldi_archive(ark, acoustic_scale=scale)["utt1"]
        # graph 1 + 0.5 + 0.25, acoustic 2 + 1.5 + the final weight's, scaled
        want = 1.75 + scale * (3.5 + final_acoustic)
        assert lat.best_cost == pytest.approx(want, rel=1e-6)
        (arcs, cost), *_ = lat.nbest(2)
        assert cost == pytest.approx(want, rel=1e-6) and lat.olabel[arcs].tolist()[0] == 5
    out = tmp_path / "again.ark"  # written back, it reads the same
    write_kaldi_archive(read_kaldi_archive(ark), out)
    assert read_kaldi_archive(out)["utt1"].best_cost == pytest.approx(5.25 + final_acoustic)


def test_whitespace_between_entries_and_at_the_end_is_skipped(tmp_path):
    one = _kaldi_lattice(tmp_path)
    ark = tmp_path / "ws.ark"
    ark.write_bytes(b"a \0B" + one + b"\nb \0B" + one + b"\n")
    assert sorted(read_kaldi_archive(ark)) == ["a", "b"]


@pytest.mark.parametrize("keys, says", [
    ((b"dup", b"dup"), "the key 'dup' appears twice"),
    ((b"u\xff", b"u\xfe"), r"the key b'u\\xff' is not UTF-8"),
])  # fmt: skip
def test_keys_are_read_exactly(tmp_path, keys, says):
    one = _kaldi_lattice(tmp_path)
    ark = tmp_path / "keys.ark"
    ark.write_bytes(b"".join(k + b" \0B" + one for k in keys))
    with pytest.raises(InputFileError, match=says):
        read_kaldi_archive(ark)


@pytest.mark.parametrize("content, says", [
    (b"u1 0 1 2 3 1.5,2.0,\n", r"byte 3: entry 'u1' is not binary .*text-mode entries are not"),
    (b"u1\n\0B", r"byte 2: entry 'u1' is not binary"),  # (a newline ends a key: text follows)
    (b"u1\r\0B", r"byte 0: expected 'KEY ' and a binary lattice"),
])  # fmt: skip
def test_an_entry_that_is_no_binary_lattice_is_named(tmp_path, content, says):
    ark = tmp_path / "text.ark"
    ark.write_bytes(content)
    with pytest.raises(InputFileError, match=says):
        read_kaldi_archive(ark)


def test_a_key_that_cannot_be_written_is_refused(tmp_path):
    ark = tmp_path / "k.ark"
    ark.write_bytes(b"utt1 \0B" + _kaldi_lattice(tmp_path))
    lat = read_kaldi_archive(ark)["utt1"]
    with pytest.raises(OptionsError, match="not writable as UTF-8"):
        write_kaldi_archive({"\ud800": lat}, tmp_path / "out.ark")
    assert math.isfinite(lat.best_cost)


def test_a_state_the_start_does_not_reach_is_left_out(tmp_path):
    """OpenFst lets a lattice hold states its start does not reach (kaldifst writes what it is
    given). Numbered after the start, such a state was kept at frame 0: a state it leads to
    had two frames ("not frame-synchronous"), or the lattice was one frame longer."""
    lat = kaldifst.Lattice()
    s0, lost, s2, s3 = (lat.add_state() for _ in range(4))
    lat.start = s0
    lat.add_arc(s0, kaldifst.LatticeArc(1, 5, kaldifst.LatticeWeight(1.0, 2.0), s2))
    lat.add_arc(lost, kaldifst.LatticeArc(0, 6, kaldifst.LatticeWeight(0.5, 0.0), s2))
    lat.add_arc(s2, kaldifst.LatticeArc(2, 0, kaldifst.LatticeWeight(0.5, 1.5), s3))
    lat.set_final(s3, kaldifst.LatticeWeight(0.25, 0.0))
    path = tmp_path / "k.fst"
    lat.write(str(path))
    ark = tmp_path / "k.ark"
    ark.write_bytes(b"utt1 \0B" + path.read_bytes())
    got = read_kaldi_archive(ark)["utt1"]
    assert (got.num_nodes, got.num_arcs, got.num_frames) == (3, 2, 2)
    assert got.node_frame.tolist() == [0, 1, 2]
    assert got.best_cost == pytest.approx(5.25)
