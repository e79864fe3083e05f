"""Corrupt and hostile files: a `WfstDecodeError` naming the file from the library, and
``wfstdecode: error: FILE: what`` with exit status 2 from the command line, never a traceback;
zip bombs refused before they are decompressed; graph validation; escaped utterance ids."""

import io
import json
import re
import struct
import tracemalloc
import zipfile

import numpy as np
import pytest

from wfstdecode import DecodingGraph, GraphError, InputFileError
from wfstdecode.cli import main
from wfstdecode.ctc.npz import load_log_probs_npz
from wfstdecode.fstio import FstArrays, read_openfst, write_openfst, write_openfst_bytes
from wfstdecode.testing import lexicon_graph, random_graph, simulate_ctc

FIELDS = ("final_cost", "e_offsets", "ne_offsets", "next_state", "weight", "ilabel", "olabel")


@pytest.fixture
def graph():
    return random_graph(seed=2, num_states=8)


@pytest.fixture
def graph_file(tmp_path, graph):
    path = tmp_path / "TLG.npz"
    graph.save(path)
    return path


def save_arrays(path, graph, compress=False, **overrides):
    """``graph``'s arrays as an .npz, with members replaced (or, given None, left out)."""
    arrays = {name: getattr(graph, name) for name in FIELDS}
    arrays["metadata_json"] = np.array(json.dumps({"format_version": 1, "start": graph.start}))
    arrays.update(overrides)
    arrays = {k: v for k, v in arrays.items() if v is not None}
    (np.savez_compressed if compress else np.savez)(path, **arrays)
    return path


def cli_error(capsys, argv, path) -> str:
    """Run the command line; assert exit 2 with one error line naming ``path``."""
    assert main([str(a) for a in argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    line = captured.err
    assert line.startswith(f"wfstdecode: error: {path}: ") and line.count("\n") == 1, line
    return line


def peak_mb(fn, *args) -> float:
    """Peak traced allocation (NumPy buffers included) while ``fn(*args)`` raises GraphError or
    InputFileError."""
    tracemalloc.start()
    try:
        with pytest.raises((GraphError, InputFileError)):
            fn(*args)
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def flip(data: bytes, pos: int) -> bytes:
    return data[:pos] + bytes([data[pos] ^ 0x10]) + data[pos + 1 :]


def member_data(data: bytes, info: zipfile.ZipInfo) -> int:
    """Where a zip member's (compressed) bytes start: after its local header."""
    name_len, extra_len = struct.unpack(
        "<HH", data[info.header_offset + 26 : info.header_offset + 30]
    )
    return info.header_offset + 30 + name_len + extra_len


# ----- TLG.npz: truncated, empty, bit-flipped, not an .npz -------------------------------------
@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("cut", [0.5, 0.9, -1, 30])
def test_truncated_graph(tmp_path, graph, capsys, compress, cut):
    path = save_arrays(tmp_path / "TLG.npz", graph, compress)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * cut) if isinstance(cut, float) else cut])
    with pytest.raises(GraphError, match="TLG.npz: "):
        DecodingGraph.load(path)
    cli_error(capsys, ["info", path], path)


def test_empty_graph_file(tmp_path, capsys):
    path = tmp_path / "TLG.npz"
    path.write_bytes(b"")
    with pytest.raises(GraphError, match="TLG.npz: the file is empty"):
        DecodingGraph.load(tmp_path)
    cli_error(capsys, ["info", tmp_path], path)


@pytest.mark.parametrize("compress", [False, True])
def test_bit_flipped_graph(tmp_path, graph, capsys, compress):
    path = save_arrays(tmp_path / "TLG.npz", graph, compress)
    data = path.read_bytes()
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("weight.npy")
    path.write_bytes(flip(data, member_data(data, info) + info.compress_size - 5))
    with pytest.raises(GraphError, match=r"TLG.npz: weight is corrupt \((BadZipFile|error)"):
        DecodingGraph.load(path)
    cli_error(capsys, ["info", path], path)


