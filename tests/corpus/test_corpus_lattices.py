"""decode-corpus --lattices: each shard's lattices beside its output as OUT/NAME.lat.gz (a
gzip-compressed Kaldi archive, as Kaldi's lat.N.gz), equal to what `decode --write-lattices`
writes for the shard, part of what makes the shard finished."""

import gzip

import pytest

from wfstdecode.cli import main
from wfstdecode.compact_lattice import determinize_pruned
from wfstdecode.corpus import CtcCorpusDecoder
from wfstdecode.ctc import CtcBeamOptions
from wfstdecode.ctc.npz import decode_npz
from wfstdecode.decoding_graph import DecodingGraph
from wfstdecode.errors import OptionsError
from wfstdecode.lattice_io import read_kaldi_archive

BEAM = 6.0


def _args(corpus, out, *extra):
    return ["decode-corpus", str(corpus.shard_dir), "--graph", str(corpus.graph_path), "--out",
            str(out), "--executor", "local", "--workers", "2", "--quiet", "--lattice-beam",
            str(BEAM), *extra]  # fmt: skip


def _want(corpus, shard, determinized: bool) -> dict[str, bytes]:
    """What decode --write-lattices writes for the shard: its lattices, keyed as the lines."""
    graph = DecodingGraph.load(corpus.graph_path)
    r = decode_npz(shard, graph, CtcBeamOptions(lattice_beam=BEAM), lattices=True)
    out = {}
    for i, lat in enumerate(r.lattices):
        if lat:
            lat = determinize_pruned(lat, BEAM)[0] if determinized else lat
            out[f"{shard.stem}-{i}"] = lat.kaldi_bytes()
    return out


@pytest.mark.parametrize("determinized", [True, False])
def test_each_shards_lattices_are_what_decode_writes(corpus, tmp_path, determinized):
    out = tmp_path / "out"
    extra = [] if determinized else ["--no-determinize-lattice"]
    assert main(_args(corpus, out, "--lattices", *extra)) == 0
    for shard in corpus.shards:
        path = out / f"{shard.stem}.lat.gz"
        assert gzip.decompress(path.read_bytes())  # (gzip, as Kaldi's lat.N.gz)
        read = read_kaldi_archive(path, keep_compact=True)
        assert {k: lat.kaldi_bytes() for k, lat in read.items()} == _want(
            corpus, shard, determinized
        )


def test_lattices_are_part_of_a_finished_shard(corpus, tmp_path, capsys):
    """A damaged or missing NAME.lat.gz is decoded again on a rerun; a run without --lattices
    over a run with them (or the other way) is another config."""
    out = tmp_path / "out"
    assert main(_args(corpus, out, "--lattices")) == 0
    first = {p.name: p.read_bytes() for p in out.glob("*.lat.gz")}
    assert len(first) == len(corpus.shards)
    damaged, missing = (out / f"{s.stem}.lat.gz" for s in corpus.shards[:2])
    damaged.write_bytes(damaged.read_bytes()[:-5])
    missing.unlink()
    capsys.readouterr()
    assert main(_args(corpus, out, "--lattices")) == 0
    assert {p.name: p.read_bytes() for p in out.glob("*.lat.gz")} == first
    assert "2 shards decoded, 4 already done" in capsys.readouterr().out
    assert main(_args(corpus, out)) == 2  # without lattices: another config
    assert main(_args(corpus, out, "--force")) == 0
    assert not list(out.glob("*.lat.gz"))  # (a shard decoded again has no stale lattices)


