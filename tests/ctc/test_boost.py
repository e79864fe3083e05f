from types import SimpleNamespace

import numpy as np
import pytest

from wfstdecode import DecodeInputError
from wfstdecode.ctc.boost import build_boost_tables, resolve_boosts
from wfstdecode.ctc.bundles import SearchGraph, arc_cost, lane_boosts
from wfstdecode.ctc.phrases import NO_SLOT
from wfstdecode.symbols import SymbolTable
from wfstdecode.testing import assert_hypotheses_equal

WORDS = SymbolTable.from_list(["<eps>", "cat", "cap", "dog", "kubernetes"])


@pytest.mark.parametrize("seed", range(5))
def test_word_tables_cost_exactly_the_static_cost_less_the_bonus(seed):
    """Single words: from the root context state every word's arc costs ``1 - bonus`` (float32)
    and stays in the root — the one-state boosting acceptor."""
    rng = np.random.default_rng(seed)
    tables = []
    for _ in range(4):
        n = int(rng.integers(0, 40))
        ids = rng.choice(np.arange(1, 1000), size=n, replace=False)
        tables.append({(int(w),): np.float32(rng.normal()) for w in ids} or None)
    bt = build_boost_tables(tables)
    boosts = lane_boosts(SimpleNamespace(boosts=bt))
    # one arc per word id, static cost 1: the boosted cost is 1 - bonus
    words = np.arange(1000, dtype=np.int32)
    i32 = np.zeros(1000, np.int32)
    graph = SearchGraph(0, np.zeros(1, np.float32), i32, i32, i32, i32, words,
                        np.ones(1000, np.float32), i32, 1000, NO_SLOT)  # fmt: skip
    for b, table in enumerate(tables):
        assert bt.contexts[b] == 1
        for w in range(0, 1000):
            got = arc_cost(graph, boosts, b, w, 0)
            bonus = table.get((w,), np.float32(0.0)) if table and w else np.float32(0.0)
            assert got == (np.float32(np.float32(1.0) - bonus), 0), (b, w)
            assert arc_cost.py_func(graph, boosts, b, w, 0) == got  # as the kernels run it
        if table:
            assert bt.mask[b] + 1 >= 2 * len(table)


def test_resolve_words_and_ids_and_broadcast():
    per = resolve_boosts({"cat": 2, 3: 1.5, "cap dog": 1.0, (1, "dog"): 0.5}, 2, WORDS)
    want = {(1,): np.float32(2.0), (3,): np.float32(1.5), (2, 3): np.float32(1.0),
            (1, 3): np.float32(0.5)}  # fmt: skip
    assert per == [want] * 2
    assert resolve_boosts([None, {}], 2, WORDS) == [None, None]


def test_the_warning_names_every_unknown_word_its_phrase_and_a_case_slip():
    """It named the first unknown word of a phrase alone ("new" for 'new york city'), though
    the whole phrase is left out; a capitalised word the graph has in lower case is said so."""
    with pytest.warns(UserWarning) as rec:
        per = resolve_boosts({"zyx cat wvu": 1.0, "Cat": 2.0, "dog": 1.0}, 1, WORDS)
    (message,) = [str(w.message) for w in rec]
    assert "wvu (in 'zyx cat wvu')" in message and "zyx (in 'zyx cat wvu')" in message
    assert "Cat ('cat' is a word: words are case-sensitive)" in message
    assert per == [{(WORDS.get("dog"),): np.float32(1.0)}]
    many = {f"w{i:03d}": 1.0 for i in range(25)}
    with pytest.warns(UserWarning, match=r"w019 and 5 more$"):
        resolve_boosts(many, 1, WORDS)


def test_unknown_words_warn_listing_them():
    with pytest.warns(UserWarning, match=r"zebra, zzz") as rec:
        per = resolve_boosts([{"cat": 1.0, "zzz": 2.0}, {"zebra": 1.0, 99: 1.0}], 2, WORDS)
    assert "99" in str(rec[0].message)
    assert per == [{(1,): np.float32(1.0)}, None]


