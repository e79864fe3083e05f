"""DecodingGraph: CSR layout, .npz save/load, OpenFst binary files in and out."""

import dataclasses
import struct

import numpy as np
import pynini
import pytest

from wfstdecode import DecodingGraph, GraphError, SymbolTable
from wfstdecode.fstio import FstArrays, read_openfst, write_openfst
from wfstdecode.graph import build_tlg, read_lexicon
from wfstdecode.graph.ops import from_pynini, to_pynini
from wfstdecode.testing.data import PACKAGE_DATA


@pytest.fixture(scope="module")
def demo_build():
    tokens = SymbolTable.read(PACKAGE_DATA / "tokens.txt")
    lexicon = read_lexicon(PACKAGE_DATA / "lexicon.txt", tokens)[:300]
    return build_tlg(tokens, lexicon, str(PACKAGE_DATA / "lm.arpa.gz"), "compact", separator="|")


def test_csr_layout(demo_build):
    g = demo_build.graph
    n_emit = g.num_emitting_arcs
    assert (g.ilabel[:n_emit] > 0).all() and (g.ilabel[n_emit:] == 0).all()
    for s in range(0, g.num_states, 97):
        e = g.ilabel[g.e_offsets[s] : g.e_offsets[s + 1]]
        assert (np.diff(e) >= 0).all()
    assert g.num_tokens == 29 and g.metadata["topology"] == "compact"
    # The arc multiset is what the builder produced.
    a, b = g.to_arrays(), demo_build.fst

    def key(f):
        return sorted(
            zip(f.src.tolist(), f.dst.tolist(), f.ilabel.tolist(), f.olabel.tolist(), strict=False)
        )

    assert key(a) == key(b)


def test_npz_round_trip(demo_build, tmp_path):
    g = demo_build.graph
    g.save(tmp_path / "g.npz")
    h = DecodingGraph.load(tmp_path / "g.npz")
    for name in (
        "final_cost",
        "e_offsets",
        "ne_offsets",
        "next_state",
        "weight",
        "ilabel",
        "olabel",
    ):
        np.testing.assert_array_equal(getattr(g, name), getattr(h, name))
    assert h.start == g.start and h.tokens == g.tokens and h.words == g.words
    assert h.metadata == g.metadata


def test_openfst_round_trip_through_pynini_and_kaldifst(demo_build, tmp_path):
    g = demo_build.graph
    g.to_openfst(tmp_path / "TLG.fst")
    as_pynini = pynini.Fst.read(str(tmp_path / "TLG.fst"))
    assert as_pynini.num_states() == g.num_states
    assert pynini.equal(as_pynini, to_pynini(g.to_arrays()))
    back = DecodingGraph.from_openfst(tmp_path / "TLG.fst", g.tokens, g.words)
    np.testing.assert_array_equal(back.next_state, g.next_state)
    np.testing.assert_array_equal(back.weight, g.weight)
    kaldifst = pytest.importorskip("kaldifst")
    const = kaldifst.StdConstFst(kaldifst.StdVectorFst.read(str(tmp_path / "TLG.fst")))
    const.write(str(tmp_path / "const.fst"))
    from_const = DecodingGraph.from_openfst(tmp_path / "const.fst")
    np.testing.assert_array_equal(from_const.olabel, g.olabel)
    np.testing.assert_array_equal(from_const.final_cost, g.final_cost)


def test_openfst_writer_places_arcs_in_steps_and_keeps_sorted_arcs(monkeypatch, tmp_path):
    """The writer places a large FST's arcs a step of `_BODY_CHUNK` at a time and writes its
    parts without joining them: the same bytes as one step, for arcs in any state order; an FST
    already grouped by state is not copied first."""
    import wfstdecode.fstio as fstio

    rng = np.random.default_rng(0)
    n_states, n_arcs = 40, 300
    src = rng.integers(0, n_states, n_arcs)
    fst = FstArrays(0, rng.uniform(0, 5, n_states), src, rng.integers(0, n_states, n_arcs),
                    rng.integers(0, 9, n_arcs), rng.integers(0, 9, n_arcs),
                    rng.uniform(0, 3, n_arcs))  # fmt: skip
    whole = fstio.write_openfst_bytes(fst)
    monkeypatch.setattr(fstio, "_BODY_CHUNK", 7)
    assert fstio.write_openfst_bytes(fst) == whole
    write_openfst(fst, tmp_path / "f.fst")
    assert (tmp_path / "f.fst").read_bytes() == whole
    assert pynini.equal(pynini.Fst.read(str(tmp_path / "f.fst")), to_pynini(fst))
    grouped = fst.sorted_by_state()
    assert grouped is not fst and grouped.sorted_by_state() is grouped