def test_npy_renamed_npz(tmp_path, graph, capsys):
    path = tmp_path / "TLG.npz"
    with open(path, "wb") as f:
        np.save(f, np.zeros(3))
    with pytest.raises(GraphError, match="single .npy array, not an .npz"):
        DecodingGraph.load(path)
    cli_error(capsys, ["info", path], path)
    graph.to_openfst(path)  # a TLG.fst given where the graph goes: said how to give it
    with pytest.raises(GraphError, match="an OpenFst file, not an .npz archive .*graph directory"):
        DecodingGraph.load(path)


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ("{not json", "metadata_json is not valid JSON"),
        ("[1, 2]", "metadata_json is not a JSON object"),
        ("7", "metadata_json is not a JSON object"),
        ("[" * 100_000, "metadata_json is not valid JSON"),
        ('{"start": 0}', "graph format None is not supported"),
        ('{"format_version": 1}', "metadata_json has no start state"),
        ('{"format_version": 1, "start": "0"}', "start state must be an integer; got '0'"),
        ('{"format_version": 1, "start": 0.0}', "start state must be an integer; got 0.0"),
        ('{"format_version": 1, "start": true}', "start state must be an integer; got True"),
        ('{"format_version": 1, "start": null}', "start state must be an integer; got None"),
        ('{"format_version": 1, "start": 99}', "start state 99 outside 0..7"),
        # json reads NaN and Infinity, which save refuses: loaded, info printed them as
        # invalid JSON and the graph could not be saved again
        ('{"format_version": 1, "start": 0, "x": NaN}', "metadata_json holds NaN or Infinity"),
        ('{"format_version": 1, "start": 0, "x": [1e999]}', "metadata_json holds NaN or Inf"),
    ],
)
def test_bad_metadata(tmp_path, graph, capsys, metadata, message):
    path = save_arrays(tmp_path / "TLG.npz", graph, metadata_json=np.array(metadata))
    with pytest.raises(GraphError, match=f"TLG.npz: {re.escape(message)}"):
        DecodingGraph.load(path)
    cli_error(capsys, ["info", path], path)


def test_metadata_of_the_wrong_kind(tmp_path, graph):
    path = save_arrays(tmp_path / "TLG.npz", graph, metadata_json=np.zeros(3))
    with pytest.raises(GraphError, match="metadata_json has dtype float64; expected kind U"):
        DecodingGraph.load(path)


def test_pickled_and_mismatched_members(tmp_path, graph):
    symbols = np.array(["<blk>", "a"], dtype=object)
    path = save_arrays(tmp_path / "p.npz", graph, tokens_symbols=symbols, tokens_ids=np.arange(2))
    with pytest.raises(GraphError, match="tokens_symbols has dtype object"):
        DecodingGraph.load(path)
    path = save_arrays(tmp_path / "m.npz", graph, tokens_symbols=np.array(["<blk>", "a"]),
                       tokens_ids=np.arange(3))  # fmt: skip
    with pytest.raises(GraphError, match=r"tokens_ids has shape \(3,\); expected \(2,\)"):
        DecodingGraph.load(path)
    path = save_arrays(tmp_path / "d.npz", graph, tokens_symbols=np.array(["a", "a"]),
                       tokens_ids=np.arange(2))  # fmt: skip
    with pytest.raises(GraphError, match="d.npz: tokens table: duplicate symbol 'a'"):
        DecodingGraph.load(path)


def test_invalid_unicode_in_a_symbol_table(tmp_path, graph):
    symbols = np.array(["<blk>", "ab"])
    symbols.view(np.uint32)[1] = 0x110000  # tolist() would raise SystemError
    path = save_arrays(tmp_path / "u.npz", graph, tokens_symbols=symbols, tokens_ids=np.arange(2))
    with pytest.raises(GraphError, match="tokens_symbols holds strings that are not valid Unicode"):
        DecodingGraph.load(path)


