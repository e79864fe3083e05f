"""Lattice rescoring with an n-gram language model: `rescore` replaces the first-pass LM's
scores in a `Lattice` with another model's — Kaldi's ``lattice-lmrescore`` run with the old LM at
scale -1 and the new one at ``+lm_scale``, in one pass.

The first pass decodes with a small (pruned) LM compiled into TLG, where the graph is small and
the search fast; the lattice keeps the alternatives; rescoring applies the large LM to them
exactly. Each word sequence's graph cost becomes ``graph - old(words) + lm_scale * new(words)``,
where ``old`` and ``new`` are the models' costs of ``<s> words </s>`` (backoff semantics,
``-ln p``). Because a word's n-gram cost depends on the words before it, a lattice node reached
with different histories is split: the result's nodes are (node, old LM state, new LM state)
triples in topological order, a state being the part of the history the model can still use
(`NgramLm.step`) — the composition of the lattice with both models, as Kaldi computes it.

`NgramLm` scores an ARPA model on demand (the exact backoff recursion, memoized), which is what
the composition needs; no G is built.
"""

from __future__ import annotations

import errno
import math
import numbers
import os
import stat
import threading
import weakref
from dataclasses import dataclass, replace

import numpy as np

from .errors import InputFileError, OptionsError, SymbolError
from .lattice import Lattice, first_arcs
from .rescore_compose import StepTable, compose

LN10 = math.log(10.0)
BOS, EOS, UNK = "<s>", "</s>", "<unk>"
# KenLM's log10 probability for a word the model lacks when it has no <unk>
MISSING_WORD_LOG10 = -100.0
# |lm_scale| at most this (as the acoustic scale): a larger one overflows the lattices' float32
# costs to inf, and every rescored path is lost
MAX_LM_SCALE = 1e3
# an `NgramLm`'s remembered costs and steps (each of its two dicts): emptied when full, as
# `LmRescoring`'s kept steps are (a service rescoring for days met ever more histories: ~200
# bytes an entry, never let go)
MAX_LM_MEMO = 1_000_000


class NgramLm:
    """An ARPA n-gram model (`wfstdecode.graph.read_arpa`), scored on demand: `cost` of a word
    after a history, with ARPA backoff (``P(w | h) = bo(h) P(w | h[1:])`` until the n-gram is
    listed). A word the model lacks scores as ``<unk>`` when it has one, else at log10
    ``MISSING_WORD_LOG10`` (KenLM's choice); `missing` names such words (with the number of
    distinct histories they were scored after)."""

    def __init__(self, model):
        from .graph.grammar import ArpaModel, read_arpa

        self.model = model if isinstance(model, ArpaModel) else read_arpa(model)
        self.order = self.model.order
        self.path = self.model.path
        self._cache: dict[tuple[tuple[str, ...], str], float] = {}
        self._steps: dict[tuple[tuple[str, ...], str], tuple[float, tuple[str, ...]]] = {}
        self.missing: dict[str, int] = {}
        self.has_unk = (UNK,) in self.model.ngrams[0]  # (missing words score as <unk>)
        # histories some longer n-gram extends: the states `step` keeps
        self._contexts = {k[:-1] for level in self.model.ngrams[1:] for k in level}

    @property
    def start(self) -> tuple[str, ...]:
        """The state before the first word."""
        return (BOS,) if self.order > 1 else ()

    def step(self, state: tuple[str, ...], word: str) -> tuple[float, tuple[str, ...]]:
        """``(cost, next state)`` of ``word`` after ``state``: ``-ln P(word | state)`` plus the
        backoff weights of the words the next state forgets. A state is the longest suffix of
        the history that some listed n-gram extends (KenLM's state minimization); a history
        that none extends backs off on every next word, so its backoff weight is charged once,
        here, exactly."""
        key = (state, word)
        hit = self._steps.get(key)
        if hit is None:
            if len(self._steps) >= MAX_LM_MEMO:
                self._steps.clear()
            cost = self.cost(state, word)
            if word == EOS:  # nothing follows: no state, nothing to charge
                hit = self._steps[key] = (cost, ())
                return hit
            if self.has_unk and (word,) not in self.model.ngrams[0]:
                word = UNK  # the model's contexts know it as <unk>
            history = (*state, word)[-(self.order - 1) :] if self.order > 1 else ()
            extra, nxt = self._reduced(history)
            hit = self._steps[key] = (cost + extra, nxt)
        return hit

    def _reduced(self, history: tuple[str, ...]) -> tuple[float, tuple[str, ...]]:
        cost = 0.0
        while history and history not in self._contexts:
            entry = self.model.ngrams[len(history) - 1].get(history)
            cost += -LN10 * entry[1] if entry is not None else 0.0
            history = history[1:]
        return cost, history

    def cost(self, history: tuple[str, ...], word: str) -> float:
        """``-ln P(word | history)`` (natural log; the history's last ``order - 1`` words, those
        the model lacks read as ``<unk>`` when it has one, as `step` reads them)."""
        history = history[-(self.order - 1) :] if self.order > 1 else ()
        key = (history, word)
        cost = self._cache.get(key)
        if cost is None:
            if len(self._cache) >= MAX_LM_MEMO:
                self._cache.clear()
            if self.has_unk:
                unigrams = self.model.ngrams[0]
                history = tuple(w if (w,) in unigrams else UNK for w in history)
            cost = self._cache[key] = -LN10 * self._log10(history, word)
        return cost

    def sentence_cost(self, words) -> float:
        """``-ln P(<s> words </s>)`` (through `step`)."""
        state, total = self.start, 0.0
        for word in [*words, EOS]:
            cost, state = self.step(state, word)
            total += cost
        return total

    def _log10(self, history: tuple[str, ...], word: str) -> float:
        ngrams = self.model.ngrams
        unigram = ngrams[0].get((word,))
        if unigram is None:  # backs off to a unigram of <unk> or MISSING_WORD_LOG10, as KenLM
            self.missing[word] = self.missing.get(word, 0) + 1
            if self.has_unk:
                word = UNK
                unigram = ngrams[0][(UNK,)]
        total = 0.0
        while True:
            if not history:
                return total + (unigram[0] if unigram is not None else MISSING_WORD_LOG10)
            entry = (
                ngrams[len(history)].get((*history, word)) if len(history) < len(ngrams) else None
            )
            if entry is not None:
                return total + entry[0]
            context = ngrams[len(history) - 1].get(history)
            total += context[1] if context is not None else 0.0
            history = history[1:]


