"""Lattice archives named as Kaldi names tables: ``ark:``, ``scp:``, ``ark,scp:`` and
gzip-compressed archives, read and written as the plain file is; what cannot be written refused
before anything is."""

import gzip
import os

import numpy as np
import pytest

from wfstdecode import OptionsError
from wfstdecode.cli import main
from wfstdecode.compact_lattice import determinize
from wfstdecode.ctc import CtcBeamOptions, ctc_lattices
from wfstdecode.errors import InputFileError
from wfstdecode.kaldi_matrices import read_kaldi_matrices
from wfstdecode.lattice_io import check_archive_path, read_kaldi_archive, write_kaldi_archive
from wfstdecode.testing import lexicon_graph, simulate_ctc
from wfstdecode.testing.lm import random_arpa

WORDS = ["cat", "cap", "act", "tact", "pat", "tapa"]


@pytest.fixture(scope="module")
def first_pass():
    g = lexicon_graph(WORDS, word_cost=[1.0, 1.2, 2.0, 2.5, 1.1, 2.4])
    texts = (["cat", "pat"], ["tapa", "act"], ["tact", "cap"])
    seqs = [[g.tokens.id(c) for c in "".join(ws)] for ws in texts]
    lp, lengths = simulate_ctc(seqs, g.num_tokens, seed=4, confusion_prob=0.4, noise=2.0)
    lats = ctc_lattices(lp, lengths, g, CtcBeamOptions(lattice_beam=6.0))
    return g, lp, lengths, lats


def _signature(lattices):
    """What a lattice read back is: its arcs and weights, per key, in order."""
    return [(k, lat.kaldi_bytes()) for k, lat in lattices.items()]


def test_every_way_of_naming_an_archive_writes_and_reads_the_same(first_pass, tmp_path):
    """ark:FILE, ark,scp:FILE,SCRIPT and FILE.gz hold what the plain FILE holds; scp:SCRIPT and
    the .gz read back what the plain file does; the script's offsets are Kaldi's (the byte of
    the object, after 'KEY '), for compact and state-level lattices alike."""
    _, _, _, lats = first_pass
    for kind, entries in (("compact", [determinize(x) for x in lats]), ("state", lats)):
        table = dict(zip(["u1", "utt-two", "u3"], entries, strict=True))
        plain = tmp_path / f"{kind}.ark"
        write_kaldi_archive(table, plain)
        want = plain.read_bytes()
        write_kaldi_archive(table, f"ark:{tmp_path}/{kind}-ark.ark")
        assert (tmp_path / f"{kind}-ark.ark").read_bytes() == want
        write_kaldi_archive(table, f"ark,scp:{tmp_path}/{kind}-s.ark,{tmp_path}/{kind}-s.scp")
        data = (tmp_path / f"{kind}-s.ark").read_bytes()
        assert data == want
        lines = (tmp_path / f"{kind}-s.scp").read_text().splitlines()
        assert [line.split()[0] for line in lines] == list(table)
        for line in lines:
            key, target = line.split()
            file, offset = target.rsplit(":", 1)
            offset = int(offset)
            assert file == f"{tmp_path}/{kind}-s.ark"
            assert data[offset - len(key) - 1 : offset + 2] == key.encode() + b" \0B"
        write_kaldi_archive(table, tmp_path / f"{kind}.ark.gz")
        assert gzip.decompress((tmp_path / f"{kind}.ark.gz").read_bytes()) == want

        read = read_kaldi_archive(plain, keep_compact=True)
        assert _signature(read) == [(k, x.kaldi_bytes()) for k, x in table.items()]
        for spec in (f"ark:{plain}", f"ark,s,cs:{plain}", f"scp:{tmp_path}/{kind}-s.scp",
                     tmp_path / f"{kind}-s.scp", tmp_path / f"{kind}.ark.gz"):  # fmt: skip
            assert _signature(read_kaldi_archive(spec, keep_compact=True)) == _signature(read)