# ----- graph validation --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("field", "edit", "message"),
    [
        ("olabel", lambda a: _set(a, 3, -2), r"olabel\[3\] is -2: word ids cannot be negative"),
        ("weight", lambda a: _set(a, 1, -np.inf), r"weight\[1\] is -inf: arc weights must"),
        ("weight", lambda a: _set(a, 2, np.inf), r"weight\[2\] is inf: arc weights must"),
        ("weight", lambda a: _set(a, 0, np.nan), r"weight\[0\] is NaN"),
        ("final_cost", lambda a: _set(a, 4, -np.inf), r"final_cost\[4\] is -inf: final costs"),
        ("final_cost", lambda a: _set(a, 4, np.nan), r"final_cost\[4\] is NaN"),
        ("next_state", lambda a: a.reshape(1, -1), r"next_state must be 1-D; got shape \(1, "),
        ("final_cost", lambda a: a[:, None], r"final_cost must be 1-D; got shape \(8, 1\)"),
        ("olabel", lambda a: a.astype(np.int64) + 2**32, "olabel holds .*, outside int32"),
        ("ilabel", lambda a: a.astype(np.float64), "ilabel must hold int32 values; got dtype flo"),
    ],
)
def test_graph_validation(tmp_path, graph, field, edit, message):
    arrays = {name: getattr(graph, name) for name in FIELDS}
    arrays[field] = edit(arrays[field].copy())
    with pytest.raises(GraphError, match=message):
        DecodingGraph(start=graph.start, **arrays)
    path = save_arrays(tmp_path / "TLG.npz", graph, **{field: arrays[field]})
    with pytest.raises(GraphError, match="TLG.npz: "):
        DecodingGraph.load(path)


@pytest.mark.parametrize("start", ["0", 0.0, True, np.float64(0), None, np.bool_(False)])
def test_start_must_be_an_integer(graph, start):
    arrays = {name: getattr(graph, name) for name in FIELDS}
    with pytest.raises(GraphError, match="start state must be an integer"):
        DecodingGraph(start=start, **arrays)
    assert DecodingGraph(start=np.int64(0), **arrays).start == 0


def test_infinite_arcs_are_dropped_from_an_arc_list():
    """OpenFst's Zero weight (+inf) is an arc that can never be taken; -inf is an error."""
    fst = FstArrays(0, [np.inf, 0.0], [0, 0], [1, 1], [1, 2], [0, 0], [0.5, np.inf])
    assert DecodingGraph.from_arrays(fst).num_arcs == 1
    fst.weight[1] = -np.inf
    with pytest.raises(GraphError, match=r"weight\[1\] is -inf"):
        DecodingGraph.from_arrays(fst)


# ----- zip bombs -----------------------------------------------------------------------------
def write_zeros_member(z: zipfile.ZipFile, name: str, dtype, shape) -> None:
    """Stream a deflated all-zero .npy member without holding it in memory."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": np.dtype(dtype).str, "fortran_order": False, "shape": shape}
    )
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    chunk = bytes(1 << 20)
    with z.open(name + ".npy", "w", force_zip64=True) as f:
        f.write(header.getvalue())
        for pos in range(0, nbytes, len(chunk)):
            f.write(chunk[: min(len(chunk), nbytes - pos)])


def bomb_graph(path, graph, extra=(), **members):
    """``graph`` saved deflated, members given as (dtype, shape) written as streamed zeros."""
    save_arrays(path, graph, compress=True, **dict.fromkeys(members))
    with zipfile.ZipFile(path, "a", zipfile.ZIP_DEFLATED) as z:
        for name, (dtype, shape) in [*members.items(), *extra]:
            write_zeros_member(z, name, dtype, shape)
    return path


def test_zip_bomb_member_larger_than_the_graph(tmp_path, graph):
    """A weight array of 12 M floats (48 MB: under the expansion floor) in a ~50 KB file, for a
    graph of 40-odd arcs: refused by its header's shape, before it is decompressed."""
    path = bomb_graph(tmp_path / "TLG.npz", graph, weight=("<f4", (12 << 20,)))
    assert path.stat().st_size < 100_000
    with pytest.raises(GraphError, match=r"weight has shape \(12582912,\); expected \(\d+,\)"):
        DecodingGraph.load(path)
    assert peak_mb(DecodingGraph.load, path) < 5


def test_zip_bomb_of_a_consistent_empty_graph(tmp_path, graph):
    """20 M states, no arcs, all zeros: consistent, but 400 MB from a ~400 KB file."""
    n = 20_000_000
    sizes = {"final_cost": ("<f4", (n,)), "e_offsets": ("<i8", (n + 1,)),
             "ne_offsets": ("<i8", (n + 1,))}  # fmt: skip
    path = bomb_graph(tmp_path / "TLG.npz", graph, **sizes,
                      **{f: ("<i4", (0,)) for f in ("next_state", "ilabel", "olabel")},
                      weight=("<f4", (0,)))  # fmt: skip
    with pytest.raises(GraphError, match="refused as a likely zip bomb"):
        DecodingGraph.load(path)
    assert peak_mb(DecodingGraph.load, path) < 5


