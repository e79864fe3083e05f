"""Bad and hostile input to the text loaders (ARPA, lexicon, symbol tables): a byte-order mark is
accepted, everything else wrong is an `InputFileError` naming the file and the 1-based line."""

import gzip
import io
import logging

import pytest

from wfstdecode import GraphError, InputFileError, SymbolTable
from wfstdecode.cli import main
from wfstdecode.graph import build_lexicon_fst, build_tlg, read_arpa, read_lexicon
from wfstdecode.graph.grammar import read_arpa_unigrams, read_arpa_vocabulary
from wfstdecode.graph.lexicon import LexiconEntry, spell_lexicon
from wfstdecode.graph.tlg import make_word_table
from wfstdecode.testing.data import PACKAGE_DATA
from wfstdecode.testing.lm import random_arpa
from wfstdecode.textfiles import MAX_LINE_CHARS

TOKENS = PACKAGE_DATA / "tokens.txt"
BOM = b"\xef\xbb\xbf"
ARPA = (
    "\\data\\\nngram 1=4\nngram 2=2\n\n"
    "\\1-grams:\n-1.0\t<s>\t-0.5\n-1.0\t</s>\n-0.5\tcafe\t-0.3\n-0.7\tb\n\n"
    "\\2-grams:\n-0.2\t<s> cafe\n-0.3\tcafe b\n\n\\end\\\n"
)
ARPA_READERS = [read_arpa, read_arpa_vocabulary, read_arpa_unigrams]


def write(path, data: str | bytes):
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def raises_at(line, match, fn, path, *args, **kwargs):
    """``fn(path, …)`` raises an `InputFileError` for ``path`` at ``line`` matching ``match``."""
    with pytest.raises(InputFileError, match=match) as info:
        fn(path, *args, **kwargs)
    assert info.value.path == str(path) and info.value.line_no == line
    assert str(info.value).startswith(f"{path}:{line}: " if line else f"{path}: ")
    return info.value


def unigram_arpa_gz() -> bytes:
    """A gzip stream of many unigrams: damage half-way is inside the unigram section, where
    all three readers read."""
    words = [f"w{i}" for i in range(5000)]
    return gzip.compress(random_arpa(words, order=1, seed=1).encode(), mtime=0)


# --- ARPA: compressed data, encodings, structure ---------------------------------------------