@pytest.mark.parametrize("spec, refusal", [
    ("ark,t:{d}/x.ark", "text archives"),
    ("scp:{d}/x.scp", "a script alone"),
    ("ark:-", "pipes and standard output"),
    ("ark:| gzip -c > {d}/x.gz", "pipes and standard output"),
    ("ark,scp:{d}/x.ark", "two files"),
    ("ark,scp:{d}/x.ark,{d}/x.ark", "the same file"),
    ("ark,scp:{d}/x.ark.gz,{d}/x.scp", "gzip-compressed"),
    ("t,ark:{d}/x.ark", "text archives"),  # (Kaldi takes the options in any order)
    ("ark:", "pipes and standard output"),  # (Kaldi: "" is standard output)
    ("ark:  ", "pipes and standard output"),
    ("", "names no file"),
    ("-", "standard output is not written"),
    ("ark,scp: {d}/x.ark,{d}/x.scp", "begins or ends with a space"),
])  # fmt: skip
def test_what_cannot_be_written_is_refused_before_anything_is(first_pass, tmp_path, spec,
                                                              refusal):  # fmt: skip
    _, _, _, lats = first_pass
    spec = spec.format(d=tmp_path)
    with pytest.raises(OptionsError, match=refusal):
        check_archive_path(spec, [], "--out")
    with pytest.raises(OptionsError, match=refusal):
        write_kaldi_archive({"u": lats[0]}, spec)
    assert not os.listdir(tmp_path)


def test_a_script_beside_its_archive_is_checked_as_the_archive_is(tmp_path):
    """The script of ark,scp: is an output too: a directory, or an input, there is refused."""
    (tmp_path / "d").mkdir()
    (tmp_path / "in.arpa").write_text("x")
    with pytest.raises(OptionsError, match="is a directory"):
        check_archive_path(f"ark,scp:{tmp_path}/a.ark,{tmp_path}/d", [], "--out")
    with pytest.raises(OptionsError, match="would overwrite the input"):
        check_archive_path(f"ark,scp:{tmp_path}/a.ark,{tmp_path}/in.arpa",
                           [tmp_path / "in.arpa"], "--out")  # fmt: skip


def test_a_failed_write_leaves_neither_the_archive_nor_its_script(first_pass, tmp_path):
    _, _, _, lats = first_pass

    class Breaks:
        """A lattice whose bytes cannot be made (a full disk, Ctrl-C: the write stops)."""

        final, graph_cost, acoustic_cost = lats[0].final, lats[0].graph_cost, lats[0].acoustic_cost

        def kaldi_bytes(self):
            raise KeyboardInterrupt

    table = {"u1": lats[0], "u2": Breaks()}
    for spec in (f"ark,scp:{tmp_path}/a.ark,{tmp_path}/a.scp", str(tmp_path / "a.ark.gz")):
        with pytest.raises(KeyboardInterrupt):
            write_kaldi_archive(table, spec)
        assert not os.listdir(tmp_path)


