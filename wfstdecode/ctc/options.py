"""`CtcBeamOptions`: the one frozen options object of the CTC WFST beam search (every backend)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import OptionsError

# Limits that keep float32 search costs meaningful whatever the input's magnitude (a cost of 1e6
# still resolves 0.06, far finer than any beam): log-probs more than LOG_PROB_FLOOR below their
# frame's best are raised to it (-inf stays impossible); scales, penalties and word bonuses are
# bounded so that no single term can swamp the others.
LOG_PROB_FLOOR = -1000.0
ACOUSTIC_SCALE_RANGE = (1e-3, 1e3)
MAX_COST_TERM = 1000.0  # |blank_penalty|, |word_insertion_penalty|, |word bonus|
MAX_COUNT = 2**31 - 1  # max_active, min_active, nbest, mbr_candidates, max_candidates


@dataclass(frozen=True)
class CtcBeamOptions:
    """Options of `decode_ctc`; shared by every backend.

    beam:                   pruning beam in cost units (a log-score margin) relative to the best
                            token of the frame; ``math.inf`` disables beam pruning.
    max_active:             at most this many tokens survive a frame (the cutoff becomes the cost of
                            the ``max_active``-th best token; exact ties at the cutoff survive too).
    min_active:             at least this many tokens survive a frame when that many exist (the
                            cutoff widens to the ``min_active``-th best cost). 1 = no effect.
    acoustic_scale:         log-probs are multiplied by this before they enter the search; in
                            ``ACOUSTIC_SCALE_RANGE`` (1e-3 .. 1e3). The search itself uses each
                            frame's log-probs relative to that frame's best, floored at
                            ``LOG_PROB_FLOOR`` (-1000) — a per-frame constant, so paths rank as
                            with the raw values (but for a path through a floored log-prob, a
                            probability under e^-1000); ``Hypothesis`` scores use the unfloored
                            values (as float32).
    blank_penalty:          cost added on every frame that takes a blank arc (positive = fewer
                            blanks, i.e. more tokens). Counted in ``graph_score``. At most
                            ``MAX_COST_TERM`` (1000) in magnitude, as is the next one.
    word_insertion_penalty: cost added for every output word (positive = fewer words). Counted in
                            ``graph_score``.
    nbest:                  hypotheses returned per utterance, best first. Without
                            ``lattice_beam``: the surviving end tokens (one per graph state)
                            traced back, duplicates of a better word sequence dropped — paths
                            that recombined into the same state are gone, so fewer may come
                            back (one when the graph has a single final state). With it: the
                            best path, then the next best distinct word sequences of the lattice.
    lattice_beam:           None (no lattice), or a beam > 0 (``math.inf`` allowed): the lattice
                            keeps every path through the search's surviving tokens within this
                            much of the best (`wfstdecode.ctc.lattice`; Kaldi's lattice beam),
                            and ``nbest > 1`` takes its n best distinct word sequences (each its
                            best alignment); every hypothesis gets its words' posteriors in the
                            lattice (``Hypothesis.word_confidences``; not on a graph with an
                            oov slot, whose hypotheses say so in their notes). Every backend
                            (cuda: host log-probs); `ctc_lattices` returns the lattices
                            themselves. Every frame's survivors are kept until the end (8
                            bytes each: a long input at a wide beam needs frames x survivors
                            x 8 bytes).
    mbr_candidates:         0 (the most probable path first), or at least 2: minimum Bayes risk
                            decoding over the lattice's this many best word sequences — they
                            are ranked by their expected word errors against each other under
                            the lattice's posteriors, and the first ``nbest`` returned (needs
                            ``lattice_beam``; with ``nbest`` above it, the lattice's next best
                            sequences follow, unranked: the ranking never depends on nbest).
    posteriors:             what the lattice's posteriors (word confidences, MBR) count:
                            ``"lattice"`` (default: every path of the state-level lattice, so a
                            word sequence with more alignments or graph paths — backoff arcs,
                            pronunciations — gains probability) or ``"determinized"`` (Kaldi's:
                            each word sequence once, by its best alignment, on the lattice
                            determinized on words, `wfstdecode.compact_lattice`; better
                            calibrated and a much better MBR on speech (`bench/ctc_lattice.md`),
                            but determinizing costs time: a speech decode at lattice beam 8
                            took 3.5x as long as with ``"lattice"``; where it would pass
                            100,000 states the lattice beam is halved until it fits, and the
                            hypotheses say so in their notes; where even 0.25 does not fit
                            (exactly tied paths), that utterance's state-level lattice is used,
                            with a note).
    max_candidates:         cuda backend: states one utterance may reach in a frame before
                            pruning (its token table holds twice as many slots). None = twice
                            ``max_active`` (at least 256), at most the graph's state count. A frame
                            that fills the table keeps going with a tightened beam and says so in
                            ``Hypothesis.notes``. The CPU backends grow their buffers instead.
    cuda_graphs:            cuda backend: ``"auto"`` (capture each chunk of frames once as a CUDA
                            graph when CuPy can, else launch kernels one by one), ``"on"`` (raise
                            when it cannot) or ``"off"``. Changes speed, never results.
    blank_skip_threshold:   None (every frame searched), or a probability in (0, 1]: a frame
                            whose blank probability is above this is left out of the search
                            (as torchaudio's CUDA CTC decoder's option of that name, and phone
                            synchronous decoding, do) — but for a run of such frames between
                            two kept frames whose best column is one and the same token: left
                            out, it would put them side by side, and a topology may read ``a
                            a`` as one token where ``a <blk> a`` is two. The search runs on the
                            other frames as if they were the input, so it cannot put a token on
                            a skipped frame. On the shipped OCR and
                            speech posteriors 26-61 % of the frames are skipped at 0.95-0.99,
                            which saves up to that share of the search at little or no
                            accuracy (`bench/ctc_cpu_pareto.md`). Hypotheses keep the input's
                            frame numbers, and a skipped frame's blank log-prob (times the
                            acoustic scale) is in every hypothesis' ``acoustic_score`` (no arc
                            was taken there: no graph cost, no blank penalty). Frames holding
                            NaN or +inf are never skipped (they raise as ever). With host
                            log-probs on every backend; GPU-resident log-probs are read on the
                            host (one copy). Streams too (`CtcStreamDecoder`: the same frames
                            skipped, a run's fate waiting for the next frame kept; partial
                            results, endpoints and ``frames`` in the input's frames).
                            `ctc_lattices` and written lattices do not take it (a lattice's
                            frames are the search's).
    """

    beam: float = 16.0
    max_active: int = 10_000
    min_active: int = 1
    acoustic_scale: float = 1.0
    blank_penalty: float = 0.0
    word_insertion_penalty: float = 0.0
    nbest: int = 1
    lattice_beam: float | None = None
    mbr_candidates: int = 0
    posteriors: str = "lattice"
    max_candidates: int | None = None
    cuda_graphs: str = "auto"
    blank_skip_threshold: float | None = None

    def __post_init__(self):
        def plain(name):  # a NumPy scalar (read from an array or a config) as Python's own
            value = getattr(self, name)
            if isinstance(value, (np.integer, np.floating)) and not isinstance(value, np.bool_):
                value = value.item()
                object.__setattr__(self, name, value)
            return value

        def number(name):  # kept as a float: 16 and 16.0 are one setting (one config digest)
            value = plain(name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise OptionsError(f"CtcBeamOptions.{name} must be a number; got {value!r}")
            object.__setattr__(self, name, float(value))
            return float(value)

        def integer(name):
            value = plain(name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise OptionsError(f"CtcBeamOptions.{name} must be an int; got {value!r}")
            if value > MAX_COUNT:  # counts become int32 / int64 array entries
                raise OptionsError(f"CtcBeamOptions.{name} must be at most {MAX_COUNT}; got "
                                   f"{value}")  # fmt: skip
            return value

        beam = number("beam")
        if math.isnan(beam) or beam <= 0:
            raise OptionsError(f"CtcBeamOptions.beam must be > 0 (inf for no beam); got {beam}")
        if integer("max_active") < 1:
            raise OptionsError(f"CtcBeamOptions.max_active must be >= 1; got {self.max_active}")
        if integer("min_active") < 1:
            raise OptionsError(f"CtcBeamOptions.min_active must be >= 1; got {self.min_active}")
        if self.min_active > self.max_active:
            raise OptionsError(
                f"CtcBeamOptions.min_active ({self.min_active}) exceeds max_active "
                f"({self.max_active})"
            )
        scale = number("acoustic_scale")
        lo, hi = ACOUSTIC_SCALE_RANGE
        if not lo <= scale <= hi:
            raise OptionsError(
                f"CtcBeamOptions.acoustic_scale must be in [{lo:g}, {hi:g}]; got {scale:g}"
            )
        for name in ("blank_penalty", "word_insertion_penalty"):
            if not abs(number(name)) <= MAX_COST_TERM:  # also rejects NaN
                raise OptionsError(
                    f"CtcBeamOptions.{name} must be in [-{MAX_COST_TERM:g}, {MAX_COST_TERM:g}]; "
                    f"got {getattr(self, name)}"
                )
        if integer("nbest") < 1:
            raise OptionsError(f"CtcBeamOptions.nbest must be >= 1; got {self.nbest}")
        if self.lattice_beam is not None:
            lattice_beam = number("lattice_beam")
            if math.isnan(lattice_beam) or lattice_beam <= 0:
                raise OptionsError("CtcBeamOptions.lattice_beam must be > 0 (inf for every "
                                   f"surviving path) or None; got {lattice_beam}")  # fmt: skip
        if integer("mbr_candidates") < 0 or self.mbr_candidates == 1:
            raise OptionsError("CtcBeamOptions.mbr_candidates must be 0 (off) or >= 2; got "
                               f"{self.mbr_candidates}")  # fmt: skip
        if self.posteriors not in ("determinized", "lattice"):
            raise OptionsError("CtcBeamOptions.posteriors must be 'determinized' or 'lattice'; "
                               f"got {self.posteriors!r}")  # fmt: skip
        if self.mbr_candidates and self.lattice_beam is None:
            raise OptionsError("CtcBeamOptions.mbr_candidates ranks a lattice's word sequences: "
                               "set lattice_beam too")  # fmt: skip
        if self.cuda_graphs not in ("auto", "on", "off"):
            raise OptionsError(
                "CtcBeamOptions.cuda_graphs must be 'auto', 'on' or 'off'; "
                f"got {self.cuda_graphs!r}"
            )
        if self.blank_skip_threshold is not None:
            threshold = number("blank_skip_threshold")
            if not 0 < threshold <= 1:  # (also rejects NaN)
                raise OptionsError("CtcBeamOptions.blank_skip_threshold must be a probability "
                                   f"in (0, 1] or None; got {threshold}")  # fmt: skip
        if self.max_candidates is not None and integer("max_candidates") < 1:
            raise OptionsError(
                f"CtcBeamOptions.max_candidates must be >= 1 or None; got {self.max_candidates}"
            )
