"""Corpus-decode test helpers: shards of simulated CTC emissions, and a decoder that fails the way
workers fail in production (a crash, a kill from outside, a slow shard), picklable so that it
runs inside local worker processes and Ray actors."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .ctc import simulate_ctc


def write_shards(
    directory: str | os.PathLike, graph, words: list[str], sizes: list[int], seed: int = 0,
    with_ids: bool = False,
) -> list[Path]:  # fmt: skip
    """One ``.npz`` per entry of ``sizes`` (that many utterances of 1-4 random ``words`` spelled
    in characters, with reference ``texts``; ``ids`` too if ``with_ids``) under ``directory``."""
    rng = np.random.default_rng(seed)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for s, size in enumerate(sizes):
        texts = [" ".join(rng.choice(words, int(rng.integers(1, 5)))) for _ in range(size)]
        seqs = [[graph.tokens.id(c) for c in t.replace(" ", "")] for t in texts]
        lp, lengths = simulate_ctc(seqs, graph.num_tokens, seed * 1000 + s, noise=3.0)
        arrays = {"log_probs": lp, "lengths": lengths, "texts": np.array(texts)}
        if with_ids:
            arrays["ids"] = np.array([f"s{s}u{i}" for i in range(size)])
        path = directory / f"shard{s:02d}.npz"
        np.savez(path, **arrays)
        paths.append(path)
    return paths


@dataclass
class Corpus:
    graph_path: Path
    shard_dir: Path
    shards: list[Path]
    expected: dict  # shard stem -> `expected_records`


def expected_records(graph, path: Path) -> list[tuple]:
    """(text, score, words with frames) of each utterance from the reference decoder."""
    from ..ctc import decode_ctc

    with np.load(path) as z:
        hyps = decode_ctc(z["log_probs"], z["lengths"], graph, backend="reference")
    return [_key(h[0].text, h[0].score, list(zip(h[0].words, h[0].word_timestamps, strict=True)))
            for h in hyps]  # fmt: skip


def _key(text, score, words):
    return (text, round(float(score), 4), [(w, int(s), int(e)) for w, (s, e) in words])


def output_records(path: Path) -> list[tuple]:
    """(id, the same key) of each line of a corpus output file."""
    out = []
    for line in path.read_text().splitlines():
        r = json.loads(line)
        words = [(w["word"], (w["start_frame"], w["end_frame"])) for w in r["words"]]
        out.append((r["id"], _key(r["text"], r["score"], words)))
    return out


def assert_outputs_match(corpus: Corpus, out: Path) -> None:
    """Every shard's output equals the single-process decode, utterance for utterance, each id
    exactly once."""
    for shard in corpus.shards:
        got = output_records(out / f"{shard.stem}.jsonl")
        assert [k for _, k in got] == corpus.expected[shard.stem], shard.stem
        assert [i for i, _ in got] == [f"{shard.stem}-{n}" for n in range(len(got))]


@dataclass(frozen=True)
class FaultyDecoder:
    """``base`` (a `CtcCorpusDecoder`), except on the shard named ``shard``:

    * ``"crash_once"``: the worker process exits (``os._exit``) the first time, then decodes;
    * ``"crash_always"``: it exits every time;
    * ``"wait_for_kill"``: the first time, it writes its Ray actor's name to ``state_dir/started``
      and sleeps (up to a minute) for the test to kill it; later attempts decode;
    * ``"hang"``: it sleeps an hour, every time (for shard timeouts);
    * ``"crash_on_load"``: the worker process exits while it loads the decoder, every time;
    * ``"crash_once_then_on_load"``: ``"crash_once"``, and the worker loading the decoder next
      (the one that replaces it) exits while it loads, once;
    * ``"load_dies_beside_a_loaded_one"``: the second worker process to load the decoder waits
      until another has decoded a shard, then exits while it loads, once (``shard`` unused);
    * ``"gated"``: the first shard decodes at once, every later one first waits (up to
      ``seconds``) for ``state_dir/go`` to exist, so that a test can interrupt a run midway
      without racing it (a run of shards that merely sleep could finish, on a loaded machine,
      before the test saw the first one done).

    ``state_dir`` remembers across processes what has happened."""

    base: object
    mode: str
    state_dir: str
    shard: str = ""
    seconds: float = 0.0

    def config(self) -> dict:
        return self.base.config()

    def load(self):
        if self.mode == "crash_on_load":
            os._exit(3)
        crashed = Path(self.state_dir) / f"seen-{self.shard.replace('/', '_')}"
        if (self.mode == "crash_once_then_on_load" and crashed.exists()
                and self._first_time("(load after the crash)")):  # fmt: skip
            os._exit(3)
        beside = self.mode == "load_dies_beside_a_loaded_one"
        if beside and not self._first_time("(first load)") and self._first_time("(load death)"):
            decoded, deadline = Path(self.state_dir) / "seen-(decoded)", time.monotonic() + 60
            while not decoded.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(2.0)  # (the driver reads the loaded worker's reply, "ready" before it)
            os._exit(3)
        decode = self.base.load()

        def faulty(path, name):
            if beside:
                result = decode(path, name)
                self._first_time("(decoded)")
                return result
            first = self._first_time(name)
            if self.mode == "gated" and not self._first_time("(gate)"):
                go, deadline = Path(self.state_dir) / "go", time.monotonic() + self.seconds
                while not go.exists() and time.monotonic() < deadline:
                    time.sleep(0.05)
            elif name == self.shard and self.mode == "hang":
                time.sleep(3600)
            elif name == self.shard and (self.mode == "crash_always" or first):
                if self.mode == "wait_for_kill":
                    import ray

                    actor = ray.get_runtime_context().get_actor_name()
                    (Path(self.state_dir) / "started").write_text(actor)
                    time.sleep(60)
                else:
                    os._exit(3)
            return decode(path, name)

        return faulty

    def _first_time(self, name: str) -> bool:
        mark = Path(self.state_dir) / f"seen-{name.replace('/', '_')}"
        try:
            mark.touch(exist_ok=False)
        except FileExistsError:
            return False
        return True

    # What decode_corpus reads of a decoder besides config() and load(): the base decoder's.
    @property
    def num_threads(self):
        return self.base.num_threads

    @property
    def backend(self):
        return self.base.backend

    @property
    def frame_shift(self):
        return self.base.frame_shift
