"""A small corpus shared by the corpus tests: a lexicon graph, shards of simulated emissions, and
what single-process `decode_ctc` gives for each utterance (the oracle every run must equal)."""

import pytest

from wfstdecode.testing import lexicon_graph
from wfstdecode.testing.corpus import Corpus, expected_records, write_shards

WORDS = ["hello", "world", "help", "word", "low", "old", "hold", "dew", "howl"]


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Corpus:
    root = tmp_path_factory.mktemp("corpus")
    graph = lexicon_graph(WORDS)
    graph.save(root / "graph.npz")
    shards = write_shards(root / "shards", graph, WORDS, [5, 3, 6, 1, 4, 2], seed=3)
    expected = {p.stem: expected_records(graph, p) for p in shards}
    return Corpus(root / "graph.npz", root / "shards", shards, expected)


@pytest.fixture(scope="session")
def corpus_words() -> list[str]:
    """The corpus' vocabulary (for LMs over it)."""
    return WORDS