@dataclass(frozen=True)
class LmRescoring:
    """What `decode_ctc` (``rescore=``) applies to each lattice: `rescore` with these models,
    scale and beam (None: exact composition)."""

    new_lm: NgramLm  # or an ARPA path, read here
    old_lm: NgramLm | None
    lm_scale: float = 1.0
    beam: float | None = None

    def __post_init__(self):
        object.__setattr__(self, "new_lm", _as_lm(self.new_lm))
        if self.old_lm is not None:
            object.__setattr__(self, "old_lm", _as_lm(self.old_lm))
        _check_scale(self.lm_scale)
        _check_beam(self.beam)
        object.__setattr__(self, "_kept", _KeptSteps())

    def check_graph(self, graph, name: str = "the graph") -> None:
        """`check_first_pass_lm` with the old LM (once per run: the search does not)."""
        if self.old_lm is not None:
            unigrams = self.old_lm.model.ngrams[0]
            check_first_pass_lm(graph, lambda w: (w,) in unigrams, self.old_lm.path, name)

    def apply(self, lattice: Lattice, words) -> Lattice:
        with self._kept.lock:  # (one lattice at a time uses the kept steps)
            return _rescore(lattice, words, self.new_lm, self.old_lm, self.lm_scale, self.beam,
                            kept=self._kept.of(words))  # fmt: skip


class _KeptSteps:
    """What an `LmRescoring` keeps between lattices, per word table (the lattices' output
    labels): the word names checked (`_word_names`) and the LM steps taken
    (`rescore_compose.StepTable`), so that a lattice computes in Python only the steps no
    earlier one took (on the OCR lines, most: the rescoring took 1.6x the time). Dropped, all
    of it, when it grows past `MAX_KEPT_STEPS` steps in all or `MAX_KEPT_TABLES` word tables;
    the word tables held weakly (a graph dropped, as a service that reloads its graph drops
    it, takes its steps with it at the next lattice); not pickled; new in a forked child (one
    forked while another thread rescored would wait on the lock for ever)."""

    def __init__(self):
        self.lock = threading.Lock()
        # id(words) -> [weak reference to words, names, StepTable or None]
        self._by_words: dict[int, list] = {}
        _ALL_KEPT.add(self)

    def of(self, words) -> list:
        """``[weak reference to words, names, table]`` for ``words`` (a table None until
        made), kept as is."""
        by_words = self._by_words
        if any(kept[0]() is None for kept in by_words.values()):  # (an id freed may come back)
            by_words = self._by_words = {k: v for k, v in by_words.items() if v[0]() is not None}
        steps = sum(kept[2].n for kept in by_words.values() if kept[2] is not None)
        if steps > MAX_KEPT_STEPS:
            by_words.clear()
        kept = by_words.get(id(words))
        if kept is None:
            if len(by_words) >= MAX_KEPT_TABLES:
                by_words.clear()
            kept = by_words[id(words)] = [weakref.ref(words), {}, None]
        return kept

    def __getstate__(self):
        return {}

    def __setstate__(self, _state):
        self.__init__()