def test_unknown_members_are_never_decompressed(tmp_path, graph):
    path = bomb_graph(tmp_path / "TLG.npz", graph, extra=[("junk", ("<f8", (32 << 20,)))])
    tracemalloc.start()
    try:
        loaded = DecodingGraph.load(path)
        assert tracemalloc.get_traced_memory()[1] < 5 << 20
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(loaded.weight, graph.weight)


def test_header_promising_more_than_the_member_holds(tmp_path, graph):
    """A .npy header claiming 1e9 floats, in a member of 200 bytes: refused, not allocated."""
    path = save_arrays(tmp_path / "TLG.npz", graph)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f4", "fortran_order": False, "shape": (10**9,)}
    )
    members = {}
    with zipfile.ZipFile(path) as z:
        members = {i.filename: z.read(i) for i in z.infolist()}
    members["final_cost.npy"] = header.getvalue() + bytes(200)
    with zipfile.ZipFile(path, "w") as z:
        for name, body in members.items():
            z.writestr(name, body)
    with pytest.raises(GraphError, match="declares 4,000,000,000 bytes .* entry holds 200"):
        DecodingGraph.load(path)
    assert peak_mb(DecodingGraph.load, path) < 5


def test_stored_member_larger_than_the_file(tmp_path, graph):
    path = save_arrays(tmp_path / "TLG.npz", graph)
    data = bytearray(path.read_bytes())
    central = data.index(b"PK\x01\x02")  # the first member's central directory record
    data[central + 24 : central + 28] = struct.pack("<I", 2**31)  # its uncompressed size
    path.write_bytes(bytes(data))
    with pytest.raises(GraphError, match=r"declares 2,147,483,648 bytes \(\d+ compressed\)"):
        DecodingGraph.load(path)


def test_log_probs_bomb(tmp_path):
    path = tmp_path / "e.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        write_zeros_member(z, "log_probs", "<f4", (100, 1000, 1000))
    with pytest.raises(InputFileError, match="e.npz: .*refused as a likely zip bomb"):
        load_log_probs_npz(path)
    assert peak_mb(load_log_probs_npz, path) < 5


# ----- OpenFst binary ------------------------------------------------------------------------
def fst_header(fst_type: str, num_states: int, num_arcs: int, start: int = 0, flags=0) -> bytes:
    def string(s):
        return struct.pack("<i", len(s)) + s.encode()

    return (struct.pack("<i", 2125659606) + string(fst_type) + string("standard")
            + struct.pack("<iiQqqq", 2, flags, 3, start, num_states, num_arcs))  # fmt: skip


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (fst_header("vector", 2**40, 0), "bad number of states 1099511627776"),
        (fst_header("vector", -1, 0), "bad number of states -1"),
        (fst_header("vector", 10**6, 0) + bytes(100), "truncated OpenFst file"),
        (fst_header("vector", 1, 1) + struct.pack("<fq", 0.0, -5), "state 0 claims -5 arcs"),
        (fst_header("vector", 1, 1) + struct.pack("<fq", 0.0, 2**62), "claims 4611686018427387904"),
        (fst_header("vector", 1, 0, start=-1) + struct.pack("<fq", 0.0, 0), "start state -1"),
        (fst_header("const", 1, 0) + struct.pack("<fIIII", 0.0, 0, 2**31, 0, 0),
         "state records do not match the 0 arcs"),
    ],
    ids=["huge-states", "negative-states", "short", "negative-arcs", "huge-arcs", "no-start",
         "const-counts"],
)  # fmt: skip
def test_corrupt_openfst(tmp_path, body, message):
    path = tmp_path / "TLG.fst"
    path.write_bytes(body)
    with pytest.raises(GraphError, match=f"TLG.fst: .*{message}"):
        DecodingGraph.from_openfst(path)
    assert peak_mb(read_openfst, path) < 5