def test_what_cannot_write_lattices_is_refused_before_any_worker(corpus, tmp_path, capsys):
    out = tmp_path / "out"
    base = ["decode-corpus", str(corpus.shard_dir), "--graph", str(corpus.graph_path), "--out",
            str(out), "--executor", "local", "--quiet"]  # fmt: skip
    refusals = [(["--lattices"], "--lattice-beam"), (["--no-determinize-lattice"], "--lattices"),
                (["--lattice-beam", "6", "--determinize-lattice"], "--lattices")]  # fmt: skip
    for extra, says in refusals:
        capsys.readouterr()
        assert main([*base, *extra]) == 2 and says in capsys.readouterr().err
    assert main(["decode-corpus", str(corpus.shard_dir), "--transducer", "rnnt", "--out",
                 str(out), "--lattices", "--quiet"]) == 2  # fmt: skip
    assert not out.exists()
    with pytest.raises(OptionsError, match="lattice_beam"):
        CtcCorpusDecoder(str(corpus.graph_path), lattices="determinized")
    with pytest.raises(OptionsError, match="'determinized' or 'state'"):
        CtcCorpusDecoder(str(corpus.graph_path), CtcBeamOptions(lattice_beam=6.0), lattices="x")


def test_ids_no_archive_can_hold_fail_the_shard_before_its_search(corpus, tmp_path, monkeypatch):
    """An id with a space (or a shard without ids whose name has one: its lines' ids) cannot key
    a Kaldi archive: the shard fails before its search, as decode --write-lattices refuses it,
    not after the whole shard was decoded for nothing."""
    import numpy as np

    import wfstdecode.ctc.npz as npz

    arrays = dict(np.load(corpus.shards[1]))
    spaced = tmp_path / "spaced.npz"
    np.savez(spaced, **arrays, ids=np.array(["a b", "c", "d"][: len(arrays["lengths"])]))
    decoder = CtcCorpusDecoder(str(corpus.graph_path), CtcBeamOptions(lattice_beam=BEAM),
                               lattices="determinized").load()  # fmt: skip

    def searched(*args, **kwargs):
        raise AssertionError("the shard was searched")

    monkeypatch.setattr(npz, "prepared", searched)
    with pytest.raises(OptionsError, match="'a b'"):
        decoder(spaced, "spaced")
    with pytest.raises(OptionsError, match="'my shard-0'"):
        decoder(corpus.shards[1], "my shard")


@pytest.mark.parametrize("flag", ["--determinize-lattice", "--no-determinize-lattice"])
def test_transducer_refuses_determinize_lattice_rather_than_ignore_it(corpus, tmp_path, flag,
                                                                       capsys):  # fmt: skip
    """--[no-]determinize-lattice says how --lattices writes a graph search's lattices; with
    --transducer (no lattices) it was accepted and ignored, and the run started."""
    out = tmp_path / "out"
    assert main(["decode-corpus", str(corpus.shard_dir), "--transducer", "rnnt", "--out",
                 str(out), flag, "--quiet"]) == 2  # fmt: skip
    assert "--transducer" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("suffix", [".lat.gz", ".jsonl", ".done.json"])
def test_a_directory_where_an_output_goes_is_refused_before_anything_is_removed(
    corpus, tmp_path, capsys, suffix
):
    """Every shard's old output stays as it was: the directory is found before any shard is
    forgotten (it was an IsADirectoryError after earlier shards' files were removed)."""
    out = tmp_path / "out"
    assert main(_args(corpus, out, "--lattices")) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    last = corpus.shards[-1].stem
    for p in out.glob(f"{last}.*"):
        p.unlink()
    (out / f"{last}{suffix}").mkdir()
    for p in out.glob("*.done.json"):
        if p.is_file():
            p.write_bytes(p.read_bytes().replace(b'"config_sha256"', b'"old"'))
    stale = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    capsys.readouterr()
    assert main(_args(corpus, out, "--lattices")) == 2
    assert f"{last}{suffix}: a directory where shard {last}'s output goes" in (
        capsys.readouterr().err
    )
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == stale
    assert set(before) - set(stale) == {n for n in before if n.startswith(f"{last}.")}
    # with other settings and --force: refused before run.json takes them
    assert main(_args(corpus, out, "--lattices", "--beam", "9", "--force")) == 2
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == stale