# ~70 bytes a step (its key, cost and state id, grown by doubling, and its slots in the hash
# index; 288 MB at 4.1M steps), plus the states: ~70 MB
MAX_KEPT_STEPS = 1_000_000
MAX_KEPT_TABLES = 4
_ALL_KEPT: weakref.WeakSet = weakref.WeakSet()


def _new_in_child() -> None:
    for kept in list(_ALL_KEPT):
        kept.__init__()


os.register_at_fork(after_in_child=_new_in_child)


def check_rescorable(graph, name: str = "the graph") -> None:
    """Refuse (`OptionsError`, naming the graph as ``name``) a graph whose lattices rescoring
    cannot score: one without a word table, or with an oov slot (its spelled words are several
    labels, none an n-gram word)."""
    if graph.words is None:
        raise OptionsError(f"rescoring scores words: {name} has no word table")
    if "oov_slot" in graph.metadata:
        raise OptionsError(f"rescoring needs a graph without an oov slot: {name} has one (its "
                           "spelled words are not n-gram words; build it without "
                           "--oov-slot)")  # fmt: skip


def check_first_pass_lm(graph, lm_has, lm_path, name: str = "the graph") -> None:
    """Refuse (`OptionsError`) a first-pass LM lacking a word on the graph's arcs
    (``lm_has(word)``: is it one of the LM's unigrams): not the LM the graph was built from.
    Each lattice holding such a word would be refused on its own, after its search — every
    shard of a corpus run."""
    on_arcs = np.zeros(graph.words.next_id, dtype=bool)
    on_arcs[graph.olabel] = True  # (O(arcs), no sort: once per run, on graphs of 10^7 arcs)
    on_arcs[0] = False
    missing = [w for w in graph.words.symbols_of(np.flatnonzero(on_arcs).tolist()) if not lm_has(w)]
    if missing:
        shown = ", ".join(repr(w) for w in missing[:5]) + (", ..." if len(missing) > 5 else "")
        raise OptionsError(f"{lm_path}: {len(missing)} of the words of {name} are not in it "
                           f"({shown}): not the LM the graph was built from; give that one as "
                           "the first-pass LM")  # fmt: skip


@dataclass(frozen=True)
class RescoringFiles:
    """An `LmRescoring` named by its ARPA files, for processes that read them themselves (a
    corpus decode's workers, each once: `load`). The files are checked readable here."""

    new_lm: str
    old_lm: str | None
    lm_scale: float = 1.0
    beam: float | None = None

    def __post_init__(self):
        _check_scale(self.lm_scale)
        _check_beam(self.beam)
        # plain floats, an infinite beam as None (exact, as the CLI says it): the config is
        # JSON (a NumPy float is not) and one setting has one digest (1 and 1.0 differ in JSON)
        object.__setattr__(self, "lm_scale", float(self.lm_scale))
        beam = None if self.beam is None or math.isinf(self.beam) else float(self.beam)
        object.__setattr__(self, "beam", beam)
        for name in ("new_lm", "old_lm"):
            path = getattr(self, name)
            if path is None:
                continue
            if not isinstance(path, str | os.PathLike):
                raise OptionsError(f"{name} must be an ARPA path; got {type(path).__name__}")
            try:  # (a workers' failure, each, else)
                mode = os.stat(path).st_mode
                if stat.S_ISDIR(mode):
                    raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
                if stat.S_ISREG(mode):  # a pipe (`<(zcat lm.arpa.gz)`) is not read: what this
                    with open(path, "rb") as f:  # read took would be gone for `load`
                        f.read(1)
            except OSError as exc:
                raise InputFileError(path, None, f"cannot read: {exc.strerror}") from None
            object.__setattr__(self, name, os.path.abspath(path))

    def load(self) -> LmRescoring:
        return LmRescoring(self.new_lm, self.old_lm, self.lm_scale, self.beam)

    def config(self) -> dict:
        """What changes the results: the models' contents (not their paths), scale and beam."""
        from .safe_io import file_sha256

        return {"new_lm_sha256": file_sha256(self.new_lm),
                "old_lm_sha256": None if self.old_lm is None else file_sha256(self.old_lm),
                "lm_scale": self.lm_scale, "beam": self.beam}  # fmt: skip