@pytest.mark.parametrize("reader", ARPA_READERS)
def test_truncated_arpa_gz(tmp_path, reader):
    data = unigram_arpa_gz()
    path = write(tmp_path / "lm.arpa.gz", data[: len(data) // 2])
    with pytest.raises(InputFileError, match="truncated or corrupt gzip data") as info:
        reader(path)
    # The first line it could not read, after those it did (which depends on the read-ahead).
    assert info.value.path == str(path) and info.value.line_no > 100


@pytest.mark.parametrize("reader", ARPA_READERS)
def test_corrupt_arpa_gz(tmp_path, reader):
    data = bytearray(unigram_arpa_gz())
    data[10] |= 0b110  # the first deflate block's type becomes 3, which is reserved
    path = write(tmp_path / "lm.arpa.gz", bytes(data))
    raises_at(1, "corrupt gzip data .*invalid block type", reader, path)


def test_gzip_magic_with_a_bad_header(tmp_path):
    path = write(tmp_path / "lm.arpa.gz", b"\x1f\x8b\x07" + b"\x00" * 20)
    raises_at(1, "corrupt gzip data .*Unknown compression method", read_arpa, path)


def test_gz_name_is_not_trusted(tmp_path):
    plain = write(tmp_path / "plain.arpa.gz", ARPA)  # not compressed despite the name: fine
    assert read_arpa(plain).counts() == [4, 2]
    junk = write(tmp_path / "junk.arpa.gz", bytes(range(256)) * 4)
    raises_at(3, "byte 0x80 at column 115 is not UTF-8", read_arpa, junk)  # bytes 10, 13 end lines


@pytest.mark.parametrize("reader", ARPA_READERS)
@pytest.mark.parametrize("compress", [False, True])
def test_latin1_arpa_names_line_and_byte(tmp_path, reader, compress):
    data = ARPA.replace("cafe", "café").encode("latin-1")
    path = write(tmp_path / "lm.arpa", gzip.compress(data) if compress else data)
    raises_at(8, "byte 0xe9 at column 9 is not UTF-8: the ARPA file must be UTF-8", reader, path)


def test_arpa_with_only_data_and_end(tmp_path):
    path = write(tmp_path / "lm.arpa", "\\data\\\n\\end\\\n")
    raises_at(1, "declares no n-gram counts", read_arpa, path)
    path = write(tmp_path / "lm2.arpa", "comment\n\n\\data\\\n\n\\end\\\n")
    raises_at(3, "declares no n-gram counts", read_arpa, path)


def test_empty_arpa(tmp_path):
    for reader in (read_arpa, read_arpa_vocabulary):
        raises_at(None, "not an ARPA file", reader, write(tmp_path / "lm.arpa", ""))
    raises_at(None, "the file is empty", read_arpa, tmp_path / "lm.arpa")


def test_count_line_disagrees_with_the_lines(tmp_path):
    path = write(tmp_path / "lm.arpa", ARPA.replace("ngram 2=2", "ngram 2=5"))
    raises_at(
        None, r"line 3 declares ngram 2=5 but the \\2-grams: section holds 2", read_arpa, path
    )


def test_missing_order_section(tmp_path):
    text = ARPA.replace("ngram 2=2\n", "ngram 2=2\nngram 3=1\n")
    path = write(tmp_path / "lm.arpa", text)
    raises_at(
        16, r"declares orders \[1, 2, 3\] but the file has no \\3-grams: section", read_arpa, path
    )


@pytest.mark.parametrize(
    "old,new,line,match",
    [
        ("-0.7\tb", "-0.7e\tb", 9, "bad number '-0.7e'"),
        ("-0.5\tcafe\t-0.3", "-0.5\tcafe\t0x1", 8, "bad number '0x1'"),
        ("-0.7\tb", "nan\tb", 9, "finite and <= 0"),
        ("-0.3\tcafe b", "-1e999\tcafe b", 13, "finite and <= 0"),
        ("ngram 2=2", "ngram 2=" + "9" * 5000, 3, "expected 'ngram N=count'"),  # int() refuses
        ("ngram 2=2", "ngram 2=2\nngram 2=2", 4, "second count for 2-grams"),
        ("\\2-grams:", "\\" + "7" * 5000 + "-grams:", 11, r"unexpected section .*expected \\2"),
        ("\\2-grams:", "\\1-grams:", 11, r"unexpected section '\\\\1-grams:': expected \\2"),
    ],
)
def test_malformed_arpa_lines(tmp_path, old, new, line, match):
    path = write(tmp_path / "lm.arpa", ARPA.replace(old, new))
    raises_at(line, match, read_arpa, path)


def test_malformed_unigram_when_reading_the_vocabulary(tmp_path):
    path = write(tmp_path / "lm.arpa", ARPA.replace("-0.7\tb", "-0.7\tb\tx\ty"))
    raises_at(9, "a 1-gram line needs 2 or 3 fields", read_arpa_vocabulary, path)
    path = write(tmp_path / "lm2.arpa", ARPA.replace("-0.7\tb", "oops\tb"))
    raises_at(9, "bad number 'oops'", read_arpa_vocabulary, path)


# --- ARPA: repeated n-grams --------------------------------------------------------------------


def test_repeated_ngram_with_other_values_is_refused(tmp_path):
    text = ARPA.replace("ngram 2=2", "ngram 2=3").replace(
        "-0.3\tcafe b", "-0.3\tcafe b\n-0.4\tcafe b"
    )
    path = write(tmp_path / "lm.arpa", text)
    raises_at(
        14, r"2-gram 'cafe b' appears again with other values .*\(-0.4, 0.0\)", read_arpa, path
    )


def test_identical_repeats_warn_with_count_and_first_line(tmp_path, caplog):
    text = ARPA.replace("ngram 1=4", "ngram 1=6").replace("-0.7\tb", "-0.7\tb\n-0.7\tb\n-0.7\tb")
    path = write(tmp_path / "lm.arpa", text)
    with caplog.at_level(logging.WARNING, logger="wfstdecode.graph.grammar"):
        model = read_arpa(path)
    assert model.counts() == [4, 2]
    assert f"{path}: 2 n-gram line(s) repeat an earlier identical line (the first is line 10)" in (
        caplog.text
    )


def test_repeats_are_named_when_the_count_is_off(tmp_path):
    path = write(tmp_path / "lm.arpa", ARPA.replace("-0.7\tb", "-0.7\tb\n-0.7\tb"))
    raises_at(
        None, r"declares ngram 1=4 .* holds 5; 1 n-gram line\(s\) repeat .*line 10", read_arpa, path
    )


# --- byte-order marks ------------------------------------------------------------------------


@pytest.mark.parametrize("compress", [False, True])
def test_bom_arpa(tmp_path, compress):
    data = BOM + ARPA.encode()
    path = write(tmp_path / "lm.arpa", gzip.compress(data) if compress else data)
    assert read_arpa(path).counts() == [4, 2]
    assert read_arpa_vocabulary(path) == ["<s>", "</s>", "cafe", "b"]


def test_bom_lexicon_and_tokens(tmp_path):
    tokens = SymbolTable.read(write(tmp_path / "tokens.txt", BOM + b"<blk> 0\na 1\nb 2\n"))
    assert tokens.symbols() == ["<blk>", "a", "b"]
    entries = read_lexicon(write(tmp_path / "lexicon.txt", BOM + b"ab a b\nba b a\n"), tokens)
    assert [e.word for e in entries] == ["ab", "ba"]
    # Only a leading mark is one; elsewhere U+FEFF is part of a symbol.
    path = write(tmp_path / "lexicon2.txt", b"ab a b\n" + BOM + b"ba b a\n")
    assert [e.word for e in read_lexicon(path, tokens)] == ["ab", "\ufeffba"]


# --- lexicon ---------------------------------------------------------------------------------

LEX_TOKENS = "<blk> 0\na 1\nb 2\n| 3\n<eps> 4\n<blank> 5\n#1 6\n"


@pytest.mark.parametrize(
    "token,match",
    [
        ("<blk>", "'<blk>', which spells nothing"),
        ("<blank>", "'<blank>', which spells nothing"),
        ("<eps>", "'<eps>', which spells nothing"),
        ("#1", "the disambiguation symbol '#1'.*lexicon_disambig"),
    ],
)
def test_lexicon_refuses_reserved_tokens(tmp_path, token, match):
    tokens = SymbolTable.read(write(tmp_path / "tokens.txt", LEX_TOKENS))
    path = write(tmp_path / "lexicon.txt", f"ab a b\n\nba b {token} a\n")
    raises_at(3, f"pronunciation of 'ba' holds {match}", read_lexicon, path, tokens)


def test_lexicon_refuses_the_separator_naming_the_line(tmp_path):
    tokens = SymbolTable.read(write(tmp_path / "tokens.txt", LEX_TOKENS))
    lexicon = read_lexicon(write(tmp_path / "lexicon.txt", "ab a b\nab_ba a b | b a\n"), tokens)
    # Found before the ARPA is read (this one does not even exist).
    with pytest.raises(InputFileError, match=r"lexicon.txt:2: .*'ab_ba' holds the word separator"):
        build_tlg(tokens, lexicon, str(tmp_path / "missing.arpa"), separator="|")
    build_lexicon_fst(lexicon, tokens, make_word_table(lexicon))  # no separator: an ordinary token
    made = [LexiconEntry("ab", ("a", "b")), LexiconEntry("a|b", ("a", "|", "b"))]
    with pytest.raises(GraphError, match="'a\\|b' holds the word separator '\\|'"):
        build_lexicon_fst(made, tokens, make_word_table(made), separator="|")


@pytest.mark.parametrize("space", ["\u00a0", "\u3000", "\u2009"])
def test_lexicon_refuses_a_space_no_symbol_table_holds(tmp_path, space):
    """'a<NBSP>b a b' was read as the word 'a' spelled 'b a b' (str.split splits there, the ARPA
    reader and Kaldi do not): a wrong pronunciation, silently."""
    tokens = SymbolTable.read(write(tmp_path / "tokens.txt", LEX_TOKENS))
    path = write(tmp_path / "lexicon.txt", f"ab a b\na{space}b a b\n")
    raises_at(2, f"U\\+{ord(space):04X} \\(a space other than", read_lexicon, path, tokens)


def test_spelled_lexicon_skips_words_holding_the_separator():
    tokens = SymbolTable.from_list(["<blk>", "a", "b", "|"])
    entries, skipped = spell_lexicon(["ab", "a|b", "abc"], tokens, separator="|")
    assert [e.word for e in entries] == ["ab"] and skipped == ["a|b", "abc"]


def test_latin1_lexicon(tmp_path):
    tokens = SymbolTable.from_list(["<blk>", "a", "b", "é"])
    path = write(tmp_path / "lexicon.txt", "ab a b\nbé b é\n".encode("latin-1"))
    raises_at(
        2,
        "byte 0xe9 at column 2 is not UTF-8: the lexicon must be UTF-8",
        read_lexicon,
        path,
        tokens,
    )


# --- symbol tables ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content,line,match",
    [
        (b"<blk> 0\na -1\n", 2, r"'a' has id -1: ids must be in \[0, "),
        (b"<blk> 0\na 1000000000000\n", 2, r"expected 'symbol id' \(id in \[0, 2146435072\]\)"),
        (b"<blk> 0\na 9999999999\n", 2, "'a' has id 9999999999"),
        (b"<blk> 0\na --5\n", 2, "expected 'symbol id'"),  # int() refuses
        ("<blk> 0\na ²\n".encode(), 2, "expected 'symbol id'"),  # a digit to isdigit(), not int()
        (b"<blk> 0\na 1\nb " + b"7" * 5000 + b"\n", 3, "expected 'symbol id'"),
        (b"<blk> 0\na 1\nb 1000000\nc 2\n", 3, "id 1,000,000 is far above the table's 4 symbols"),
        (b"<blk> 0\n\xe9 1\n", 2, "byte 0xe9 at column 1 is not UTF-8: the symbol table must"),
    ],
)
def test_bad_symbol_tables(tmp_path, content, line, match):
    raises_at(line, match, SymbolTable.read, write(tmp_path / "tokens.txt", content))


def test_sparse_but_plausible_ids_are_kept(tmp_path):
    table = SymbolTable.read(write(tmp_path / "words.txt", "<eps> 0\na 5\nb 60000\n"))
    assert table.next_id == 60001


# --- any text file: line length, unreadable paths --------------------------------------------


@pytest.mark.parametrize("compress", [False, True])
def test_overlong_line_is_refused_without_reading_it_all(tmp_path, compress):
    data = b"\\data\\\n" + b"x" * (8 * MAX_LINE_CHARS)  # inflates 1000-fold when compressed
    path = write(tmp_path / "lm.arpa", gzip.compress(data) if compress else data)
    raises_at(2, "line longer than 1,048,576 characters: not a valid ARPA file", read_arpa, path)
    raises_at(1, "line longer than", SymbolTable.read, write(tmp_path / "t", b"a" * 2**21))


def test_directory_instead_of_a_file(tmp_path):
    raises_at(None, "cannot read the lexicon", read_lexicon, tmp_path, SymbolTable.read(TOKENS))
    raises_at(None, "cannot read the symbol table", SymbolTable.read, tmp_path)


# --- the command line ------------------------------------------------------------------------


@pytest.mark.parametrize("source", [["--lexicon", "LEXICON"], ["--chars"]])
def test_cli_reports_a_truncated_arpa_gz(tmp_path, capsys, source):
    data = unigram_arpa_gz()
    arpa = write(tmp_path / "lm.arpa.gz", data[: len(data) // 2])
    lexicon = write(tmp_path / "lexicon.txt", "w1 w\nw2 w w\n")
    source = [str(lexicon) if s == "LEXICON" else s for s in source]
    out = tmp_path / "graph"
    args = ["build-tlg", "--tokens", str(TOKENS), *source, "--arpa", str(arpa), "--out", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"wfstdecode: error: {arpa}:") and "truncated or corrupt gzip" in err
    assert "Traceback" not in err and not out.exists()


def test_cli_reports_a_latin1_arpa_with_chars(tmp_path, capsys):
    arpa = write(tmp_path / "lm.arpa", ARPA.replace("cafe", "café").encode("latin-1"))
    out = tmp_path / "graph"
    args = ["build-tlg", "--tokens", str(TOKENS), "--chars", "--arpa", str(arpa), "--out", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"wfstdecode: error: {arpa}:8: byte 0xe9") and "UTF-8" in err


@pytest.mark.parametrize("compressed", [False, True])
def test_text_inputs_read_from_a_pipe_whole(compressed):
    """`<(zcat …)`, /dev/stdin: a pipe cannot be opened twice; reading its first bytes to see
    whether it is gzip used to swallow the first 8 KiB (a lexicon lost ~200 words, an ARPA its
    \\data\\ header). Now the file is opened once and its magic bytes only peeked."""
    import os
    import threading

    data = (PACKAGE_DATA / "lexicon.txt").read_bytes()
    payload = gzip.compress(data) if compressed else data
    read_end, write_end = os.pipe()

    def write():
        with open(write_end, "wb") as w:
            w.write(payload)

    writer = threading.Thread(target=write)
    writer.start()
    tokens = SymbolTable.read(PACKAGE_DATA / "tokens.txt")
    try:
        piped = read_lexicon(f"/dev/fd/{read_end}", tokens)  # as a shell's <(...) names it
    finally:
        writer.join()
        os.close(read_end)
    want = read_lexicon(PACKAGE_DATA / "lexicon.txt", tokens)
    assert [(e.word, e.tokens) for e in piped] == [(e.word, e.tokens) for e in want]
    assert len(piped) == 5000


def _arpa_file(tmp_path, text: str) -> str:
    path = tmp_path / f"lm{len(list(tmp_path.iterdir()))}.arpa"
    path.write_text(text)
    return str(path)


def test_lexicon_words_the_lm_lacks_are_reported(tmp_path, caplog):
    """A lexicon word with no unigram in the ARPA is in words.txt but on no path: said, with
    examples; a lexicon none of whose words the ARPA has is refused (it built a graph that
    decodes everything to nothing)."""
    tokens = SymbolTable.from_list(["<blk>", "a", "b", "d", "|"])
    lexicon = [LexiconEntry(w, tuple(w)) for w in ("ab", "ba", "dd")]
    arpa = random_arpa(["ab", "ba", "zz"], order=2, seed=1)
    with caplog.at_level(logging.WARNING):
        build_tlg(tokens, lexicon, _arpa_file(tmp_path, arpa), "compact", separator="|")
    assert "1 lexicon words are not in the ARPA, so no path outputs them: dd" in caplog.text
    only_bounds = "\\data\\\nngram 1=2\n\n\\1-grams:\n-1.0 <s>\n-1.0 </s>\n\n\\end\\\n"
    with pytest.raises(GraphError, match="no lexicon word is in the ARPA file's n-grams"):
        build_tlg(tokens, lexicon, _arpa_file(tmp_path, only_bounds), "compact", separator="|")


@pytest.mark.parametrize("separator", ["<blk>", "#0"])
def test_a_separator_the_model_never_emits_is_refused(tmp_path, separator):
    tokens = SymbolTable.from_list(["<blk>", "a", "b", "#0", "|"])
    lexicon = [LexiconEntry(w, tuple(w)) for w in ("ab", "ba")]
    with pytest.raises(GraphError, match="is not a token the model emits"):
        build_tlg(tokens, lexicon, _arpa_file(tmp_path, random_arpa(["ab", "ba"], seed=1)),
                  "compact", separator=separator)  # fmt: skip


class _FailingRaw(io.RawIOBase):
    """A file whose first read gives one line and whose next read fails (EIO)."""

    def __init__(self):
        self.reads = 0

    def readable(self):
        return True

    def readinto(self, b):
        self.reads += 1
        if self.reads > 1:
            raise OSError(5, "Input/output error")
        data = b"first line\n"
        b[: len(data)] = data
        return len(data)


def test_a_read_error_names_the_line_that_could_not_be_read(monkeypatch):
    """textfiles.py:211 `line_no + 1` -> `line_no`: an I/O error after line 1 names line 2."""
    from wfstdecode import textfiles

    monkeypatch.setattr(
        textfiles, "open", lambda path, mode: io.BufferedReader(_FailingRaw()), raising=False
    )
    lines = textfiles.text_lines("some.lex", "lexicon")
    assert next(lines) == (1, "first line")
    with pytest.raises(InputFileError, match=r"some.lex:2: cannot read the lexicon") as err:
        next(lines)
    assert err.value.line_no == 2


def test_a_line_of_exactly_the_limit_is_read_with_or_without_its_newline(tmp_path):
    """A line of MAX_LINE_CHARS was refused when a newline followed it (the newline counted),
    read when it ended the file; one character more is refused either way."""
    from wfstdecode.textfiles import text_lines

    for ending in ("\nb\n", ""):
        (tmp_path / "a.txt").write_text("a" * MAX_LINE_CHARS + ending)
        assert len(next(text_lines(tmp_path / "a.txt", "lexicon"))[1]) == MAX_LINE_CHARS
        (tmp_path / "a.txt").write_text("a" * (MAX_LINE_CHARS + 1) + ending)
        with pytest.raises(InputFileError, match=r"a.txt:1: line longer than"):
            list(text_lines(tmp_path / "a.txt", "lexicon"))