def test_pynini_written_files_with_symbol_tables_load(tmp_path):
    f = pynini.cross("ab", "x") | pynini.accep("abd", weight=2.5)
    syms = pynini.SymbolTable()
    for i in range(0, 130):
        syms.add_symbol(f"s{i}", i)
    f.set_input_symbols(syms)
    f.set_output_symbols(syms)
    f.write(str(tmp_path / "f.fst"))
    arrays = read_openfst(tmp_path / "f.fst")
    assert pynini.equal(to_pynini(arrays), from_pynini_plain(f))


def from_pynini_plain(f):
    g = f.copy()
    g.set_input_symbols(None)
    g.set_output_symbols(None)
    return to_pynini(from_pynini(g))


def test_openfst_reader_rejects_bad_files(tmp_path):
    (tmp_path / "junk.fst").write_bytes(b"not an fst at all")
    with pytest.raises(GraphError, match="junk.fst: not an OpenFst binary"):
        read_openfst(tmp_path / "junk.fst")
    good = FstArrays(0, [0.0, 0.0], [0], [1], [1], [1], [0.5])
    write_openfst(good, tmp_path / "ok.fst")
    data = (tmp_path / "ok.fst").read_bytes()
    (tmp_path / "cut.fst").write_bytes(data[:-5])
    with pytest.raises(GraphError, match="cut.fst: truncated"):
        read_openfst(tmp_path / "cut.fst")
    log_arc = pynini.Fst(arc_type="log")
    log_arc.add_state()
    log_arc.set_start(0)
    log_arc.write(str(tmp_path / "log.fst"))
    with pytest.raises(GraphError, match="arc type 'log'"):
        read_openfst(tmp_path / "log.fst")
    with pytest.raises(GraphError, match="cannot read"):
        read_openfst(tmp_path / "missing.fst")


def test_graph_validation_errors(tmp_path):
    fst = FstArrays(0, [np.inf, 0.0], [0, 0], [1, 1], [1, 0], [0, 0], [0.0, 0.0])
    g = DecodingGraph.from_arrays(fst)
    assert g.num_emitting_arcs == 1
    with pytest.raises(GraphError, match="token table has 1 ids"):
        DecodingGraph.from_arrays(
            FstArrays(0, [0.0], [0], [0], [3], [0], [0.0]), tokens=SymbolTable.from_list(["<blk>"])
        )
    with pytest.raises(GraphError, match="outside"):
        FstArrays(0, [0.0], [0], [5], [1], [0], [0.0])
    with pytest.raises(GraphError, match="no states"):
        DecodingGraph.from_arrays(FstArrays(0, [], [], [], [], [], []))
    with pytest.raises(GraphError, match="NaN"):
        DecodingGraph.from_arrays(FstArrays(0, [0.0], [0], [0], [1], [0], [np.nan]))
    (tmp_path / "x.npz").write_bytes(b"garbage")
    with pytest.raises(GraphError, match="x.npz"):
        DecodingGraph.load(tmp_path / "x.npz")
    np.savez(tmp_path / "y.npz", a=np.zeros(2))
    with pytest.raises(GraphError, match="not a wfstdecode graph"):
        DecodingGraph.load(tmp_path / "y.npz")


