"""Independent implementations the tests and benchmarks compare against: OpenFst (pynini) on
linear inputs, and kaldi-decoder's FasterDecoder. Imports pynini / kaldi lazily."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence

import numpy as np


def pynini_fst(arrays):
    """A `wfstdecode.fstio.FstArrays` as a pynini Fst."""
    import pynini

    from ..fstio import write_openfst_bytes

    return pynini.Fst.read_from_string(write_openfst_bytes(arrays))


def emission_acceptor(lp: np.ndarray, scale: float):
    """One state per frame, an arc per token id + 1 with cost ``-scale * log_prob`` (-inf
    log-probs left out): E of E ∘ TLG."""
    from ..fstio import FstArrays

    T, V = lp.shape
    src = np.repeat(np.arange(T), V)
    lab = np.tile(np.arange(1, V + 1), T)
    cost = (-scale * lp.astype(np.float64)).reshape(-1)
    final = np.full(T + 1, np.inf, np.float32)
    final[T] = 0.0
    keep = np.isfinite(cost)
    return pynini_fst(FstArrays(0, final, src[keep], src[keep] + 1, lab[keep], lab[keep],
                                cost[keep]))  # fmt: skip


def openfst_shortest_path(lp: np.ndarray, graph_fst, scale: float):
    """``(output labels, cost)`` of OpenFst's shortest path through E ∘ ``graph_fst`` for one
    utterance's log-probs ``lp`` (T, V), or ``(None, None)`` when there is none: what the search
    finds with an unbounded beam."""
    import pynini

    composed = pynini.compose(emission_acceptor(lp, scale), graph_fst.copy().arcsort("ilabel"))
    path = pynini.shortestpath(composed).topsort().rmepsilon()
    if path.start() == -1:
        return None, None
    words, state, cost = [], path.start(), 0.0
    while True:
        arcs = list(path.arcs(state))
        if not arcs:
            cost += float(path.final(state))
            break
        (arc,) = arcs
        cost += float(arc.weight)
        if arc.olabel:
            words.append(arc.olabel)
        state = arc.nextstate
    return tuple(words), cost


def openfst_nbest(lp: np.ndarray, graph_fst, scale: float, n: int,
                  within: float | None = None) -> list[tuple[tuple, float]]:  # fmt: skip
    """The ``n`` best distinct output (word) sequences of E ∘ ``graph_fst``, best first, as
    ``(word ids, cost)``: OpenFst's n-shortest unique paths of the composition projected on
    words, epsilons removed and determinized (each sequence at the cost of its best path).
    ``within``: first prune to the paths within this cost of the best (determinizing every
    path of a large composition can take exponential memory)."""
    import pynini

    composed = pynini.compose(emission_acceptor(lp, scale), graph_fst.copy().arcsort("ilabel"))
    if within is not None:
        composed = pynini.prune(composed, weight=within)
    words = pynini.determinize(composed.project("output").rmepsilon())
    found = [
        (tuple(out), cost)
        for _, out, cost in paths(pynini.shortestpath(words, nshortest=n, unique=True))
    ]
    return sorted(found, key=lambda x: x[1])


def linear_acceptor(labels: Sequence[int], loop_label: int | None = None):
    """pynini acceptor of exactly ``labels`` (with a ``loop_label`` self-loop on every state)."""
    import pynini

    fst = pynini.Fst()
    states = [fst.add_state() for _ in range(len(labels) + 1)]
    fst.set_start(states[0])
    fst.set_final(states[-1])
    one = pynini.Weight.one("tropical")
    for i, state in enumerate(states):
        if loop_label is not None:
            fst.add_arc(state, pynini.Arc(loop_label, loop_label, one, state))
        if i < len(labels):
            fst.add_arc(state, pynini.Arc(labels[i], labels[i], one, states[i + 1]))
    return fst


def paths(fst) -> Iterator[tuple[list[int], list[int], float]]:
    """(input labels, output labels, weight) of every path of an acyclic pynini FST, epsilons
    dropped."""
    it = fst.paths()
    while not it.done():
        yield ([x for x in it.ilabels() if x], [x for x in it.olabels() if x], float(it.weight()))
        it.next()


class KaldiFasterDecoder:
    """kaldi-decoder's FasterDecoder on a `DecodingGraph` (written to OpenFst and read back)."""

    def __init__(self, graph, beam: float, max_active: int = 2**31 - 1, min_active: int = 0):
        import kaldi_decoder
        import kaldifst

        self._kaldi, self._kaldifst = kaldi_decoder, kaldifst
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "graph.fst")
            graph.to_openfst(path)
            fst = kaldifst.StdVectorFst.read(path)
        opts = kaldi_decoder.FasterDecoderOptions(
            beam=beam, max_active=max_active, min_active=min_active
        )
        self._decoder = kaldi_decoder.FasterDecoder(fst, opts)
        self.fst = fst

    @classmethod
    def like(cls, graph, options) -> KaldiFasterDecoder:
        """The FasterDecoder that prunes as ``options`` (`CtcBeamOptions`) do: the same beam and
        max_active, and min_active one less. Kaldi's cutoff widens to the cost at index
        ``min_active`` of the frame's sorted costs (the ``min_active + 1``-th best; it keeps the
        costs strictly below it and widens the next frame's beam by as much: its adaptive beam),
        ours to the ``min_active``-th best. Ours at 1 (the beam alone) is Kaldi's at 0 exactly;
        above, neither Kaldi setting is ours (Kaldi's ``min_active - 1`` keeps one token fewer
        and widens the next beam): shipped OCR lines, scale 2, beam 3, our min_active 2 and 5:
        the same words on 58 and 47 of 60 (53 and 48 with Kaldi's ``min_active``).

        A ``max_active`` that binds pairs exactly with no Kaldi setting: Kaldi keeps the costs
        strictly below the ``max_active + 1``-th best, so tokens tied there (0-cost epsilon arcs
        make many) are all dropped, every token when they tie with the best (its search then has
        no path); ours keeps ties. It also narrows the next frame's beam to that cutoff plus
        ``beam_delta``. Shipped OCR lines, beam 8: the same words on 13, 12, 27, 48, 58 of 60 at
        max_active 2, 3, 5, 10, 30 (Kaldi finds no path on 35 and 39 at 2 and 3); Kaldi's
        max_active + 1, or a wide ``beam_delta``, is no closer.
        """
        return cls(graph, options.beam, options.max_active, options.min_active - 1)

    def best_path(
        self, log_probs: np.ndarray, acoustic_scale: float = 1.0
    ) -> tuple[tuple[int, ...], float] | None:
        """(word ids, cost) of the best path for one utterance's (T, V) log-probs, or None."""
        feats = np.ascontiguousarray(log_probs * np.float32(acoustic_scale), dtype=np.float32)
        self._decoder.decode(self._kaldi.DecodableCtc(feats))
        ok, lattice = self._decoder.get_best_path()
        if not ok:
            return None
        ok, _, olabels, weight = self._kaldifst.get_linear_symbol_sequence(lattice)
        return (tuple(olabels), weight.value1 + weight.value2) if ok else None
