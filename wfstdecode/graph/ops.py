"""The OpenFst algorithms used to build graphs, through pynini, on `FstArrays`."""

from __future__ import annotations

import numpy as np

from ..fstio import FstArrays, read_openfst_bytes, write_openfst_bytes


def _pynini():
    try:
        import pynini
    except ImportError as exc:  # pragma: no cover - pynini is a dependency
        raise ImportError("graph building needs pynini: pip install 'pynini>=2.1.6'") from exc
    return pynini


def to_pynini(fst: FstArrays):
    return _pynini().Fst.read_from_string(write_openfst_bytes(fst))


def from_pynini(fst) -> FstArrays:
    return read_openfst_bytes(fst.write_to_string())


def sort_arcs(fst: FstArrays) -> FstArrays:
    """Arcs grouped by state and sorted by input label (OpenFst's ilabel-sorted order)."""
    order = np.lexsort((fst.olabel, fst.ilabel, fst.src))
    return FstArrays(fst.start, fst.final, fst.src[order], fst.dst[order], fst.ilabel[order],
                     fst.olabel[order], fst.weight[order])  # fmt: skip


def compose(a, b):
    """``a ∘ b`` of pynini FSTs, sorting the sides the matcher needs; result is connected."""
    pynini = _pynini()
    a = a.copy().arcsort("olabel")
    b = b.copy().arcsort("ilabel")
    return pynini.compose(a, b, connect=True)


def determinize_minimize(fst):
    """Functional determinization, then minimization with labels and weights encoded (so no
    weights move)."""
    pynini = _pynini()
    fst = pynini.determinize(fst)
    mapper = pynini.EncodeMapper(fst.arc_type(), True, True)
    fst.encode(mapper)
    fst.minimize()
    fst.decode(mapper)
    return fst


def push_labels(fst):
    """Output labels pushed toward the initial state (word boosts then act earlier)."""
    return _pynini().push(fst, push_labels=True)


def relabel_inputs_above(fst: FstArrays, max_label: int) -> FstArrays:
    """Input labels above ``max_label`` (disambiguation symbols) become epsilon; epsilon
    self-loops of cost 0 that this creates are dropped."""
    ilabel = np.where(fst.ilabel > max_label, 0, fst.ilabel)
    keep = ~((ilabel == 0) & (fst.olabel == 0) & (fst.src == fst.dst) & (fst.weight == 0))
    return FstArrays(fst.start, fst.final, fst.src[keep], fst.dst[keep], ilabel[keep],
                     fst.olabel[keep], fst.weight[keep])  # fmt: skip


def size(fst) -> dict:
    """States and arcs of a pynini FST or `FstArrays`."""
    if isinstance(fst, FstArrays):
        return {"states": fst.num_states, "arcs": fst.num_arcs}
    return {"states": fst.num_states(), "arcs": sum(fst.num_arcs(s) for s in fst.states())}