def test_what_would_not_survive_a_save_is_refused():
    """Metadata naming the file's own keys, metadata JSON cannot hold, a word id in a gap of the
    word table, and costs whose sums leave float32 are refused when the graph is made."""
    fst = FstArrays(0, [np.inf, 0.0], [0, 0], [1, 1], [1, 0], [1, 0], [0.0, 0.0])
    tokens = SymbolTable.from_list(["<blk>", "a"])
    for key in ("start", "format_version"):
        with pytest.raises(GraphError, match=f"metadata keys \\['{key}'\\]"):
            DecodingGraph.from_arrays(fst, metadata={key: 0})
    with pytest.raises(GraphError, match="string keys"):
        DecodingGraph.from_arrays(fst, metadata={1: "x"})
    for nested in ({"a": {1: "x"}}, {"a": [{"b": {None: 0}}]}):  # saved as "1", "null"
        with pytest.raises(GraphError, match="string keys, nested dicts' too"):
            DecodingGraph.from_arrays(fst, metadata=nested)
    gap = SymbolTable()
    gap.add("<eps>", 0), gap.add("w", 2)
    with pytest.raises(GraphError, match=r"olabel\[0\] is 1: .*gap"):
        DecodingGraph.from_arrays(fst, tokens, gap)
    gap.add("v", 1)
    assert DecodingGraph.from_arrays(fst, tokens, gap).words.symbol(1) == "v"
    # a token id in a gap: a log-prob column without a name (hypotheses' tokens unnameable)
    token_gap = SymbolTable()
    token_gap.add("<blk>", 0), token_gap.add("b", 2)
    reads_gap = dataclasses.replace(fst, ilabel=np.array([2, 0], np.int32))
    with pytest.raises(GraphError, match=r"ilabel\[0\] is 2: .*gap"):
        DecodingGraph.from_arrays(reads_gap, token_gap, gap)
    reads_b = dataclasses.replace(fst, ilabel=np.array([3, 0], np.int32))
    assert DecodingGraph.from_arrays(reads_b, token_gap, gap).num_tokens == 3
    for weights in ([-3e38, 0.0], [1e31, 0.0]):
        with pytest.raises(GraphError, match="at most 1e\\+30 in magnitude"):
            DecodingGraph.from_arrays(
                dataclasses.replace(fst, weight=np.array(weights, np.float32))
            )
    with pytest.raises(GraphError, match="final_cost"):
        DecodingGraph.from_arrays(
            dataclasses.replace(fst, final=np.array([np.inf, -1e35], np.float32))
        )


def test_save_writes_numpy_metadata_and_refuses_what_json_cannot_hold(tmp_path):
    fst = FstArrays(0, [np.inf, 0.0], [0, 0], [1, 1], [1, 0], [0, 0], [0.0, 0.0])
    g = DecodingGraph.from_arrays(fst, metadata={"blank_id": np.int64(0), "scale": np.float32(2)})
    g.save(tmp_path / "g.npz")
    assert DecodingGraph.load(tmp_path / "g.npz").metadata == {"blank_id": 0, "scale": 2.0}
    for bad in ({"note": object()}, {"scale": float("nan")}):
        with pytest.raises(GraphError, match="h.npz: the graph's metadata cannot be saved"):
            DecodingGraph.from_arrays(fst, metadata=bad).save(tmp_path / "h.npz")
        assert not (tmp_path / "h.npz").exists()