def _as_lm(lm) -> NgramLm:
    """An `NgramLm` as it is, or one read from an ARPA path."""
    if isinstance(lm, NgramLm):
        return lm
    if isinstance(lm, str | os.PathLike):
        return NgramLm(lm)
    raise OptionsError(f"an LM is an NgramLm or an ARPA path; got {type(lm).__name__}")


def _check_beam(beam) -> None:
    if beam is not None and (
        isinstance(beam, bool) or not isinstance(beam, numbers.Real) or not beam > 0
    ):
        raise OptionsError(f"rescoring beam must be a number > 0 or None; got {beam!r}")


def _check_scale(lm_scale) -> None:
    if (
        isinstance(lm_scale, bool)
        or not isinstance(lm_scale, numbers.Real)
        or not abs(lm_scale) <= MAX_LM_SCALE  # also NaN
    ):
        raise OptionsError(f"lm_scale must be a number in [-{MAX_LM_SCALE:g}, {MAX_LM_SCALE:g}]; "
                           f"got {lm_scale!r}")  # fmt: skip


def rescore(
    lattice: Lattice,
    words,
    new_lm: NgramLm | str | os.PathLike,
    old_lm: NgramLm | str | os.PathLike | None,
    lm_scale: float = 1.0,
    beam: float | None = None,
    max_nodes: int = 2_000_000,
) -> Lattice:
    """``lattice`` with each word sequence's graph cost moved from ``old_lm`` (the LM compiled
    into the first-pass graph, subtracted at scale 1; None: nothing subtracted) to ``new_lm`` at
    ``lm_scale`` (module docstring); an LM is an `NgramLm` or an ARPA path. ``words``: the
    graph's word table (the lattice's output labels).

    ``beam``: None composes exactly. A number prunes as the composition goes (as Kaldi's
    lattice-lmrescore-pruned): a split node whose rescored cost so far plus the first pass's
    best cost from its lattice node (graph costs at ``lm_scale``: the old LM's part of them goes,
    the new one's comes at that scale) exceeds the rescored cost of the first pass's best path
    by more than ``beam`` is not followed — an estimate (the new LM may make the rest of a path
    cheaper than the old did); the first pass's best path is always followed, so a path
    remains.
    Raises `OptionsError` when the expansion would pass ``max_nodes`` nodes."""
    return _rescore(lattice, words, new_lm, old_lm, lm_scale, beam, max_nodes)