def test_openfst_graph_errors_name_the_file(tmp_path):
    write_openfst(FstArrays(0, [0.0], [0], [0], [0], [-3], [0.0]), tmp_path / "neg.fst")
    with pytest.raises(GraphError, match=r"neg.fst: olabel\[0\] is -3"):
        DecodingGraph.from_openfst(tmp_path / "neg.fst")


def test_const_fst_round_trip(tmp_path, graph):
    data = write_openfst_bytes(graph.to_arrays(), "const")
    (tmp_path / "c.fst").write_bytes(data)
    back = DecodingGraph.from_openfst(tmp_path / "c.fst")
    for name in FIELDS:
        np.testing.assert_array_equal(getattr(back, name), getattr(graph, name))


# ----- build.json for `wfstdecode info` ------------------------------------------------------
@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "the file is not valid JSON"),
        (b"\xff\xfe{}", "not UTF-8 text"),
        (b"[1, 2]", "the file is not a JSON object"),
        (b'{"stages": 3}', "'stages' must be a list of objects"),
        (b'{"stages": [{"stage": "L"}]}', "'stages' must be a list of objects"),
        (b'{"stages": [{"stage": "L", "states": "9", "arcs": 1, "seconds": 1, "peak_rss_mb": 1}]}',
         "'stages' must be a list"),
        (b"[" * 100_000, "the file is not valid JSON"),
    ],
)  # fmt: skip
def test_corrupt_build_json(tmp_path, graph_file, capsys, content, message):
    report = tmp_path / "build.json"
    report.write_bytes(content)
    assert message in cli_error(capsys, ["info", tmp_path], report)


def test_good_build_json(tmp_path, graph_file, capsys):
    stage = {"stage": "TLG", "states": 8, "arcs": 40, "seconds": 0.5, "peak_rss_mb": 80.0}
    (tmp_path / "build.json").write_text(json.dumps({"stages": [stage]}))
    assert main(["info", str(tmp_path)]) == 0
    assert "TLG" in capsys.readouterr().out


# ----- log-prob .npz for `wfstdecode decode` -------------------------------------------------
@pytest.fixture
def decode_setup(tmp_path):
    graph = lexicon_graph(["ab", "ba"], tokens=["<blk>", "a", "b"])
    graph.save(tmp_path / "TLG.npz")
    lp, lengths = simulate_ctc([[1, 2], [2, 1]], 3, seed=0)
    return tmp_path / "TLG.npz", lp, lengths


def decode(graph_path, lp_path, *extra):
    return ["decode", graph_path, lp_path, "--backend", "reference", *extra]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda data: data[: len(data) // 2], "not an .npz archive"),
        (lambda data: b"", "the file is empty"),
        (lambda data: flip(data, len(data) // 3), "corrupt"),
    ],
)
def test_corrupt_log_probs(tmp_path, decode_setup, capsys, make, message):
    graph_path, lp, lengths = decode_setup
    path = tmp_path / "e.npz"
    np.savez(path, log_probs=lp, lengths=lengths)
    path.write_bytes(make(path.read_bytes()))
    with pytest.raises(InputFileError, match="e.npz: "):
        load_log_probs_npz(path)
    assert message in cli_error(capsys, decode(graph_path, path), path)


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"log_probs": np.zeros((2, 3))}, r"log_probs has shape \(2, 3\); expected 3 dim"),
        ({"log_probs": np.zeros((1, 2, 3), object)}, "log_probs has dtype object"),
        ({"log_probs": np.zeros((1, 2, 0))}, "no token columns"),
        ({"log_probs": np.zeros((1, 2, 3)), "texts": np.array(["a", "b"])},
         r"texts has shape \(2,\); expected \(1,\)"),
        ({"log_probs": np.zeros((1, 2, 3)), "lengths": np.array([1.5])},
         "lengths has dtype float64"),
        ({"log_probs": np.zeros((1, 2, 3)), "tokens": np.array(["a", "b"])},
         r"tokens has shape \(2,\); expected \(3,\)"),
        ({"log_probs": np.zeros((2, 2, 3)), "lengths": np.array([2, 3])},
         r"lengths\[1\] = 3 is outside 0..T=2"),
        ({"log_probs": np.zeros((1, 2, 3)), "lengths": np.array([2**64 - 1], np.uint64)},
         r"lengths\[0\] = 18446744073709551615 is outside"),
        ({"log_probs": np.zeros((12, 2, 3)), "lengths": np.array([2, 1])},
         r"lengths has shape \(2,\); expected \(12,\) \(log_probs read as 12 utterances of 2 "
         r"frames: is it time-major, \(T, B, V\)\?"),
        ({"log_probs": np.zeros((1, 2, 3)), "lengths": np.array([[2]])},
         r"lengths has shape \(1, 1\); expected 1 dim"),
    ],
)  # fmt: skip
def test_inconsistent_log_probs(tmp_path, decode_setup, capsys, arrays, message):
    path = tmp_path / "e.npz"
    np.savez(path, **arrays)
    with pytest.raises(InputFileError, match=message):
        load_log_probs_npz(path)
    cli_error(capsys, decode(decode_setup[0], path), path)