def test_a_mapped_graph_saved_over_its_own_file_and_a_failed_save(
    demo_build, tmp_path, monkeypatch
):
    """save() writes beside the file and renames: a graph memory-mapped from the file it saves
    to keeps reading the old one (writing in place crashed the process with SIGBUS), and a save
    that fails leaves the old file whole and nothing beside it."""
    import wfstdecode.decoding_graph as module

    path = tmp_path / "g.npz"
    demo_build.graph.save(path)
    mapped = DecodingGraph.load(path, mmap=True)
    mapped.save(path)
    np.testing.assert_array_equal(DecodingGraph.load(path).weight, mapped.weight)
    assert float(mapped.weight.sum()) == float(demo_build.graph.weight.sum())
    before = path.read_bytes()

    def full_disk(f, arrays, align=64):
        f.write(b"half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(module, "write_aligned_npz", full_disk)
    with pytest.raises(OSError, match=f"No space left on device: '{path}'"):
        mapped.save(path)
    assert path.read_bytes() == before and sorted(tmp_path.iterdir()) == [path]


def test_memory_mapped_load(demo_build, tmp_path):
    """save() aligns every member, load(mmap=True) maps the graph arrays (pages shared between
    processes) and decodes exactly as a read graph; a flipped byte still fails the CRC check; a
    graph written by np.savez (unaligned members) is read instead of mapped."""
    import zipfile

    from wfstdecode.ctc import decode_ctc
    from wfstdecode.decoding_graph import _ARRAY_FIELDS
    from wfstdecode.safe_io import _member_data_offset
    from wfstdecode.testing import random_log_probs

    g = demo_build.graph
    path = tmp_path / "g.npz"
    g.save(path)
    with zipfile.ZipFile(path) as z:
        for info in z.infolist():
            with z.open(info) as f:
                np.lib.format.read_magic(f)
                np.lib.format.read_array_header_1_0(f)
                assert (_member_data_offset(z.fp, info) + f.tell()) % 64 == 0, info.filename
    mapped, read = DecodingGraph.load(path, mmap=True), DecodingGraph.load(path)
    for name in _ARRAY_FIELDS:
        arr = getattr(mapped, name)
        assert isinstance(arr.base, np.memmap) or isinstance(arr.base.base, np.memmap), name
        np.testing.assert_array_equal(arr, getattr(read, name))
    lp = random_log_probs(1, 2, 30, g.num_tokens, peaky=4.0)
    a = decode_ctc(lp, None, mapped, backend="cpu")
    b = decode_ctc(lp, None, read, backend="cpu")
    assert [h[0].words for h in a] == [h[0].words for h in b]
    assert [h[0].score for h in a] == [h[0].score for h in b]

    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("next_state.npy")
        offset = _member_data_offset(z.fp, info) + info.file_size - 1000
    data[offset] ^= 0xFF
    bad = tmp_path / "bad.npz"
    bad.write_bytes(data)
    with pytest.raises(GraphError, match=r"bad\.npz: next_state is corrupt"):
        DecodingGraph.load(bad, mmap=True)

    plain = tmp_path / "plain.npz"
    with zipfile.ZipFile(path) as z:
        np.savez(plain, **{i.filename[:-4]: np.load(z.open(i)) for i in z.infolist()})
    unaligned = DecodingGraph.load(plain, mmap=True)
    np.testing.assert_array_equal(unaligned.weight, read.weight)


def test_pronunciations_round_trip_and_are_checked(demo_build, tmp_path):
    """A built graph keeps its lexicon (for word times); save/load keep it exactly, and a file
    whose pronunciation arrays disagree with the graph is refused, naming the file."""
    from wfstdecode.decoding_graph import Pronunciations

    g = demo_build.graph
    assert g.pronunciations is not None and len(g.pronunciations.word) == 300
    first = g.pronunciations.by_word[int(g.pronunciations.word[0])][0]
    assert all(isinstance(t, int) for t in first)
    path = tmp_path / "g.npz"
    g.save(path)
    for mmap in (False, True):
        back = DecodingGraph.load(path, mmap=mmap).pronunciations
        for name in ("word", "offsets", "tokens"):
            np.testing.assert_array_equal(getattr(back, name), getattr(g.pronunciations, name))
    p = g.pronunciations
    bad_token = Pronunciations(p.word, p.offsets, np.full_like(p.tokens, g.num_tokens))
    bad_offsets = Pronunciations(p.word, p.offsets[::-1].copy(), p.tokens)
    for bad, message in ((bad_token, "token id outside"), (bad_offsets, "not a valid layout")):
        broken = DecodingGraph(
            g.start, g.final_cost, g.e_offsets, g.ne_offsets, g.next_state, g.weight, g.ilabel,
            g.olabel, g.tokens, g.words, g.metadata, None,
        )  # fmt: skip
        object.__setattr__(broken, "pronunciations", bad)
        broken.save(tmp_path / "bad.npz")
        with pytest.raises(GraphError, match=rf"bad\.npz: .*{message}"):
            DecodingGraph.load(tmp_path / "bad.npz")
    with pytest.raises(GraphError, match="outside int32"):
        Pronunciations(p.word, p.offsets, p.tokens.astype(np.int64) + 2**40)


def test_const_fst_epsilon_counts_are_openfsts(tmp_path):
    """Mutant F2 (the ConstFst state records' input-epsilon count counts output epsilons):
    OpenFst answers NumInputEpsilons / NumOutputEpsilons from these records."""
    pywrapfst = pytest.importorskip("pywrapfst")
    from wfstdecode.fstio import FstArrays, write_openfst

    fst = FstArrays(0, [np.inf, np.inf, 0.0], [0, 0, 0, 1], [1, 2, 2, 2], [0, 0, 3, 4],
                    [5, 6, 0, 6], [0.5, 1.0, 1.5, 2.0])  # fmt: skip
    path = tmp_path / "c.fst"
    write_openfst(fst, path, "const")
    f = pywrapfst.Fst.read(str(path))
    assert f.fst_type() == "const"
    assert [f.num_input_epsilons(s) for s in range(3)] == [2, 0, 0]
    assert [f.num_output_epsilons(s) for s in range(3)] == [1, 0, 0]


def test_a_const_fst_whose_state_block_is_not_a_multiple_of_16_bytes_reads_back(tmp_path):
    """Mutant F8 (no alignment to 16 bytes before the arcs of an aligned ConstFst): 3 state
    records are 60 bytes, so the arcs start after 4 bytes of padding, ours and OpenFst's."""
    pywrapfst = pytest.importorskip("pywrapfst")
    from wfstdecode.fstio import FstArrays, read_openfst, write_openfst

    fst = FstArrays(0, [np.inf, np.inf, 0.0], [0, 0, 0, 1], [1, 2, 2, 2], [0, 0, 3, 4],
                    [5, 6, 0, 6], [0.5, 1.0, 1.5, 2.0])  # fmt: skip
    write_openfst(fst, tmp_path / "ours.fst", "const")
    vector = tmp_path / "v.fst"
    write_openfst(fst, vector)
    pywrapfst.convert(pywrapfst.Fst.read(str(vector)), "const").write(str(tmp_path / "theirs.fst"))
    for name in ("ours.fst", "theirs.fst"):
        back = read_openfst(tmp_path / name)
        for field in ("final", "src", "dst", "ilabel", "olabel", "weight"):
            np.testing.assert_array_equal(getattr(back, field), getattr(fst, field), name)


def test_a_version_1_const_fst_is_aligned_without_the_flag():
    """OpenFst's ConstFst::Read treats file version 1 (kAlignedFileVersion, older OpenFst) as
    aligned whether or not the header flags it; read unaligned, its state records started in
    the padding and a valid file was refused."""
    from wfstdecode.fstio import FstArrays, read_openfst_bytes, write_openfst_bytes

    fst = FstArrays(0, [np.inf, np.inf, 0.0], [0, 0, 0, 1], [1, 2, 2, 2], [0, 0, 3, 4],
                    [5, 6, 0, 6], [0.5, 1.0, 1.5, 2.0])  # fmt: skip
    data = bytearray(write_openfst_bytes(fst, "const"))
    at = 4 + (4 + 5) + (4 + 8)  # magic, "const", "standard": then version, flags
    assert struct.unpack_from("<ii", data, at) == (2, 4)
    struct.pack_into("<ii", data, at, 1, 0)
    back = read_openfst_bytes(bytes(data), "v1.fst")
    for field in ("final", "src", "dst", "ilabel", "olabel", "weight"):
        np.testing.assert_array_equal(getattr(back, field), getattr(fst, field), field)


def test_const_fst_state_records_must_point_at_their_arcs(tmp_path):
    """Mutant F3 (a ConstFst state's ``pos`` not checked): OpenFst finds a state's arcs at
    ``pos``; a file whose records disagree with the arc counts is read otherwise by OpenFst
    and must be refused, not read by the counts."""
    from wfstdecode.fstio import FstArrays, read_openfst_bytes, write_openfst_bytes

    fst = FstArrays(0, [np.inf, 0.0], [0, 1], [1, 1], [1, 2], [0, 0], [0.5, 1.0])
    data = bytearray(write_openfst_bytes(fst, "const"))
    header = 4 + (4 + 5) + (4 + 8) + struct.calcsize("<iiQqqq")
    records = -(-header // 16) * 16
    assert struct.unpack_from("<fIIII", data, records + 20) == (0.0, 1, 1, 0, 1)  # state 1
    struct.pack_into("<I", data, records + 24, 0)  # state 1's arcs "at" arc 0
    with pytest.raises(GraphError, match="state records do not match"):
        read_openfst_bytes(bytes(data), "x.fst")


def test_arcs_between_the_emitting_and_the_epsilon_blocks_are_refused():
    """Mutant D2 (``e_offsets[-1] == ne_offsets[0]`` not checked): an arc in neither block
    belongs to no state and would silently never be taken."""
    from wfstdecode.decoding_graph import DecodingGraph

    fields = dict(start=0, final_cost=[0.0], next_state=[0], weight=[0.0], ilabel=[1],
                  olabel=[0])  # fmt: skip
    assert DecodingGraph(e_offsets=[0, 1], ne_offsets=[1, 1], **fields).num_emitting_arcs == 1
    with pytest.raises(GraphError, match="not a valid CSR layout"):
        DecodingGraph(e_offsets=[0, 0], ne_offsets=[1, 1], **fields)


def test_a_word_table_with_gaps_and_no_epsilon_entry_accepts_epsilon_outputs():
    """Mutant D3 (``listed[0] = True`` dropped): olabel 0 is the epsilon whether or not the
    table lists id 0."""
    from wfstdecode import SymbolTable
    from wfstdecode.decoding_graph import DecodingGraph
    from wfstdecode.fstio import FstArrays

    words = SymbolTable()
    words.add("a", 1), words.add("c", 3)
    fst = FstArrays(0, [np.inf, 0.0], [0, 0], [1, 1], [1, 0], [0, 3], [0.0, 0.0])
    g = DecodingGraph.from_arrays(fst, words=words)
    assert sorted(g.olabel.tolist()) == [0, 3]


def test_an_empty_word_table_takes_epsilon_outputs_and_a_graph_without_arcs(tmp_path):
    """An empty word table (next id 0) refused olabel 0, the epsilon that a table with gaps
    takes; with no arcs at all, the check raised numpy's ValueError (the max of no olabels),
    from `load` too, where a corrupt file must raise GraphError naming it."""
    from wfstdecode import SymbolTable
    from wfstdecode.decoding_graph import DecodingGraph
    from wfstdecode.fstio import FstArrays

    for n in (0, 1):  # no arcs; one epsilon-output arc
        fst = FstArrays(0, [0.0], [0] * n, [0] * n, [1] * n, [0] * n, [0.0] * n)
        g = DecodingGraph.from_arrays(fst, SymbolTable.from_list(["<blk>"]), SymbolTable())
        g.save(tmp_path / f"g{n}.npz")
        back = DecodingGraph.load(tmp_path / f"g{n}.npz", mmap=True)
        assert back.words == SymbolTable() and back.num_arcs == n
    fst = FstArrays(0, [0.0], [0], [0], [1], [1], [0.0])
    with pytest.raises(GraphError, match="olabel 1 is not in the word table"):
        DecodingGraph.from_arrays(fst, SymbolTable.from_list(["<blk>"]), SymbolTable())


def test_an_empty_pronunciation_is_refused():
    """Mutant D4 (offsets only need to be non-decreasing: an empty spelling passes)."""
    from wfstdecode import SymbolTable
    from wfstdecode.decoding_graph import DecodingGraph, Pronunciations
    from wfstdecode.fstio import FstArrays

    fst = FstArrays(0, [np.inf, 0.0], [0, 0], [1, 1], [1, 0], [1, 0], [0.0, 0.0])
    tokens, words = SymbolTable.from_list(["<blk>", "a"]), SymbolTable.from_list(["<eps>", "w"])
    ok = Pronunciations(np.array([1]), np.array([0, 1]), np.array([1]))
    assert DecodingGraph.from_arrays(fst, tokens, words, pronunciations=ok).pronunciations is ok
    empty = Pronunciations(np.array([1, 1]), np.array([0, 1, 1]), np.array([1]))
    with pytest.raises(GraphError, match="not a valid layout of non-empty spellings"):
        DecodingGraph.from_arrays(fst, tokens, words, pronunciations=empty)


def test_integers_below_the_field_type_are_refused_not_wrapped():
    """Mutant D5 (only values above the type's range are refused): -2**40 as int32 wraps to 0,
    a valid state, and the graph would silently lead there."""
    from wfstdecode.decoding_graph import DecodingGraph

    fields = dict(start=0, final_cost=[0.0], e_offsets=[0, 1], ne_offsets=[1, 1],
                  weight=[0.0], ilabel=[1], olabel=[0])  # fmt: skip
    assert DecodingGraph(next_state=np.array([0], np.int64), **fields).next_state.tolist() == [0]
    with pytest.raises(GraphError, match="next_state holds -1099511627776, outside int32"):
        DecodingGraph(next_state=np.array([-(2**40)], np.int64), **fields)


def test_arc_lists_take_whole_numbers_and_never_wrap_or_round():
    """FstArrays cast its labels and states to int32: 2**32 + 1 became 1 and 1.5 became 1, a
    graph silently other than the one given. Whole floats (np.zeros as labels) are taken."""
    arcs = dict(src=[0], ilabel=[1], olabel=np.zeros(1), weight=[0.0])
    fst = FstArrays(0, [np.inf, 0.0], dst=np.array([1.0]), **arcs)
    assert fst.dst.tolist() == [1] and fst.olabel.dtype == np.int32
    for dst, says in ((np.array([2**32 + 1]), "dst holds 4294967297, outside int32"),
                      (np.array([1.5]), r"dst\[0\] is 1.5: not a whole number"),
                      (np.array([np.nan]), r"dst\[0\] is nan: not a whole number")):  # fmt: skip
        with pytest.raises(GraphError, match=says):
            FstArrays(0, [np.inf, 0.0], dst=dst, **arcs)