def _rescore(lattice, words, new_lm, old_lm, lm_scale, beam, max_nodes=2_000_000, kept=None):
    """`rescore`; ``kept``: `_KeptSteps.of`'s entry for ``words``, whose checked names and
    steps it uses and adds to (None: its own, for this lattice only)."""
    _check_scale(lm_scale)
    _check_beam(beam)
    if isinstance(max_nodes, bool) or not isinstance(max_nodes, numbers.Integral) or max_nodes < 1:
        raise OptionsError(f"max_nodes must be an int >= 1; got {max_nodes!r}")
    lm_scale, max_nodes = float(lm_scale), int(max_nodes)  # (NumPy numbers welcome)
    beam = float(beam) if beam is not None else None
    if not isinstance(lattice, Lattice):
        raise OptionsError(f"rescore takes a Lattice; got {type(lattice).__name__}")
    new_lm = _as_lm(new_lm)
    old_lm = _as_lm(old_lm) if old_lm is not None else None

    def step(state, word):
        """``(cost change, next state)``: the state is both models' (old, new)."""
        c_new, s_new = new_lm.step(state[1], word)
        if old_lm is None:
            return lm_scale * c_new, (None, s_new)
        c_old, s_old = old_lm.step(state[0], word)
        return lm_scale * c_new - c_old, (s_old, s_new)

    n = lattice.num_nodes
    first = first_arcs(lattice.src, n)
    if kept is None:
        kept = [None, {}, None]  # (no word table to hold: this lattice only)
    names = _word_names(lattice, words, old_lm, kept[1])
    start = (old_lm.start if old_lm is not None else None, new_lm.start)
    beta, limit, best_arcs = np.zeros(n), math.inf, np.zeros(0, np.int64)
    if beam is not None and n:
        # what is left of a path after a node: the first pass's best, its graph costs (the old
        # LM's, mostly) at lm_scale, as the rescored path's will be
        ahead = lattice if lm_scale == 1 else replace(
            lattice, graph_cost=(lattice.graph_cost * lm_scale).astype(np.float32), _cache={}
        )  # fmt: skip
        beta = ahead.backward()
        best, best_arcs = _rescored_best(lattice, names, step, start)
        limit = best + beam
    if kept[2] is None:
        kept[2] = StepTable(start, lambda state, w: step(state, names[w]))
    node_of, state_of, states, src_new, dst_new, arc_of, extra = compose(
        first, lattice.dst, lattice.olabel, lattice.arc_cost(), beta, limit, best_arcs, start,
        None, max_nodes, kept[2],
    )  # fmt: skip
    final = lattice.final[node_of].astype(np.float64)
    ends = np.flatnonzero(np.isfinite(final))
    end_states, which = np.unique(state_of[ends], return_inverse=True)
    final[ends] += np.array([step(states[q], EOS)[0] for q in end_states.tolist()])[which]
    # topological order: by the lattice's node, then order of creation
    order_new = np.lexsort((np.arange(len(node_of)), node_of))
    rank = np.empty_like(order_new)
    rank[order_new] = np.arange(len(order_new))
    src_r, dst_r = rank[src_new], rank[dst_new]
    by_src = np.argsort(src_r, kind="stable")
    arcs = arc_of[by_src]
    graph_cost = (lattice.graph_cost[arcs].astype(np.float64)
                  + extra[by_src]).astype(np.float32)  # fmt: skip
    names_kept = ("graph_arc", "ilabel", "olabel", "frame", "acoustic_cost")
    fields = {name: getattr(lattice, name)[arcs] for name in names_kept}
    note = f"rescored with {os.path.basename(new_lm.path) or 'a new LM'} at lm_scale {lm_scale:g}"
    out = Lattice(
        lattice.num_frames, lattice.node_frame[node_of[order_new]],
        lattice.node_state[node_of[order_new]], final[order_new].astype(np.float32),
        src_r[by_src].astype(np.int32), dst_r[by_src].astype(np.int32),
        graph_cost=graph_cost, acoustic_scale=lattice.acoustic_scale,
        notes=(*lattice.notes, note), **fields,
    )  # fmt: skip
    return out if beam is None else out.pruned(math.inf)  # drop the paths not followed


def _word_names(lattice: Lattice, words, old_lm: NgramLm | None, names: dict) -> dict[int, str]:
    """``names`` (words by id, already checked) with the lattice's words added, refused where
    the rescoring would make no sense: an id the word table lacks, an oov slot's label (a
    spelled word is several labels, none an n-gram word), a word the old LM lacks (the graph
    was not built from it: subtracting its `MISSING_WORD_LOG10` would hand the path a bonus of
    ~230 nats)."""
    from .graph.oov_slot import is_slot_label

    for w in np.unique(lattice.olabel).tolist():
        if not w or w in names:
            continue
        try:
            name = words.symbol(w)
        except SymbolError:
            raise OptionsError(f"the lattice's output label {w} is not in the word table "
                               f"({len(words)} symbols): is it the first-pass graph's "
                               f"words.txt?") from None  # fmt: skip
        if is_slot_label(name):
            raise OptionsError(f"the lattice holds the oov slot's label {name!r}: rescoring "
                               "needs lattices of a graph without an oov slot (its spelled "
                               "words are not n-gram words)")  # fmt: skip
        if old_lm is not None and (name,) not in old_lm.model.ngrams[0]:
            raise OptionsError(f"the lattice's word {name!r} is not in the old LM "
                               f"{old_lm.path}: give the LM the graph was built from")  # fmt: skip
        names[w] = name
    return names


def _rescored_best(lattice: Lattice, names, step, start) -> tuple[float, np.ndarray]:
    """The rescored cost of the lattice's best path (a cost the rescored lattice reaches) and
    its arcs, which the pruned composition always follows."""
    found = lattice.best_path()
    if found is None:
        return math.inf, np.zeros(0, np.int64)
    arcs, cost = found
    state = start
    labels = lattice.olabel[arcs]
    for w in labels[labels != 0].tolist():
        change, state = step(state, names[w])
        cost += change
    return cost + step(state, EOS)[0], arcs