@pytest.mark.parametrize(
    "header",
    [
        "{'descr': ',U5', 'fortran_order': False, 'shape': (1, 1, 5), }",  # SyntaxError in numpy
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 5), ",  # TokenError in numpy
        "{'descr': '<U0', 'fortran_order': False, 'shape': (1, 1000000000000, 1), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 2, 2), }",
        "{'descr': [('a', 'O')], 'fortran_order': False, 'shape': (1, 1, 1), }",
    ],
    ids=["dtype-syntax", "unterminated", "zero-itemsize", "negative-shape", "object-field"],
)
def test_hostile_npy_headers(tmp_path, header):
    text = header.encode("latin1")
    text += b" " * (-(len(text) + 11) % 64) + b"\n"
    path = tmp_path / "e.npz"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("log_probs.npy", b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text)
    with pytest.raises(InputFileError, match="e.npz: log_probs "):
        load_log_probs_npz(path)


def test_log_probs_npy_renamed(tmp_path, decode_setup, capsys):
    path = tmp_path / "e.npz"
    with open(path, "wb") as f:
        np.save(f, decode_setup[1])
    assert "single .npy array" in cli_error(capsys, decode(decode_setup[0], path), path)


@pytest.mark.parametrize("text", [False, True])
def test_a_kaldi_archive_without_its_specifier_is_named(tmp_path, decode_setup, capsys, text):
    """A Kaldi archive named without .ark (Kaldi's `feats`) was read as an .npz and refused
    with zipfile's BadZipFile; the error now says what it looks like and how to name it."""
    path = tmp_path / "feats"
    m = np.zeros((2, 3), np.float32)
    path.write_bytes(b"utt-1  [\n  0 -1 \n ]\n" if text else b"utt-1 \0BFM " + struct.pack(
        "<bibi", 4, m.shape[0], 4, m.shape[1]) + m.tobytes())  # fmt: skip
    err = cli_error(capsys, decode(decode_setup[0], path), path)
    assert f"looks like a Kaldi archive, not an .npz archive (log-probs: name it ark:{path})" in err


def test_missing_files_name_the_file(tmp_path, decode_setup, capsys):
    cli_error(capsys, decode(decode_setup[0], tmp_path / "no.npz"), tmp_path / "no.npz")
    cli_error(capsys, ["info", tmp_path / "nodir"], tmp_path / "nodir")


