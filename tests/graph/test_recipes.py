"""Smoke tests of graph_recipes/ on tiny data: each builds a loadable TLG whose words are right."""

import importlib.util
import sys
from pathlib import Path

import pytest

from wfstdecode import DecodingGraph, SymbolTable
from wfstdecode.testing.data import PACKAGE_DATA
from wfstdecode.testing.lm import random_arpa, tiny_sentencepiece_model

RECIPES = Path(__file__).resolve().parents[2] / "graph_recipes"


def recipe(name):
    sys.path.insert(0, str(RECIPES))
    spec = importlib.util.spec_from_file_location(f"recipe_{name}", RECIPES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_characters_recipe_on_the_shipped_data(tmp_path):
    out = recipe("characters").main(
        [
            "--tokens",
            str(PACKAGE_DATA / "tokens.txt"),
            "--separator",
            "|",
            "--arpa",
            str(PACKAGE_DATA / "lm.arpa.gz"),
            "--out",
            str(tmp_path / "g"),
        ]
    )
    graph = DecodingGraph.load(out)
    assert graph.metadata["separator"] == "|" and graph.num_tokens == 29
    assert len(graph.words) == 5000 + 4  # every LM word is spelled; <eps> #0 <s> </s>


def test_bpe_recipe_with_a_tiny_sentencepiece_model(tmp_path):
    pytest.importorskip("sentencepiece")
    _, _, text = tiny_sentencepiece_model(tmp_path)
    words = sorted(set(text.split()))[:40]
    (tmp_path / "lm.arpa").write_text(random_arpa(words, order=2, seed=3))
    out = recipe("bpe").main(
        [
            "--spm",
            str(tmp_path / "bpe.model"),
            "--arpa",
            str(tmp_path / "lm.arpa"),
            "--out",
            str(tmp_path / "g"),
        ]
    )
    graph = DecodingGraph.load(out)
    tokens = SymbolTable.read(out / "tokens.txt")
    assert tokens.symbol(0) == "<blk>" and graph.num_tokens == 121
    assert set(words) <= set(graph.words.symbols())
    # with an oov slot: the decoder spells new words with the same model, wherever it runs from
    from wfstdecode.graph.oov_slot import OovSlot

    args = ["--spm", str(tmp_path / "bpe.model"), "--arpa", str(tmp_path / "lm.arpa"), "--out",
            str(tmp_path / "g-oov"), "--oov-slot", "--oov-logprob", "-4"]  # fmt: skip
    slot = OovSlot.of(DecodingGraph.load(recipe("bpe").main(args)))
    assert slot.spelling == "spm" and Path(slot.spm) == (tmp_path / "bpe.model").absolute()


def test_a_token_table_of_another_sentencepiece_model_is_warned_of(tmp_path):
    """The token table's ids are the CTC model's columns: a table that numbers the pieces
    otherwise than the sentencepiece model (beyond one shift for all, a blank put first) or
    lacks pieces is most likely another model's, and the graph would decode garbage."""
    import warnings

    pytest.importorskip("sentencepiece")
    from wfstdecode.graph.lexicon import sentencepiece_lexicon

    _, pieces, text = tiny_sentencepiece_model(tmp_path)
    words = sorted(set(text.split()))[:20]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the model's own numbering, blank first: no warning
        sentencepiece_lexicon(
            words, tmp_path / "bpe.model", SymbolTable.from_list(["<blk>", *pieces])
        )
    swapped = ["<blk>", *pieces]
    swapped[10], swapped[11] = swapped[11], swapped[10]
    with pytest.warns(
        UserWarning, match=r"bpe.model: the token table numbers its pieces otherwise"
    ):
        sentencepiece_lexicon(words, tmp_path / "bpe.model", SymbolTable.from_list(swapped))
    with pytest.warns(UserWarning, match=r"bpe.model: 1 of its pieces is not in the token table"):
        sentencepiece_lexicon(words, tmp_path / "bpe.model",
                              SymbolTable.from_list(["<blk>", *pieces[:-1]]))  # fmt: skip


def test_phones_recipe_with_a_cmudict_style_file(tmp_path):
    (tmp_path / "dict").write_text(
        ";;; comment\nREAD  R IY1 D\nREAD(2)  R EH1 D\nRED  R EH1 D\nBOOK  B UH1 K\n"
    )
    (tmp_path / "lm.arpa").write_text(
        random_arpa(["read", "red", "book", "unknownword"], order=3, seed=1)
    )
    mod = recipe("phones_cmudict")
    out = mod.main(
        [
            "--dict",
            str(tmp_path / "dict"),
            "--arpa",
            str(tmp_path / "lm.arpa"),
            "--topology",
            "normal",
            "--out",
            str(tmp_path / "g"),
        ]
    )
    tokens = SymbolTable.read(out / "tokens.txt")
    assert tokens.symbols() == ["<blk>", "B", "D", "EH", "IY", "K", "R", "UH"]
    graph = DecodingGraph.load(out)
    assert {"read", "red", "book"} <= set(graph.words.symbols())
    assert "unknownword" not in graph.words
    _, entries, skipped = mod.cmudict_lexicon(["read", "zzz"], mod.read_cmudict(tmp_path / "dict"))
    assert [e.tokens for e in entries] == [("R", "IY", "D"), ("R", "EH", "D")] and skipped == [
        "zzz"
    ]


def test_phones_recipe_numbers_phones_by_the_dictionary_not_the_lm(tmp_path):
    """tokens.txt must not depend on which words the LM has (a small LM dropped every later id
    by one); a real cmudict.dict's inline comments are not phones; UTF-8 words are read."""
    import json

    (tmp_path / "dict").write_text(
        "read  R IY1 D\nbook  B UH1 K\naalborg  AO1 L B AO0 R G # place, danish\n"
        "naïve  N AY0 IY1 V\n",
        encoding="utf-8",
    )
    (tmp_path / "lm.arpa").write_text(random_arpa(["read", "naïve"], order=2, seed=1))
    mod = recipe("phones_cmudict")
    args = ["--dict", str(tmp_path / "dict"), "--arpa", str(tmp_path / "lm.arpa")]
    out = mod.main([*args, "--out", str(tmp_path / "g")])
    phones = ["AO", "AY", "B", "D", "G", "IY", "K", "L", "N", "R", "UH", "V"]
    assert SymbolTable.read(out / "tokens.txt").symbols() == ["<blk>", *phones]
    assert {"read", "naïve"} <= set(DecodingGraph.load(out).words.symbols())
    # the acoustic model's own table: its numbering, its phones only
    (tmp_path / "tokens.txt").write_text("<blk> 0\nR 1\nIY 2\nD 3\nEH 4\n")
    out = mod.main([*args, "--tokens", str(tmp_path / "tokens.txt"), "--out", str(tmp_path / "t")])
    assert (out / "tokens.txt").read_text() == (tmp_path / "tokens.txt").read_text()
    assert set(DecodingGraph.load(out).words.symbols()) & {"read", "naïve"} == {"read"}
    assert json.loads((out / "build.json").read_text())["tokens"] == str(tmp_path / "tokens.txt")


@pytest.mark.parametrize(
    ("line", "says"),
    [("hello  HH <blk> L OW", "'<blk>' cannot be a phone"), ("hi  HH <eps>", "'<eps>' cannot be")],
)
def test_phones_recipe_refuses_reserved_phones_by_line(tmp_path, line, says):
    from wfstdecode import InputFileError

    (tmp_path / "dict").write_text(f"read  R IY1 D\n{line}\n")
    with pytest.raises(InputFileError, match=f"dict:2: {says}"):
        recipe("phones_cmudict").read_cmudict(tmp_path / "dict")


def test_recipes_check_their_options_before_any_work(tmp_path):
    from wfstdecode.errors import WfstDecodeError

    with pytest.raises(WfstDecodeError, match="--oov-logprob .* needs --oov-slot"):
        recipe("phones_cmudict").main(["--arpa", str(tmp_path / "missing.arpa"), "--out",
                                       str(tmp_path / "g"), "--oov-logprob", "-5"])  # fmt: skip
    (tmp_path / "lm.arpa").write_text(random_arpa(["xyz"], order=2, seed=1))
    (tmp_path / "tokens.txt").write_text("<blk> 0\na 1\n")
    with pytest.raises(WfstDecodeError, match="no word of .*lm.arpa has a lexicon entry"):
        recipe("characters").main(["--tokens", str(tmp_path / "tokens.txt"), "--arpa",
                                   str(tmp_path / "lm.arpa"), "--out",
                                   str(tmp_path / "g")])  # fmt: skip
    assert not (tmp_path / "g").exists()


def test_an_arpa_word_holding_a_no_break_space_is_left_out_of_a_sentencepiece_lexicon(tmp_path):
    """The ARPA reader keeps a no-break space inside a word (as KenLM does); sentencepiece splits
    there as at a space, so the word got a lexicon entry that no word table can hold, and the
    whole build died on "symbol … contains whitespace", naming no file. It is left out, like
    any word the tokens cannot write."""
    pytest.importorskip("sentencepiece")
    from wfstdecode.graph import build_tlg
    from wfstdecode.graph.lexicon import sentencepiece_lexicon

    _, pieces, text = tiny_sentencepiece_model(tmp_path)
    tokens = SymbolTable.from_list(["<blk>", *pieces])
    words = sorted(set(text.split()))[:6]
    joined = f"{words[0]}\u00a0{words[1]}"
    (tmp_path / "lm.arpa").write_text(random_arpa([*words, joined], order=2, seed=3))
    lexicon, skipped = sentencepiece_lexicon([*words, joined], tmp_path / "bpe.model", tokens)
    assert skipped == [joined] and {e.word for e in lexicon} == set(words)
    build_tlg(tokens, lexicon, str(tmp_path / "lm.arpa"))  # builds, the word dropped


def test_recipes_refuse_an_arpa_pipe_rather_than_hang(tmp_path):
    """The recipes read the ARPA twice (its words, then the model), as build-tlg --chars does:
    a named FIFO hung on the second open (an anonymous pipe said "not an ARPA file" of a good
    one). Refused up front, without opening it, as build-tlg refuses it."""
    import os
    import subprocess

    fifo = tmp_path / "lm.fifo"
    os.mkfifo(fifo)
    (tmp_path / "tokens.txt").write_text("<blk> 0\na 1\nb 2\n")
    args = ["--tokens", str(tmp_path / "tokens.txt"), "--arpa", str(fifo), "--out",
            str(tmp_path / "g")]  # fmt: skip
    try:  # (no writer: an open of the FIFO would block)
        run = subprocess.run([sys.executable, str(RECIPES / "characters.py"), *args],
                             capture_output=True, text=True, timeout=30)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail("the recipe hung on a named FIFO")
    assert run.returncode == 2 and "not a regular file" in run.stderr, run.stderr
    assert not (tmp_path / "g").exists()


@pytest.mark.parametrize(
    ("blank", "options"),
    [("<blk>", {"user_defined_symbols": ["<blk>"]}),  # after <unk> <s> </s>: id 3
     ("<blank>", {"pad_id": 0, "pad_piece": "<blank>", "unk_id": 1, "bos_id": 2, "eos_id": 3})],
)  # fmt: skip
def test_bpe_recipe_keeps_the_numbering_of_a_model_with_its_own_blank(tmp_path, blank, options):
    """A model holding a blank piece other than <blk> at id 0 had <blk> put first anyway: a
    <blk> elsewhere crashed with "duplicate symbol '<blk>'", a <blank> at 0 shifted every
    piece one column off the model's (and the table had two blanks)."""
    spm = pytest.importorskip("sentencepiece")
    from importlib.resources import files

    text = (files("wfstdecode") / "data" / "test_sentences.txt").read_text()
    (tmp_path / "text.txt").write_text(text * 3)
    spm.SentencePieceTrainer.train(input=str(tmp_path / "text.txt"), vocab_size=120,
                                   model_prefix=str(tmp_path / "m"), model_type="bpe",
                                   minloglevel=2, **options)  # fmt: skip
    model = spm.SentencePieceProcessor(model_file=str(tmp_path / "m.model"))
    pieces = [model.id_to_piece(i) for i in range(model.get_piece_size())]
    words = sorted(set(text.split()))[:20]
    (tmp_path / "lm.arpa").write_text(random_arpa(words, order=2, seed=3))
    out = recipe("bpe").main(["--spm", str(tmp_path / "m.model"), "--arpa",
                              str(tmp_path / "lm.arpa"), "--out", str(tmp_path / "g")])  # fmt: skip
    assert SymbolTable.read(out / "tokens.txt").symbols() == pieces
    assert DecodingGraph.load(out).metadata["blank_id"] == pieces.index(blank)


def test_recipe_help_keeps_the_lines_of_its_example_commands(capsys):
    """--help reflowed phones_hama's two example commands into one line of prose."""
    with pytest.raises(SystemExit):
        recipe("phones_hama").main(["--help"])
    assert "--out graph/\n    wfstdecode transcribe --graph graph/" in capsys.readouterr().out