def test_a_gzip_archive_that_is_cut_short_is_named(first_pass, tmp_path):
    _, _, _, lats = first_pass
    write_kaldi_archive({"u1": lats[0], "u2": lats[1]}, tmp_path / "a.ark.gz")
    data = (tmp_path / "a.ark.gz").read_bytes()
    (tmp_path / "cut.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(InputFileError, match=r"cut\.gz.*gzip-compressed, and cannot be"):
        read_kaldi_archive(tmp_path / "cut.gz")


def test_gzip_compressed_matrix_archives_are_read(tmp_path):
    """Network outputs in a .ark.gz decode as the .ark does (a matrix table, by its name)."""
    from wfstdecode.kaldi_tables import is_kaldi_table

    rng = np.random.default_rng(0)
    mats = {"a": rng.normal(size=(3, 4)).astype(np.float32), "b": np.ones((2, 4), np.float32)}
    raw = b"".join(
        k.encode() + b" \0BFM \x04" + m.shape[0].to_bytes(4, "little") + b"\x04"
        + m.shape[1].to_bytes(4, "little") + m.tobytes() for k, m in mats.items()
    )  # fmt: skip
    (tmp_path / "m.ark.gz").write_bytes(gzip.compress(raw))
    assert is_kaldi_table(tmp_path / "m.ark.gz") and is_kaldi_table("feats.1.gz")
    read = read_kaldi_matrices(tmp_path / "m.ark.gz")
    assert list(read) == ["a", "b"] and all(np.array_equal(read[k], mats[k]) for k in mats)


def test_decode_and_rescore_take_kaldi_specifiers(first_pass, tmp_path, capsys):
    """decode --write-lattices ark,scp:, then rescore scp: and a .gz: the same output as the
    plain archive; a Kaldi pipe is refused with what to give instead."""
    g, lp, lengths, _ = first_pass
    g.save(tmp_path / "TLG.npz")
    g.words.write(tmp_path / "words.txt")
    np.savez(tmp_path / "e.npz", log_probs=lp, lengths=lengths, ids=np.array(["u1", "u2", "u3"]))
    old, new = tmp_path / "old.arpa", tmp_path / "new.arpa"
    old.write_text(random_arpa(WORDS, order=1, seed=1, density=1.0))
    new.write_text(random_arpa(WORDS, order=2, seed=2, density=0.6))
    decode = ["decode", str(tmp_path / "TLG.npz"), str(tmp_path / "e.npz"), "--backend", "cpu",
              "--lattice-beam", "6", "--write-lattices"]  # fmt: skip
    assert main([*decode, str(tmp_path / "plain.ark")]) == 0
    spec = f"ark,scp:{tmp_path}/l.ark,{tmp_path}/l.scp"
    assert main([*decode, spec]) == 0
    assert f"to {spec}" in capsys.readouterr().err
    assert (tmp_path / "l.ark").read_bytes() == (tmp_path / "plain.ark").read_bytes()
    assert main([*decode, str(tmp_path / "l.ark.gz")]) == 0
    capsys.readouterr()

    rescore = ["--words", str(tmp_path / "words.txt"), "--new-lm", str(new), "--old-lm", str(old)]
    outputs = []
    for given in ("plain.ark", "scp:{d}/l.scp", "ark:{d}/l.ark.gz"):
        given = given.format(d=tmp_path) if "{d}" in given else str(tmp_path / given)
        assert main(["rescore", given, *rescore, "--nbest", "2"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] and outputs == outputs[:1] * 3
    assert main(["rescore", f"ark:gunzip -c {tmp_path}/l.ark.gz|", *rescore]) == 2
    assert "lat.1.gz" in capsys.readouterr().err  # the hint: give the .gz itself
    assert main(["rescore", f"scp:{tmp_path}/l.scp", *rescore, "--out",
                 f"ark,scp:{tmp_path}/r.ark,{tmp_path}/l.scp"]) == 2  # fmt: skip
    assert "would overwrite the input" in capsys.readouterr().err
    assert main(["rescore", f"scp:{tmp_path}/l.scp", *rescore, "--out",
                 f"ark:{tmp_path}/l.ark"]) == 2  # (the archive the script names) # fmt: skip
    assert "would overwrite the input" in capsys.readouterr().err


def test_an_archive_and_its_script_as_one_file_through_links_are_refused(first_pass, tmp_path):
    """ark,scp:out.ark,link.scp with link.scp -> out.ark: both would be written through to one
    file (both temporaries the same, the archive's emptied under it); refused before the work,
    out.ark as it was."""
    _, _, _, lats = first_pass
    (tmp_path / "out.ark").write_bytes(b"old")
    (tmp_path / "link.scp").symlink_to("out.ark")
    (tmp_path / "d").mkdir()
    (tmp_path / "e").symlink_to("d")
    for spec in (f"ark,scp:{tmp_path}/out.ark,{tmp_path}/link.scp",
                 f"ark,scp:{tmp_path}/d/x.ark,{tmp_path}/e/x.ark"):  # fmt: skip
        with pytest.raises(OptionsError, match="the same file"):
            check_archive_path(spec, [], "--out")
        with pytest.raises(OptionsError, match="the same file"):
            write_kaldi_archive({"u": lats[0]}, spec)
    assert (tmp_path / "out.ark").read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["d", "e", "link.scp", "out.ark"]
    assert not os.listdir(tmp_path / "d")


def test_options_before_ark_or_scp_are_taken_in_any_order(first_pass, tmp_path, monkeypatch):
    """Kaldi takes b,ark: as ark,b: (not a file named 'b,ark:x.ark'); an ark,scp: rspecifier is
    refused, as Kaldi refuses it, with what to give instead."""
    _, _, _, lats = first_pass
    monkeypatch.chdir(tmp_path)
    table = {"u1": lats[0], "u2": lats[1]}
    write_kaldi_archive(table, "b,ark:x.ark")
    write_kaldi_archive(table, "f,ark,scp:y.ark,y.scp")
    assert sorted(os.listdir(tmp_path)) == ["x.ark", "y.ark", "y.scp"]
    want = _signature(read_kaldi_archive("x.ark", keep_compact=True))
    for spec in ("b,ark:x.ark", "t,ark:y.ark", "ns,scp:y.scp"):
        assert _signature(read_kaldi_archive(spec, keep_compact=True)) == want
    with pytest.raises(InputFileError, match="read ark:FILE or scp:SCRIPT"):
        read_kaldi_archive("ark,scp:y.ark,y.scp")


def test_the_archive_is_renamed_into_place_before_its_script(first_pass, tmp_path, monkeypatch):
    """A crash between the two renames leaves the new archive under the old script (whose
    offsets fail clearly), never a new script pointing into the old archive."""
    import wfstdecode.safe_io as safe_io

    _, _, _, lats = first_pass
    renamed, replace = [], os.replace
    monkeypatch.setattr(safe_io.os, "replace", lambda a, b: (renamed.append(b), replace(a, b)))
    write_kaldi_archive({"u": lats[0]}, f"ark,scp:{tmp_path}/a.ark,{tmp_path}/a.scp")
    assert [os.path.basename(p) for p in renamed] == ["a.ark", "a.scp"]


def test_a_script_that_cannot_be_written_leaves_the_old_archive(first_pass, tmp_path, monkeypatch):
    """A full disk while the script is written (after the archive took the space) leaves the
    old archive and script as they were: never the new archive under the old script's
    offsets."""
    import errno

    import wfstdecode.safe_io as safe_io

    _, _, _, lats = first_pass
    spec = f"ark,scp:{tmp_path}/a.ark,{tmp_path}/a.scp"
    write_kaldi_archive({"u1": lats[0], "u2": lats[1]}, spec)
    before = {n: (tmp_path / n).read_bytes() for n in ("a.ark", "a.scp")}

    class Full:  # the script's temporary file, on a disk that is full
        def __init__(self, f):
            self._f = f

        def flush(self):
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name):
            return getattr(self._f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self._f.close()

    def opened(path, mode):
        f = open(path, mode)  # noqa: SIM115
        return Full(f) if ".a.scp." in os.fspath(path) else f

    monkeypatch.setattr(safe_io, "open", opened, raising=False)
    with pytest.raises(OSError, match="No space left"):
        write_kaldi_archive({"u2": lats[2], "u1": lats[1]}, spec)
    monkeypatch.undo()
    assert {n: (tmp_path / n).read_bytes() for n in ("a.ark", "a.scp")} == before
    assert sorted(os.listdir(tmp_path)) == ["a.ark", "a.scp"]


def test_an_archive_over_the_file_stdout_writes_to_is_refused(tmp_path):
    """`decode ... --write-lattices out.ark > out.ark`: the archive renamed over the file left
    every printed hypothesis in the deleted file (status 0, nothing said); /dev/stdout was
    refused, the file it is redirected to was not."""
    out = tmp_path / "out.ark"
    saved = os.dup(1)
    try:
        with open(out, "wb") as redirected:
            os.dup2(redirected.fileno(), 1)
        with pytest.raises(OptionsError, match="standard output or error is redirected"):
            check_archive_path(out, [], "--write-lattices")
        with pytest.raises(OptionsError, match="standard output or error is redirected"):
            check_archive_path(f"ark,scp:{tmp_path}/other.ark,{out}", [], "--out")
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    check_archive_path(out, [], "--write-lattices")  # (stdout elsewhere: a file like any)