@pytest.mark.parametrize(
    ("boosts", "match"),
    [
        ([{"cat": 1.0}], "one entry per utterance"),
        ({"cat": float("nan")}, r"must be in \[-1000, 1000\]; got nan"),
        ({"cat": 1e39}, r"must be in \[-1000, 1000\]; got 1e\+39"),
        ({"cat": -1e10}, r"must be in \[-1000, 1000\]"),
        ({"cat": 10**400}, r"must be in \[-1000, 1000\]"),
        ({"cat": "high"}, "number"),
        ("cat", "mapping"),
        ({1.5: 1.0}, "word id"),
        ({"cat": 1.0, 1: 2.0}, "same phrase"),
    ],
)
def test_bad_boosts_raise(boosts, match):
    with pytest.raises(DecodeInputError, match=match):
        resolve_boosts(boosts, 2, WORDS)


def test_a_key_is_checked_in_every_utterance_that_boosts_it():
    """1 == 1.0 (and their hashes): an utterance boosting word 1 must not make another's 1.0
    key pass as the same key."""
    with pytest.raises(DecodeInputError, match=r"boosts\[1\]: a key .* got 1.0"):
        resolve_boosts([{1: 2.0}, {1.0: 2.0}], 2, WORDS)


def test_without_a_word_table_ids_beyond_the_graph_are_unknown_words():
    """A graph without a word table knows its words by id: a boosted id above its largest
    output label is ignored with the unknown-word warning (its bitset was sized by the id: 2**40
    asked for terabytes)."""
    import dataclasses

    from wfstdecode.ctc import CtcBeamOptions, decode_ctc
    from wfstdecode.testing import random_graph, simulate_ctc

    with pytest.warns(UserWarning, match="1099511627776"):
        per = resolve_boosts({2**40: 1.0, 3: 2.0, (2, 2**33): 1.0}, 1, None, largest_word=5)
    assert per == [{(3,): np.float32(2.0)}]
    g = dataclasses.replace(random_graph(3), words=None)
    largest = int(g.olabel.max())
    lp, lengths = simulate_ctc([[1, 2]], g.num_tokens, seed=0)
    with pytest.warns(UserWarning, match=str(2**40)):
        boosted = decode_ctc(lp, lengths, g, CtcBeamOptions(beam=8), {2**40: 3.0, largest: 0.0})
    assert_hypotheses_equal(decode_ctc(lp, lengths, g, CtcBeamOptions(beam=8)), boosted)