# ----- utterance ids in `wfstdecode decode` output --------------------------------------------
def test_utterance_ids_are_escaped(tmp_path, decode_setup, capsys):
    graph_path, lp, lengths = decode_setup
    ids = ["a\tb", "line\nbreak\\"]
    path = tmp_path / "e.npz"
    np.savez(path, log_probs=lp, lengths=lengths, ids=np.array(ids))
    assert main([str(a) for a in decode(graph_path, path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[0] for line in lines] == ["a\\tb", "line\\nbreak\\\\"]
    assert [line.split("\t")[2] for line in lines] == ["ab", "ba"]
    ids = ["esc\x1b[31m", "sep\u2028x", "café"]
    np.savez(path, log_probs=np.concatenate([lp, lp[:1]]), lengths=[*lengths, lengths[0]],
             ids=np.array(ids))  # fmt: skip
    assert main([str(a) for a in decode(graph_path, path, "--nbest", "2")]) == 0
    tags = {line.split("\t")[0] for line in capsys.readouterr().out.splitlines()}
    assert {"esc\\x1b[31m-1", "sep\\u2028x-1", "café-1"} <= tags


def test_decode_help_documents_the_escapes(capsys):
    with pytest.raises(SystemExit):
        main(["decode", "--help"])
    assert "Python escapes" in " ".join(capsys.readouterr().out.split())


def _set(a, i, v):
    a[i] = v
    return a


def test_version_and_top_level_help(capsys):
    import wfstdecode

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert (
        exit_.value.code == 0
        and capsys.readouterr().out == f"wfstdecode {wfstdecode.__version__}\n"
    )
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "``" not in capsys.readouterr().out  # (a user's description, not the module's docstring)


def test_a_json_file_beyond_the_size_limit_is_not_read(tmp_path, monkeypatch):
    """A huge metadata file (build.json, a graph's JSON) is refused by its size, unread."""
    from wfstdecode import safe_io

    path = tmp_path / "build.json"
    path.write_text('{"a": "xxxxxxxxxxxxxxxxxxxx"}')
    assert safe_io.read_json_file(path, GraphError) == {"a": "x" * 20}
    monkeypatch.setattr(safe_io, "MAX_JSON_BYTES", 10)
    with pytest.raises(GraphError, match="larger than 10 bytes"):
        safe_io.read_json_file(path, GraphError)


def test_a_gzip_bomb_of_a_kaldi_table_is_refused_while_it_is_decompressed(tmp_path, monkeypatch):
    """A gzip-compressed Kaldi archive (``lat.1.gz``, ``feats.ark.gz``) expands at most as far
    as an ``.npz`` may: gzip members of zeros (~1000x each, concatenated without limit) asked
    for gigabytes from a few MB before the first key was read."""
    import gzip

    from wfstdecode import safe_io
    from wfstdecode.kaldi_matrices import read_kaldi_matrices

    monkeypatch.setattr(safe_io, "EXPANSION_FLOOR", 1 << 20)  # (a small bomb for the test)
    good = tmp_path / "m.ark.gz"
    good.write_bytes(gzip.compress(b"utt1 [ 1 2\n 3 4 ]\nutt2 [ 5 6 ]\n"))
    got = read_kaldi_matrices(f"ark:{good}")
    assert list(got) == ["utt1", "utt2"] and got["utt1"].tolist() == [[1, 2], [3, 4]]
    bomb = tmp_path / "bomb.ark.gz"
    bomb.write_bytes(gzip.compress(bytes(8 << 20)) * 4)  # 32 MB of zeros from ~32 KB
    with pytest.raises(
        InputFileError,
        match=r"bomb.ark.gz: gzip-compressed, and expands past "
        r"[0-9,]+ bytes from [0-9,]+, over 100x: .*bomb",
    ):
        read_kaldi_matrices(f"ark:{bomb}")
    assert peak_mb(read_kaldi_matrices, f"ark:{bomb}") < 20  # (the limit, and a 4 MB chunk)


@pytest.mark.parametrize("table", ["words", "tokens"])
def test_a_graph_file_with_a_symbol_id_far_above_its_table_is_refused(tmp_path, graph, table):
    """A graph's symbol tables are held to `SymbolTable.read`'s proportion of ids to symbols:
    an id of 2^31 - 2^20 in a 4 KB file made the graph's checks allocate 2 GB (a table of
    which ids are listed), and a token table that wide asks for 2^31 log-prob columns."""
    n = int(max(graph.olabel.max(), graph.ilabel.max())) + 1
    symbols = np.array([f"s{i}" for i in range(n)] + ["far"])
    ids = np.array([*range(n), 2**31 - 2**20])
    path = save_arrays(tmp_path / "TLG.npz", graph, **{f"{table}_symbols": symbols,
                                                      f"{table}_ids": ids})  # fmt: skip
    with pytest.raises(GraphError, match=rf"TLG.npz: {table} table: id 2,146,435,072 is far "
                                         rf"above the table's {n + 1} symbols"):  # fmt: skip
        DecodingGraph.load(path)
    assert peak_mb(DecodingGraph.load, path) < 5
