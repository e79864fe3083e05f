"""`decode_ctc`: the public CTC WFST beam search and the only place that picks a backend.

The semantics (token passing, recombination, tie-breaks, pruning, end of utterance) are written out
in `wfstdecode.ctc.reference`; every backend reproduces them exactly.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from ..array_checks import refuse_misread
from ..backends import ctc_backend, is_device_array, is_numba_device_array, resolve_ctc_backend
from ..compact_lattice import determinize_pruned
from ..decoding_graph import DecodingGraph
from ..errors import DecodeInputError, OptionsError
from ..interrupts import interrupts_raised, signals_deferred
from ..lattice import Lattice
from ..rescore import LmRescoring, check_rescorable
from ..results import Hypothesis, changed
from ..symbols import blank_symbol
from ._paths import in_input_frames, to_hypotheses
from ._problem import (
    ALL_NEG_INF,
    FINE,
    NAN_OR_POS_INF,
    RawResult,
    SearchProblem,
    costs_and_first_bad,
)
from .blank_skip import skip_blank_frames
from .boost import build_boost_tables, resolve_boosts
from .lattice import (
    lattice_hypotheses,
    lattice_search,
    mbr_ranked,
    nbest_results,
    with_confidences,
)
from .oov import OovSpeller
from .options import CtcBeamOptions
from .phrases import NO_SLOT
from .status import DIED
from .tuning import CpuTuning, CudaTuning, tuning_for

Boosts = Mapping | Sequence[Mapping | None] | None


def decode_ctc(
    log_probs,
    lengths,
    graph: DecodingGraph,
    options: CtcBeamOptions | None = None,
    boosts: Boosts = None,
    backend: str = "auto",
    *,
    tuning: CpuTuning | CudaTuning | None = None,
    num_threads: int | None = None,
    oov_lexicon: Mapping | None = None,
    rescore: LmRescoring | None = None,
) -> list[list[Hypothesis]]:
    """Decode a batch of CTC log-probabilities against a decoding graph (TLG).

    log_probs:   (B, T, V) log-probabilities (float16/32/64), a NumPy array, a torch tensor or a
                 CuPy / Numba device array. GPU-resident inputs stay where they are for the cuda
                 backend (read in place through the CUDA array interface, strides allowed) and
                 are copied to the host for the CPU backends. V is the graph's token count;
                 column ``k`` is token id ``k`` (blank is an ordinary column).
    lengths:     (B,) valid frames per utterance, 0 <= length <= T (integers); None = all T.
    graph:       a `DecodingGraph`.
    options:     `CtcBeamOptions` (default ``CtcBeamOptions()``).
    boosts:      None, one mapping ``phrase -> bonus`` for every utterance, or a list of B
                 mappings (or None). A key is a word, a phrase (words separated by spaces, or a
                 tuple of words / word ids) or a word id; the bonus is per word (a positive bonus
                 makes the phrase more likely): every occurrence of a phrase in a hypothesis earns
                 its bonus once per word, and a partial match earns it word by word and gives it
                 back when it fails (`wfstdecode.ctc.phrases`). A word not in the graph is
                 spelled through the graph's oov slot when it has one (``build-tlg --oov-slot``;
                 `wfstdecode.ctc.oov`) and comes out as a word; without a slot, phrases with
                 such a word warn and are ignored.
    backend:     ``"auto"`` (cuda for GPU-resident inputs when available, else cpu),
                 ``"reference"`` (pure Python, slow), ``"cpu"`` (Numba) or ``"cuda"``.
    tuning:      speed-only settings of the backend that runs: `CpuTuning` or `CudaTuning`
                 (None = defaults; one for another backend raises).
    num_threads: shorthand for ``tuning=CpuTuning(num_threads)``.
    oov_lexicon: pronunciations of boosted words the graph lacks, ``{word: "tok tok …" or a
                 list of them}``, for a graph with an oov slot (needed when its words were
                 spelled from a pronunciation lexicon; else it overrides the graph's recipe).
    rescore:     `wfstdecode.rescore.LmRescoring`: each utterance's lattice (``options.
                 lattice_beam`` must be set) gets the new LM's scores in place of the first
                 pass's, and the hypotheses are its n best (scores: the rescored graph side).

    Returns one list per utterance of up to ``options.nbest`` `Hypothesis`, best first.
    Documented results: an empty batch gives ``[]``; a zero-length utterance gives the best path
    through the epsilon arcs of the start state (usually no words); if no surviving token is final
    at the end, the best partial path is returned with a note; if every token dies (e.g. the graph
    cannot follow the log-probs), one empty hypothesis with score ``-inf`` and a note.
    Raises `DecodeInputError` for malformed inputs, naming the offending shape or value.
    """
    options = CtcBeamOptions() if options is None else options
    with interrupts_raised():  # (a Ctrl-C as such: `interrupts`)
        problem, name, tuning = prepared(
            log_probs, lengths, graph, options, boosts, backend, tuning, num_threads,
            oov_lexicon, rescore,
        )  # fmt: skip
        if problem.batch_size == 0:
            return []
        if options.lattice_beam is not None:
            return in_input_frames(problem, lattice_decode(problem, name, tuning, rescore)[0])
        return in_input_frames(problem, to_hypotheses(problem, ctc_backend(name)(problem, tuning)))


def ctc_lattices(
    log_probs,
    lengths,
    graph: DecodingGraph,
    options: CtcBeamOptions,
    boosts: Boosts = None,
    backend: str = "auto",
    *,
    tuning: CpuTuning | None = None,
    num_threads: int | None = None,
    oov_lexicon: Mapping | None = None,
) -> list[Lattice | None]:
    """The lattice of each utterance (`wfstdecode.lattice.Lattice`): the paths through the
    search's surviving tokens within ``options.lattice_beam`` (required) of the best; None for
    an utterance whose search died. Arguments as `decode_ctc`; every backend makes them
    (``"auto"`` is cpu; cuda reads host log-probs). The lattice's best path is the search's
    best path (same words and cost up to float rounding)."""
    if not isinstance(options, CtcBeamOptions):
        raise OptionsError(f"options must be a CtcBeamOptions; got {type(options).__name__}")
    check_lattices_kept(options, "ctc_lattices")
    with interrupts_raised():
        problem, name, tuning = prepared(log_probs, lengths, graph, options, boosts, backend,
                                         tuning, num_threads, oov_lexicon)  # fmt: skip
        if problem.batch_size == 0:
            return []
        return lattice_search(problem, name, tuning)[1]  # (no hypotheses made)


def lattice_decode(problem: SearchProblem, name: str, tuning, rescore=None) -> tuple[list, list]:
    """The hypotheses (n-best from the lattice) and the pruned lattices of a checked problem,
    rescored (`LmRescoring`) if asked: then the hypotheses are the rescored lattice's n best
    (the search's where it died)."""
    raws, pruned = lattice_search(problem, name, tuning)
    return lattice_results(problem, raws, pruned, rescore)


def lattice_results(problem: SearchProblem, raws: list, pruned: list,
                    rescore=None) -> tuple[list, list]:  # fmt: skip
    """`lattice_decode` after the search: from each utterance's `RawResult` and pruned lattice
    (None where the search died), the hypotheses and the final (rescored) lattices. Streams
    (`stream.CtcStreamDecoder`) finish through here too."""
    options = problem.options
    n = max(options.nbest, options.mbr_candidates)  # the candidates MBR ranks
    final, better = pruned, [None] * len(pruned)
    if rescore is not None:
        final = [None if lat is None else rescore.apply(lat, problem.graph.words) for lat in pruned]
        better = lattice_hypotheses(problem, raws, final, n)
    # the first pass's hypotheses where rescoring gave none (the search died)
    rescored = [b is not None for b in better]
    first_raws = [RawResult([], DIED) if r else raw for raw, r in zip(raws, rescored, strict=True)]
    first_lats = [None if r else lat for lat, r in zip(pruned, rescored, strict=True)]
    hyps = to_hypotheses(problem, nbest_results(problem, first_raws, first_lats, n))
    hyps = [h if b is None else b for h, b in zip(hyps, better, strict=True)]
    if rescore is not None:  # a lattice rescoring left without a complete path: say so
        hyps = [[changed(h, notes=(*h.notes, NOT_RESCORED)) for h in utt]
                if lat is not None and b is None else utt
                for utt, lat, b in zip(hyps, pruned, better, strict=True)]  # fmt: skip
    posterior = final
    # (with an oov slot no posterior is used: spelled words are several lattice labels each)
    if options.posteriors == "determinized" and problem.oov is None:  # beam lowered if need be
        posterior = [None if lat is None else determinized_posteriors(lat, options.lattice_beam)
                     for lat in final]  # fmt: skip
    if options.mbr_candidates:
        hyps = mbr_ranked(problem, hyps, posterior)
    hyps = with_confidences(problem, hyps, posterior)
    if options.posteriors == "determinized":
        hyps = [utt if c is None or c.notes == lat.notes else
                [changed(h, notes=(*h.notes, *c.notes[len(lat.notes):])) for h in utt]
                for utt, c, lat in zip(hyps, posterior, final, strict=True)]  # fmt: skip
    return hyps, final


NOT_RESCORED = (
    "rescoring left the lattice no complete path: the first pass's hypotheses, not rescored"
)
UNDETERMINIZED = (
    "word determinization passed its limits even at its smallest lattice beam "
    "(many exactly tied paths): posteriors of the state-level lattice instead"
)


def determinized_posteriors(lat: Lattice, beam: float):
    """What ``posteriors="determinized"`` weighs ``lat``'s word sequences by: its
    `CompactLattice` (`determinize_pruned`, the beam lowered if need be); where even the
    smallest beam is too much (exactly tied paths: every beam keeps them all), ``lat`` itself
    with a note saying so, rather than an error that fails the whole batch."""
    try:  # (costs relative to each frame's best: a frame of huge log-probs left no posterior)
        return determinize_pruned(lat.frame_relative(), beam, alignments=False)[0]
    except OptionsError:
        return replace(lat, notes=(*lat.notes, UNDETERMINIZED))


def check_lattices_kept(options: CtcBeamOptions, who: str) -> None:
    """What ``who`` (an interface that hands the lattices out) needs of ``options``: a lattice
    beam, and no blank skipping (a lattice counts the frames searched; hypotheses are mapped
    back to the input's frames, lattices are not)."""
    if options.lattice_beam is None:
        raise OptionsError(f"{who} keeps lattices: it needs options with lattice_beam set")
    if options.blank_skip_threshold is not None:
        raise OptionsError(f"{who} keeps lattices, which count the frames searched: not with "
                           "blank_skip_threshold (decode_ctc's hypotheses keep the input's "
                           "frames)")  # fmt: skip


def check_lattice_options(options: CtcBeamOptions, graph: DecodingGraph, rescore) -> None:
    """What the lattice options need of the graph (and ``rescore`` of the options)."""
    if rescore is not None:
        if not isinstance(rescore, LmRescoring):
            raise OptionsError(f"rescore must be an LmRescoring; got {type(rescore).__name__}")
        if options.lattice_beam is None:
            raise OptionsError("rescoring works on lattices: set CtcBeamOptions.lattice_beam")
        check_rescorable(graph)
    if options.mbr_candidates and "oov_slot" in graph.metadata:
        raise OptionsError("MBR needs a graph without an oov slot (a spelled word is several "
                           "lattice labels)")  # fmt: skip
    lattice = options.lattice_beam is not None  # (posteriors mean nothing without a lattice)
    if lattice and options.posteriors == "determinized" and "oov_slot" in graph.metadata:
        raise OptionsError("posteriors='determinized' needs a graph without an oov slot: its "
                           "hypotheses get no word confidences (a spelled word is several "
                           "lattice labels)")  # fmt: skip


def prepared(log_probs, lengths, graph, options, boosts, backend, tuning, num_threads,
             oov_lexicon, rescore=None):  # fmt: skip
    """The checked `SearchProblem`, the backend's name (a lattice backend when
    ``options.lattice_beam`` is set) and its tuning. Signals wait for it to end: its compiled
    passes load their code on a process's first call, where a Ctrl-C was swallowed (the module
    docstring of `wfstdecode.interrupts`); it takes milliseconds (7 ms for 16 MB of log-probs
    on one core, once its code is loaded)."""
    return signals_deferred(_prepared, log_probs, lengths, graph, options, boosts, backend,
                            tuning, num_threads, oov_lexicon, rescore)  # fmt: skip


def _prepared(log_probs, lengths, graph, options, boosts, backend, tuning, num_threads,
              oov_lexicon, rescore):  # fmt: skip
    if not isinstance(options, CtcBeamOptions):
        raise OptionsError(f"options must be a CtcBeamOptions; got {type(options).__name__}")
    if not isinstance(graph, DecodingGraph):
        raise DecodeInputError(f"graph must be a DecodingGraph; got {type(graph).__name__}")
    check_lattice_options(options, graph, rescore)
    if options.lattice_beam is not None:  # "auto": cpu (a lattice is built on the host)
        name = "cpu" if backend == "auto" else resolve_ctc_backend(backend)
    else:
        name = resolve_ctc_backend(backend, log_probs)
    tuning = tuning_for(name, tuning, num_threads)
    # lattices read the host log-probs (their arcs' acoustic scores)
    # (blank skipping picks the frames on the host)
    on_device = (name == "cuda" and is_device_array(log_probs) and options.lattice_beam is None
                 and options.blank_skip_threshold is None)  # fmt: skip
    threads = tuning.num_threads if isinstance(tuning, CpuTuning) else 1
    problem = prepare_problem(log_probs, lengths, graph, options, boosts, on_device, oov_lexicon,
                              threads)  # fmt: skip
    return problem, name, tuning


def prepare_problem(
    log_probs, lengths, graph, options, boosts, on_device=False, oov_lexicon=None, threads=1
) -> SearchProblem:
    """Validate and convert the inputs of `decode_ctc` (shared by every backend). With
    ``on_device`` the log-probs stay on the GPU (checked there) for the cuda backend;
    ``threads``: the host pass over the log-probs spreads utterances over that many (None:
    Numba's default)."""
    if on_device:
        from .cuda.inputs import check_device_log_probs, device_log_probs

        lp = device_log_probs(log_probs)
    else:
        given = host_floats(log_probs)
        with np.errstate(over="ignore"):
            lp = given.astype(np.float32, copy=False)
    if lp.ndim != 3:
        raise DecodeInputError(f"log_probs must be (B, T, V); got shape {tuple(lp.shape)}")
    B, T, V = lp.shape
    max_ilabel = largest_label(graph, "ilabel")  # the log-prob column read last + 1
    if graph.tokens is not None and graph.num_tokens != V:
        raise DecodeInputError(
            f"log_probs has V={V} columns but the graph's token table has {graph.num_tokens} "
            f"tokens (log_probs shape {tuple(lp.shape)})"
        )
    if max_ilabel > V:
        raise DecodeInputError(
            f"log_probs has V={V} columns but the graph reads column {max_ilabel - 1}"
        )
    lens = _lengths(lengths, B, T)
    oov = None
    if "oov_slot" in graph.metadata:
        oov = OovSpeller(graph, oov_lexicon)
    elif oov_lexicon:
        raise DecodeInputError("oov_lexicon needs a graph with an oov slot (build-tlg --oov-slot)")
    largest_word = None  # without a word table, ids beyond the graph's labels are unknown
    if boosts is not None and graph.words is None:
        largest_word = largest_label(graph, "olabel")
    words = output_words(graph) if boosts is not None else graph.words
    per_utt = resolve_boosts(boosts, B, words, oov, largest_word)
    slot_label = oov.slot.open if oov is not None else NO_SLOT
    blank = blank_id(graph)
    common = dict(
        lengths=lens,
        graph=graph,
        arc_cost=arc_costs(graph, options, blank),
        boosts=build_boost_tables(per_utt, slot_label),
        options=options,
        blank_ilabel=blank + 1,
        oov=oov,
    )
    if on_device:
        frame_max = check_device_log_probs(lp, lens)
        return SearchProblem(ac=None, device_lp=lp, device_frame_max=frame_max, **common)
    searched, skipped = lp, None
    if options.blank_skip_threshold is not None:
        searched, common["lengths"], skipped = skip_blank_frames(
            lp, lens, blank, options.blank_skip_threshold, options.acoustic_scale
        )
    ac, (b, t, bad) = costs_and_first_bad(searched, options.acoustic_scale, common["lengths"],
                                          threads)  # fmt: skip
    if bad != FINE and skipped is not None:  # (the frame as the caller numbers it)
        t = int(skipped.frame_map[b, t])
    if bad == NAN_OR_POS_INF:
        beyond = beyond_float32(given[b, t], lp[b, t])
        if beyond:
            raise DecodeInputError(f"log_probs[{b}, {t}, {beyond} (frame within lengths[{b}])", b)
        what = "NaN" if np.isnan(lp[b, t]).any() else "+inf"
        raise DecodeInputError(
            f"log_probs[{b}, {t}] contains {what} (frame within lengths[{b}])", b
        )
    if bad == ALL_NEG_INF:
        beyond = beyond_float32(given[b, t], lp[b, t], -np.inf)
        if beyond:
            raise DecodeInputError(f"log_probs[{b}, {t}, {beyond} (frame within lengths[{b}])", b)
        raise DecodeInputError(f"log_probs[{b}, {t}] is -inf in every column", b)
    return SearchProblem(ac=ac, log_probs=searched, skipped=skipped, **common)


def blank_id(graph: DecodingGraph) -> int:
    """The blank's token id: ``<blk>`` (or ``<blank>``) in the graph's token table, else 0."""
    blank = blank_symbol(graph.tokens) if graph.tokens is not None else None
    if blank is not None:
        return graph.tokens.id(blank)
    return int(graph.metadata.get("blank_id", 0))


_ARC_COST_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_LARGEST_LABEL_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def largest_label(graph: DecodingGraph, field: str) -> int:
    """The largest ``"ilabel"`` or ``"olabel"`` of the graph's arcs, cached per graph: a pass
    over every arc (milliseconds for a full-size TLG) per call would cost more than decoding a
    short utterance."""
    known = _LARGEST_LABEL_CACHE.setdefault(graph, {})
    if field not in known:
        known[field] = int(getattr(graph, field).max(initial=0))
    return known[field]


_OUTPUT_WORDS_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def output_words(graph: DecodingGraph):
    """The part of ``graph.words`` a boost can name: the words some arc outputs (and the
    epsilon, refused as a word where it is named), without the oov slot's own labels. A word of
    words.txt on no arc (a lexicon word the LM lacks; ``<s>``, ``#0``) is then a word the graph
    lacks: warned of, or spelled through the slot, not silently boosted to no effect. Cached
    per graph (the same table object for every call, as `phrase_cache` keys on it)."""
    if graph.words is None:
        return None
    kept = _OUTPUT_WORDS_CACHE.get(graph)
    if kept is None:
        from ..graph.oov_slot import OovSlot
        from ..symbols import SymbolTable

        present = np.zeros(max(graph.words.next_id, largest_label(graph, "olabel") + 1), bool)
        present[np.asarray(graph.olabel)] = True
        present[0] = True
        slot = OovSlot.of(graph)
        if slot is not None:
            present[slot.open :] = False
        kept = SymbolTable((s, i) for s, i in graph.words if present[i])
        _OUTPUT_WORDS_CACHE[graph] = kept
    return kept


def arc_costs(graph: DecodingGraph, options: CtcBeamOptions, blank: int) -> np.ndarray:
    """float32 per-arc static cost: weight (+ blank penalty on blank arcs) (+ word insertion
    penalty on arcs with an output word), added in that order in float32. Cached per graph."""
    key = (float(options.blank_penalty), float(options.word_insertion_penalty), blank)
    per_graph = _ARC_COST_CACHE.setdefault(graph, {})
    cost = per_graph.get(key)  # (one lookup: another thread may clear the cache meanwhile)
    if cost is None:
        cost = graph.weight.astype(np.float32, copy=True)
        if options.blank_penalty:
            is_blank = graph.ilabel == blank + 1
            cost[is_blank] = cost[is_blank] + np.float32(options.blank_penalty)
        if options.word_insertion_penalty:
            has_word = graph.olabel != 0
            cost[has_word] = cost[has_word] + np.float32(options.word_insertion_penalty)
        cost.flags.writeable = False
        if len(per_graph) > 8:
            per_graph.clear()
        per_graph[key] = cost
    return cost


def host_floats(x) -> np.ndarray:
    """``x`` as a NumPy array of floats on the host (float16/32/64 as given; torch's bfloat16
    and other types as float32)."""
    if type(x).__module__.startswith("torch"):
        import torch

        if not isinstance(x, torch.Tensor):
            raise DecodeInputError(f"log_probs must be an array or tensor; got {type(x).__name__}")
        if not (x.is_floating_point()):
            raise DecodeInputError(
                f"log_probs must be floating point; got dtype {x.dtype} (shape {tuple(x.shape)})"
            )
        if x.is_nested:
            raise DecodeInputError("log_probs must be a dense (B, T, V) tensor; got a nested "
                                   "tensor: pad it (torch.nested.to_padded_tensor) and give "
                                   "lengths")  # fmt: skip
        if x.is_meta or x.layout != torch.strided:
            raise DecodeInputError(f"log_probs must hold values in a dense tensor; got one on "
                                   f"{x.device} with layout {x.layout}")  # fmt: skip
        x = x.detach().to(device="cpu").resolve_conj().resolve_neg()  # (views NumPy can't take)
        try:
            return x.numpy() if x.dtype == torch.float64 else x.to(torch.float32).numpy()
        except RuntimeError as exc:  # (a tensor subclass without storage, such as FakeTensor)
            raise DecodeInputError(f"log_probs cannot be read as an array: {exc}") from None
    refuse_misread(x, "log_probs")
    try:
        arr = np.asarray(_gpu_to_host(x))
    except Exception as exc:
        raise DecodeInputError(f"log_probs cannot be read as an array: {exc}") from exc
    if arr.dtype.kind != "f":
        raise DecodeInputError(
            f"log_probs must be floating point (float16/32/64); got dtype {arr.dtype} "
            f"(shape {arr.shape})"
        )
    return arr


def beyond_float32(given: np.ndarray, lp: np.ndarray, inf: float = np.inf) -> str | None:
    """For a frame ``given`` (as the caller gave it) and ``lp`` (its float32 copy): ``"V] =
    VALUE is beyond float32's range, the search's"`` for the first finite value that became
    ``inf`` (+inf, or -inf for a frame that became all -inf), else None (the caller's own)."""
    beyond = (lp == inf) & np.isfinite(given)
    if not beyond.any():
        return None
    v = int(np.argmax(beyond))
    return f"{v}] = {given[v]:g} is beyond float32's range, the search's"


def _gpu_to_host(x):
    """A CuPy or Numba device array copied to the host; anything else as it is."""
    if hasattr(x, "__cuda_array_interface__") and hasattr(x, "get"):
        return x.get()  # CuPy
    if is_numba_device_array(x):
        return x.copy_to_host()
    return x


def _lengths(lengths, B: int, T: int) -> np.ndarray:
    if lengths is None:
        return np.full(B, T, np.int64)
    refuse_misread(lengths, "lengths", integers=True)
    try:
        if type(lengths).__module__.startswith("torch") and hasattr(lengths, "detach"):
            lengths = lengths.detach().cpu()
            if lengths.dtype.is_floating_point:  # (bfloat16 has no NumPy type)
                lengths = lengths.double()
            lengths = lengths.numpy()
        arr = np.asarray(_gpu_to_host(lengths))
    except (TypeError, ValueError, RuntimeError, NotImplementedError) as exc:
        raise DecodeInputError(f"lengths cannot be read as ({B},) integers: {exc}") from None
    if arr.shape != (B,):
        raise DecodeInputError(f"lengths must have shape ({B},); got {arr.shape}")
    if arr.dtype.kind not in "iu":
        if (
            arr.dtype.kind == "f"
            and B
            and np.all(np.isfinite(arr))
            and np.all(arr == np.round(arr))
        ):
            pass  # whole numbers: checked and cast below
        elif B:
            raise DecodeInputError(f"lengths must be integers; got dtype {arr.dtype}")
    bad = np.flatnonzero((arr < 0) | (arr > T))  # before the cast, which could wrap a huge one
    if len(bad):
        b = int(bad[0])
        shown = str(int(arr[b])) if arr.dtype.kind in "iu" else f"{float(arr[b]):g}"
        raise DecodeInputError(f"lengths[{b}] = {shown} is outside 0..T={T}")
    return arr.astype(np.int64)