def test_boost_ids_at_the_ends_of_the_word_range():
    """A graph without a word table: its largest output label is a word to boost (the limit is
    inclusive); on any graph, id 0 (epsilon, no word) is an unknown word, warned of."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_boosts({5: 2.0}, 1, None, largest_word=5) == [{(5,): np.float32(2.0)}]
    with pytest.warns(UserWarning, match="ignored.*: 0"):
        assert resolve_boosts({0: 1.0}, 1, WORDS) == [None]


def test_boost_file_reads_words_and_names_bad_lines(tmp_path):
    from wfstdecode.ctc.boost_files import read_boost_file
    from wfstdecode.errors import InputFileError

    path = tmp_path / "boosts.txt"
    path.write_text("# contacts\nkubernetes\t4.0\n\nnaïve\t-1.5\n new  york \t3\n  # ok\n")
    assert read_boost_file(path) == {"kubernetes": 4.0, "naïve": -1.5, "new york": 3.0}
    for text, line, match in [
        ("kubernetes 4.0\n", 1, "expected PHRASE<TAB>BONUS"),
        ("a\tnan\n", 1, "finite"),
        ("a\t1\nb\t2\na\t3\n", 3, "already on line 1"),
        ("new york\t3\nnew   york\t1\n", 2, "already on line 1"),
        ("a\t5000\n", 1, "beyond"),
        ("a\t-5000\n", 1, "beyond"),
    ]:
        path.write_text(text)
        with pytest.raises(InputFileError, match=rf"boosts.txt:{line}: .*{match}"):
            read_boost_file(path)


def _see_sea_files(tmp_path):
    """g.npz (the words see, sea, a) and lp.npz (two utterances: "see a", "sea") in tmp_path."""
    from wfstdecode.testing import lexicon_graph, simulate_ctc

    g = lexicon_graph(["see", "sea", "a"])
    g.save(tmp_path / "g.npz")
    seqs = [[g.tokens.id(c) for c in "seea"], [g.tokens.id(c) for c in "sea"]]
    lp, lengths = simulate_ctc(seqs, g.num_tokens, seed=1, noise=2.0)
    np.savez(tmp_path / "lp.npz", log_probs=lp, lengths=lengths)


def test_boost_file_on_the_command_line_equals_repeated_boost(tmp_path, capsys):
    from wfstdecode.cli import main

    _see_sea_files(tmp_path)
    (tmp_path / "b.txt").write_text("sea\t3.5\nsee\t-1\n")
    common = ["decode", str(tmp_path / "g.npz"), str(tmp_path / "lp.npz"), "--backend", "cpu"]
    assert main([*common, "--boost-file", str(tmp_path / "b.txt")]) == 0
    from_file = capsys.readouterr().out
    assert main([*common, "--boost", "sea=3.5", "--boost", "see=-1"]) == 0
    assert capsys.readouterr().out == from_file
    assert main([*common]) == 0
    assert capsys.readouterr().out != from_file  # the bonuses change the scores
    assert main([*common, "--boost-file", str(tmp_path / "b.txt"), "--boost", "sea=1"]) == 2
    assert "boosted by --boost and in" in capsys.readouterr().err


@pytest.mark.parametrize("seed", range(4))
def test_the_bulk_path_resolves_as_phrase_by_phrase(seed):
    """Lists of plain phrases resolve in bulk (`boost._resolve_plain`); the result equals the
    phrase-by-phrase rule, and anything the bulk path cannot take falls back to it."""
    from wfstdecode.ctc.boost import _resolve_plain, phrase_ids

    rng = np.random.default_rng(seed)
    names = ["cat", "cap", "dog", "kubernetes"]
    table, want = {}, {}
    for _ in range(int(rng.integers(1, 30))):
        k = "  ".join(rng.choice(names, size=int(rng.integers(1, 4))).tolist())
        key = np.str_(k) if rng.random() < 0.3 else f" {k} "
        if phrase_ids(key, WORDS) in want:
            continue
        table[key] = [1, 2.5, np.float32(0.75)][int(rng.integers(0, 3))]
        want[phrase_ids(key, WORDS)] = np.float32(table[key])
    (got,) = resolve_boosts(table, 1, WORDS)
    assert got == want
    assert _resolve_plain(list(table), list(table.values()), WORDS, None, 0, []) == want
    twice = {**table, "  ".join(next(iter(table)).split()) + " ": 1.0}  # one phrase twice
    assert _resolve_plain(list(twice), list(twice.values()), WORDS, None, 0, []) is None
    with pytest.raises(DecodeInputError, match="same phrase"):
        resolve_boosts(twice, 1, WORDS)


@pytest.mark.parametrize("seed", range(6))
def test_lists_with_unknown_words_resolve_in_bulk_as_phrase_by_phrase(seed):
    """Keys with words the graph lacks are left out with one warning naming them, whether the
    list resolves in bulk or phrase by phrase (a float16 bonus sends it that way); a malformed
    key raises the same error both ways."""
    import warnings

    from wfstdecode.ctc.boost import _resolve_plain
    from wfstdecode.ctc.phrases import PhraseList

    rng = np.random.default_rng(seed)
    names = ["cat", "cap", "dog", "kubernetes", "zebra", "yak", "<eps>"]
    table = {}
    for _ in range(int(rng.integers(2, 30))):
        table[" ".join(rng.choice(names, size=int(rng.integers(1, 4))).tolist())] = 1.5
    if rng.random() < 0.3:
        table["  "] = 2.0  # an empty phrase

    def resolved(table, bonus_type):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                out = resolve_boosts({k: bonus_type(v) for k, v in table.items()}, 1, WORDS)[0]
            except DecodeInputError as exc:
                return "raised", str(exc)
        return (None if out is None else dict(out)), [str(w.message) for w in caught]

    assert resolved(table, float) == resolved(table, np.float16)
    # without the malformed key the bulk path itself takes the list (unless a phrase repeats),
    # leaving out the keys with unknown words and noting those words as phrase by phrase does
    fine = {k: v for k, v in table.items() if k.split()}
    noted = []
    bulk = _resolve_plain(list(fine), list(fine.values()), WORDS, None, 0, noted)
    known = [tuple(WORDS.get(w) for w in k.split()) for k in fine]
    known = [ids for ids in known if None not in ids and 0 not in ids]
    if not known or len(set(known)) < len(known):
        assert bulk is None
    else:
        assert isinstance(bulk, PhraseList)
        assert dict(bulk) == resolved(fine, np.float16)[0]
        # every word the graph lacks, with the phrase it sinks
        assert noted == [w if len(k.split()) == 1 else f"{w} (in {k!r})"
                         for k in fine for w in k.split() if WORDS.get(w) in (None, 0)]  # fmt: skip


def test_boosts_from_files_name_word_ids_on_a_graph_without_a_word_table(tmp_path, capsys):
    """A graph without a word table prints its words as ids ("1 3"); --boost 2=3.5, a boost
    file's ``2<TAB>3.5`` and per-utterance lists were refused ("pass word ids instead", which
    no file or flag can): a phrase of ASCII digits is a phrase of word ids there, decoded as
    ``decode_ctc(..., boosts={2: 3.5})`` decodes."""
    from dataclasses import replace

    from wfstdecode.cli import main
    from wfstdecode.ctc import decode_ctc
    from wfstdecode.testing import lexicon_graph, simulate_ctc

    g = lexicon_graph(["see", "sea", "a"])
    bare = replace(g, words=None)
    bare.save(tmp_path / "g.npz")
    seqs = [[g.tokens.id(c) for c in "seea"], [g.tokens.id(c) for c in "sea"]]
    lp, lengths = simulate_ctc(seqs, g.num_tokens, seed=1, noise=2.0)
    np.savez(tmp_path / "lp.npz", log_probs=lp, lengths=lengths)
    want = decode_ctc(lp, lengths, bare, boosts={2: 3.5, (1, 3): 1.0}, backend="cpu")
    assert decode_ctc(lp, lengths, bare, boosts={"2": 3.5, "1  3": 1.0}, backend="cpu") == want
    (tmp_path / "b.txt").write_text("2\t3.5\n1 3\t1.0\n")
    common = ["decode", str(tmp_path / "g.npz"), str(tmp_path / "lp.npz"), "--backend", "cpu"]
    ids = ("utt0000", "utt0001")
    lines = [f"{u}\t{h[0].score:.3f}\t{h[0].text}" for u, h in zip(ids, want, strict=True)]
    flags_given = (["--boost-file", str(tmp_path / "b.txt")],
                   ["--boost", "2=3.5", "--boost", "1 3=1"])  # fmt: skip
    for flags in flags_given:
        assert main([*common, *flags]) == 0, capsys.readouterr().err
        assert capsys.readouterr().out.splitlines() == lines
    with pytest.raises(DecodeInputError, match="no word table; pass word ids instead"):
        decode_ctc(lp, lengths, bare, boosts={"sea": 1.0}, backend="cpu")
    many = {str(w): 0.5 for w in range(1, 100)}  # (a list long enough for the phrase cache)
    with pytest.warns(UserWarning, match="not in the graph's vocabulary"):  # (ids beyond 3)
        got = decode_ctc(lp, lengths, bare, boosts=many, backend="cpu")
    assert got == decode_ctc(lp, lengths, bare, boosts={1: 0.5, 2: 0.5, 3: 0.5}, backend="cpu")


def test_repeated_boost_files_are_all_read(tmp_path, capsys):
    """--boost-file given twice kept the last file alone (argparse's default for a flag given
    again): the first file's phrases were dropped without a word. Every file is read, as
    every --boost is; a phrase in two files is refused, naming both."""
    from wfstdecode.cli import main

    _see_sea_files(tmp_path)
    (tmp_path / "a.txt").write_text("sea\t3.5\n")
    (tmp_path / "b.txt").write_text("see\t-1\n")
    (tmp_path / "c.txt").write_text("a\t1\nsea\t2\n")
    common = ["decode", str(tmp_path / "g.npz"), str(tmp_path / "lp.npz"), "--backend", "cpu"]
    assert main([*common, "--boost", "sea=3.5", "--boost", "see=-1"]) == 0
    from_flags = capsys.readouterr().out
    files = ["--boost-file", str(tmp_path / "a.txt"), "--boost-file", str(tmp_path / "b.txt")]
    assert main([*common, *files]) == 0
    assert capsys.readouterr().out == from_flags
    twice = ["--boost-file", str(tmp_path / "a.txt"), "--boost-file", str(tmp_path / "c.txt")]
    assert main([*common, *twice]) == 2
    err = capsys.readouterr().err
    assert "'sea' is boosted in" in err and "a.txt" in err and "c.txt" in err
    assert main([*common, "--boost-file", str(tmp_path / "b.txt"), "--boost", "see=2"]) == 2
    assert "boosted by --boost and in" in capsys.readouterr().err


@pytest.mark.parametrize(
    "text",
    [
        "cat\t2\t1\n",  # a third column: was {'cat 2': 1.0}, its words unknown, the line lost
        "new\tyork\t2\n",  # a tab between words: the format's words are spaced
        "cat\t2\u2028dog\t3\n",  # two lines joined by a separator a text file's reader keeps
        "cat\t2\x85dog\t3\n",  # (was the phrase 'cat 2 dog', bonus 3)
    ],
)
def test_a_boost_file_line_with_more_than_one_tab_is_refused(tmp_path, text):
    from wfstdecode.ctc.boost_files import read_boost_file
    from wfstdecode.errors import InputFileError

    path = tmp_path / "boosts.txt"
    path.write_text("sea\t1\n" + text)
    with pytest.raises(InputFileError, match=r"boosts.txt:2: expected PHRASE<TAB>BONUS, one tab"):
        read_boost_file(path)
    path.write_text("sea\t1\ncat\t\t2\n")  # (empty fields around one phrase: read as before)
    assert read_boost_file(path) == {"sea": 1.0, "cat": 2.0}


def test_a_bonus_with_an_underscore_is_refused_in_files_and_flags(tmp_path):
    """Python's float() reads '1_5' as 15 (and '1_000' as 1000), which no other reader here
    takes (`textfiles.strict_float`): a typo for 1.5 boosted ten times as much."""
    import argparse

    from wfstdecode.cli_common import parse_boost
    from wfstdecode.ctc.boost_files import read_boost_file
    from wfstdecode.errors import InputFileError

    path = tmp_path / "boosts.txt"
    path.write_text("sea\t1_5\n")
    with pytest.raises(InputFileError, match=r"boosts.txt:1: expected PHRASE<TAB>BONUS"):
        read_boost_file(path)
    with pytest.raises(argparse.ArgumentTypeError, match="PHRASE=BONUS"):
        parse_boost("sea=1_5")
    assert parse_boost("sea=1.5") == ("sea", 1.5)


def test_utterance_boosts_line_may_be_as_long_as_its_phrases_allow(tmp_path):
    """One utterance's list is one JSON line, of up to MAX_PHRASES phrases: 40,000 two-word
    names (1.3 million characters) were refused as "line longer than 1,048,576 characters: not
    a valid utterance boosts file". A line past the file's own bound is still refused."""
    import json

    from wfstdecode.ctc import boost_files
    from wfstdecode.ctc.boost_files import read_utterance_boosts
    from wfstdecode.errors import InputFileError

    boosts = {f"name{i:06d} surname{i:06d}": 1.5 for i in range(40_000)}
    path = tmp_path / "u.jsonl"
    path.write_text(json.dumps({"id": "u1", "boosts": boosts}) + "\n")
    assert read_utterance_boosts(path) == {"u1": boosts}
    path.write_text("x" * (boost_files.MAX_UTTERANCE_BOOSTS_CHARS + 1))
    with pytest.raises(InputFileError, match="u.jsonl:1: line longer than"):
        read_utterance_boosts(path)
