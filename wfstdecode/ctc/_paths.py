"""From a backend's arc paths to `Hypothesis` objects (shared by every backend).

Tokens: the path takes exactly one emitting arc per frame. Frame ``t`` emits its token unless the
arc is blank, or it is a repeat — the arc is a self-loop writing no word and frame ``t-1`` had
the same input label (the CTC topology's "stay on the same token" loop, which outputs epsilon).
So ``a a`` through a self-loop is one token, while ``a <blk> a`` — or ``a a`` through two
different arcs, as the compact topology allows — are two. In the ``minimal`` topology (the
graph's ``metadata["topology"]``) there are no repeats: every non-blank frame is a token.
``timestamps`` holds the frame of each token's first frame; a token lasts through its repeats
(the frames of its self-loop).

Words: the non-epsilon output labels along the path. ``word_timestamps[i] = (start, end)``
(inclusive frames) is the first frame of word ``i``'s first token and the last frame of its last
token, wherever label pushing put the word's output arc. Which tokens are word ``i``'s: with a
word separator (the graph's ``metadata["separator"]``, e.g. ``|`` or ``<wb>``, which the lexicon
puts between words), the ``i``-th run of tokens between separators, when there are as many runs
as words (on a path cut short — a partial result, or one without a final state — at least as
many: the runs after the last word's are words whose output labels are still to come); else,
when the graph keeps its lexicon (`Pronunciations`, as graphs built here do), the split of the
path's tokens into a pronunciation of each word in turn (separators skipped); failing that, such
a split whose last word is a prefix of one (the path ended inside it); and on a path cut short,
failing both, a split of the path's first tokens (the tokens left after the last word's are
words whose output labels are still to come). Separators belong to no word. Failing all these,
the tokens from the word's output arc to the next word's: ``start`` is the first token at or
after the output arc, ``end`` the last non-blank frame before the next word's output arc (or the
end); a word with no token there gets ``(f, f)``, ``f`` the frame of its output arc (clamped to
>= 0).

Scores (log scores, higher is better), recomputed along the path in float64:
``acoustic_score = -sum(ac)`` over the frames (``acoustic_scale * log_prob``),
``graph_score = -(sum of arc costs incl. penalties - phrase bonuses + final cost)``,
``score = acoustic_score + graph_score`` (equal to the negated float32 search cost up to rounding).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..results import Hypothesis, changed, made_from
from ._problem import PathBatch, SearchProblem
from .status import DIED, NO_FINAL

NOTE_NO_FINAL = (
    "no final state survived the last frame: best partial path returned, final cost not included"
)


def to_hypotheses(problem: SearchProblem, results) -> list[list[Hypothesis]]:
    """All utterances' hypotheses from a backend's results (a `RawResult` per utterance, or a
    `PathBatch`): tokens, words and spans of every path in one compiled call (`_path_arrays`),
    scores in a few array operations over the whole batch
    (`wfstdecode.testing.paths.path_hypothesis` is the one-path version they are tested
    against)."""
    batch = PathBatch.of(results)
    B = len(batch)
    dead = ((batch.status & DIED) != 0) | (np.bincount(batch.utterance, minlength=B) == 0)
    out: list[list[Hypothesis]] = [[] for _ in range(B)]
    for b in np.flatnonzero(dead).tolist():
        died = problem.input_frame(b, int(batch.died_frame[b]))
        where = f"frame {died}" if batch.status[b] & DIED else "the end"
        note = f"search died at {where}: every token was pruned or had infinite cost; no path"
        out[b].append(Hypothesis((), (), float("-inf"), notes=(*batch.notes[b], note)))
    if dead[batch.utterance].any():
        batch = batch.only(np.flatnonzero(~dead[batch.utterance]))
    if len(batch.utterance):
        final = ((batch.status & NO_FINAL) == 0).tolist()
        utterance = batch.utterance.tolist()
        for b, hyp in zip(utterance, _batch_hypotheses(problem, batch), strict=True):
            notes = batch.notes[b] if final[b] else (*batch.notes[b], NOTE_NO_FINAL)
            out[b].append(_with_notes(hyp, notes) if notes else hyp)
    if problem.oov is not None:  # one word spelled two ways (pronunciations) is two label
        out = [_distinct_words(utt) for utt in out]  # sequences, but one word sequence
    return out


def in_input_frames(problem: SearchProblem, out: list[list[Hypothesis]]) -> list[list[Hypothesis]]:
    """``out`` with the frames of the input where blank frames were skipped (`SkippedFrames`):
    token and word times mapped back, and the skipped frames' blank scores added to each
    hypothesis' acoustic score (and score); a search that died keeps its -inf."""
    skipped = problem.skipped
    if skipped is None:
        return out
    mapped = []
    for b, utt in enumerate(out):
        at, extra = problem.input_frames(b), float(skipped.blank_score[b])
        mapped.append([h if h.score == float("-inf") else changed(
            h, timestamps=tuple(map(at, h.timestamps)),
            word_timestamps=tuple((at(s), at(e)) for s, e in h.word_timestamps),
            acoustic_score=h.acoustic_score + extra, score=h.score + extra,
        ) for h in utt])  # fmt: skip
    return mapped


def _distinct_words(hyps: list[Hypothesis]) -> list[Hypothesis]:
    """``hyps`` (best first) without those whose words a better one has."""
    seen: set = set()
    kept = []
    for h in hyps:
        if h.words not in seen:
            seen.add(h.words)
            kept.append(h)
    return kept


def merges_repeats(graph) -> bool:
    """Whether a self-loop reading the previous frame's token is a CTC repeat: not in the
    ``minimal`` topology, where every non-blank frame emits its token (a TLG self-loop there is
    a one-token word returning to its state, a new token)."""
    return graph.metadata.get("topology") != "minimal"


def separator_id(graph) -> int | None:
    """The token id of the graph's word separator (``metadata["separator"]``), if it has one."""
    name = graph.metadata.get("separator")
    if name is None or graph.tokens is None:
        return None
    return graph.tokens.get(name)


def token_spans(tokens, words, prons, separator, cut_short=False) -> list[tuple[int, int]] | None:
    """(first, last) index into ``tokens`` of each word's tokens (module docstring), or None
    when neither the separator runs nor the pronunciations account for the words. The runs come
    first: they give the split the pronunciations would, at a fraction of the cost.
    ``cut_short``: the path has no final cost (a partial result): runs, or tokens, beyond the
    words' may follow them (words whose output labels are still to come)."""
    if separator is not None:
        runs: list[list[int]] = []
        for i, token in enumerate(tokens):
            if token == separator:
                continue
            if runs and runs[-1][1] == i - 1:
                runs[-1][1] = i
            else:
                runs.append([i, i])
        if len(runs) == len(words) or (cut_short and len(runs) > len(words)):
            return [(a, b) for a, b in runs[: len(words)]]
    return _pronounced(tokens, words, prons, separator, cut_short) if prons is not None else None


def _pronounced(tokens, words, prons, separator, cut_short=False) -> list[tuple[int, int]] | None:
    """Split ``tokens`` into a pronunciation of each word in turn; of several splits, the one
    whose words end earliest, first word first (a depth-first search trying shorter spellings
    first finds it; this finds it in one pass forward over the reachable positions and one
    back). The last word may be cut short when nothing else fits; with ``cut_short`` (the path
    has no final cost), failing both, tokens may be left after the last word (words whose
    output labels are still to come)."""
    n, m = len(tokens), len(words)

    def skip(i: int) -> int:
        while i < n and tokens[i] == separator:
            i += 1
        return i

    starts = [{skip(0)}]  # starts[j]: where word j may start
    moves = []  # moves[j][start]: [(last token, next word's start)], shorter spellings first
    for j, word in enumerate(words):
        spellings = sorted(prons.get(word, ()), key=len)
        step: dict[int, list[tuple[int, int]]] = {}
        for i in starts[j]:
            for pron in spellings:
                k = i + len(pron)
                if tuple(tokens[i:k]) == pron:
                    step.setdefault(i, []).append((k - 1, skip(k)))
        moves.append(step)
        starts.append({nxt for options in step.values() for _, nxt in options})
    if m and n not in starts[m]:  # a path that ended inside its last word
        for i in starts[m - 1]:
            rest = tuple(tokens[i:])
            if rest and any(p[: len(rest)] == rest for p in prons.get(words[-1], ())):
                moves[-1].setdefault(i, []).append((n - 1, n))
    i = skip(0)
    finishing = _finishing(moves, {n})  # starts from which the rest fits exactly
    if i not in finishing[0] and cut_short:  # the rest of the path: words still to come
        finishing = _finishing(moves, starts[m])
    if i not in finishing[0]:
        return None
    spans = []
    for j in range(m):
        last, nxt = next(o for o in moves[j][i] if o[1] in finishing[j + 1])
        spans.append((i, last))
        i = nxt
    return spans


def _finishing(moves, ends: set) -> list[set]:
    """``finishing[j]``: the starts of word ``j`` from which words ``j``, ``j + 1``, ... fit
    in turn (``moves``, as `_pronounced` makes them), the token after the last word's (its
    separators skipped) at one of ``ends``."""
    finishing = [set() for _ in moves] + [ends]
    for j in range(len(moves) - 1, -1, -1):
        finishing[j] = {i for i, options in moves[j].items()
                        if any(nxt in finishing[j + 1] for _, nxt in options)}  # fmt: skip
    return finishing


def _with_notes(h: Hypothesis, notes) -> Hypothesis:
    """``h`` with ``notes`` (strings): by `changed`, as ``Hypothesis(...)`` would check every
    field again (~30 us: half of `to_hypotheses` where a narrow beam leaves a third of the
    utterances without a final state)."""
    return changed(h, notes=tuple(notes))


def _collapse_spelled(oov, labels: list, spans: list, timed: list, offsets: list,
                      utterances: list):  # fmt: skip
    """Each path's spelled runs ``<oov> … </oov>`` as one word (`OovSpeller.collapse`, named by
    the path's utterance), spanning the frames of its spelled tokens: ``(word ids, (word, token
    ids) of each spelled word or None, spans, offsets)``. ``timed[i]``: label ``i``'s span is
    its tokens' (not the frame of a label arc with no token after it, as ``<oov>`` and
    ``</oov>`` may be: the word starts at its first token, ends at its last)."""
    ids, spelled, out_spans, out_off = [], [], [], [0]
    for k in range(len(offsets) - 1):
        w0, w1 = offsets[k], offsets[k + 1]
        path = labels[w0:w1]
        if not any(w >= oov.slot.open for w in path):
            ids += path
            spelled += [None] * len(path)
            out_spans += spans[w0:w1]
        else:
            path_ids, path_spelled, label_spans = oov.collapse(path, utterances[k])
            ids += path_ids
            spelled += path_spelled
            for first, last in label_spans:
                with_tokens = [i for i in range(w0 + first, w0 + last + 1) if timed[i]]
                if not with_tokens:  # (no token at all: the frame of its first label's arc)
                    with_tokens = [w0 + first]
                out_spans.append((spans[with_tokens[0]][0], spans[with_tokens[-1]][1]))
        out_off.append(len(ids))
    return ids, spelled, out_spans, out_off


@njit(nogil=True, cache=True)
def _path_arrays(arc, frame, offsets, ilabel, arc_source, next_state, olabel, num_emitting,
                 blank, separator, final, merge_repeats=True):  # fmt: skip
    """Tokens and words of every path (paths one after the other, path ``k``'s arcs at
    ``offsets[k]:offsets[k + 1]``), as the module docstring defines them, in one compiled call:

    * tokens: id, first frame, last frame, and ``tok_off`` (path k's at ``tok_off[k]:``);
    * emitting arcs: path, frame and column read (for the acoustic scores);
    * words: id, start and end frame, ``w_off``; the span from the word's output arc to the
      next word's (``w_timed``: there is a token between them; if not, the arc's frame), or,
      with a ``separator`` (>= 0), the path's separator runs where there are as many as words
      (at least as many on a path cut short: ``final[k]`` False): ``split[k]`` (`token_spans`'
      first rule), the other paths' left to the caller.
    """
    P = offsets.shape[0] - 1
    n = arc.shape[0]
    tok_id, tok_first = np.empty(n, np.int64), np.empty(n, np.int64)
    tok_last = np.empty(n, np.int64)
    tok_pos = np.empty(n, np.int64)  # where each token starts, in the concatenated arcs
    tok_off = np.zeros(P + 1, np.int64)
    e_path, e_frame, e_col = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
    nonblank_pos, nonblank_frame = np.empty(n, np.int64), np.empty(n, np.int64)
    n_tok = n_e = n_nb = 0
    for k in range(P):
        prev = -1  # the previous emitting arc's input label in this path
        for i in range(offsets[k], offsets[k + 1]):
            a = arc[i]
            if a >= num_emitting:
                continue
            il = np.int64(ilabel[a])
            e_path[n_e], e_frame[n_e], e_col[n_e] = k, frame[i], il - 1
            n_e += 1
            if il != blank:
                # a new token unless a self-loop repeat of the previous frame's token (a
                # repeat writes no word: T's repeat loop outputs epsilon, so a self-loop with
                # a word is a new token in any topology, metadata or not)
                if not (
                    merge_repeats
                    and arc_source[a] == next_state[a]
                    and il == prev
                    and olabel[a] == 0
                ):
                    tok_id[n_tok], tok_first[n_tok], tok_pos[n_tok] = il - 1, frame[i], i
                    n_tok += 1
                tok_last[n_tok - 1] = frame[i]  # a blank ends a token: these are its repeats
                nonblank_pos[n_nb], nonblank_frame[n_nb] = i, frame[i]
                n_nb += 1
            prev = il
        tok_off[k + 1] = n_tok
    w_id, w_start, w_end = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
    w_timed = np.zeros(n, np.bool_)
    w_off = np.zeros(P + 1, np.int64)
    split = np.zeros(P, np.bool_)
    n_w = 0
    for k in range(P):
        lo, hi = offsets[k], offsets[k + 1]
        for i in range(lo, hi):
            if olabel[arc[i]] == 0:
                continue
            nxt = hi  # the next word's output arc, or the path's end
            for j in range(i + 1, hi):
                if olabel[arc[j]] != 0:
                    nxt = j
                    break
            first = np.searchsorted(tok_pos[:n_tok], i)  # the first token at or after the arc
            w_id[n_w] = olabel[arc[i]]
            if first < n_tok and tok_pos[first] < nxt:
                w_timed[n_w] = True
                w_start[n_w] = tok_first[first]
                w_end[n_w] = nonblank_frame[np.searchsorted(nonblank_pos[:n_nb], nxt) - 1]
            else:
                w_start[n_w] = w_end[n_w] = max(frame[i], 0)
            n_w += 1
        w_off[k + 1] = n_w
        if separator < 0:
            continue
        runs = 0  # runs of non-separator tokens: the words' tokens when as many as words
        for t in range(tok_off[k], tok_off[k + 1]):
            if tok_id[t] != separator and (t == tok_off[k] or tok_id[t - 1] == separator):
                runs += 1
        if runs < n_w - w_off[k] or (runs > n_w - w_off[k] and final[k]):
            continue
        split[k] = True
        w = w_off[k]
        for t in range(tok_off[k], tok_off[k + 1]):
            if w == n_w:  # (cut short: the runs left are words whose labels are to come)
                break
            if tok_id[t] == separator:
                continue
            if t == tok_off[k] or tok_id[t - 1] == separator:
                w_start[w] = tok_first[t]
            w_end[w] = tok_last[t]
            if t + 1 == tok_off[k + 1] or tok_id[t + 1] == separator:
                w += 1
    return (tok_id[:n_tok], tok_first[:n_tok], tok_last[:n_tok], tok_off, e_path[:n_e],
            e_frame[:n_e], e_col[:n_e], w_id[:n_w], w_start[:n_w], w_end[:n_w], w_timed[:n_w],
            w_off, split)  # fmt: skip


def _batch_hypotheses(problem: SearchProblem, batch: PathBatch) -> list[Hypothesis]:
    """A hypothesis for each path of ``batch``, in order."""
    g = problem.graph
    offsets, path_b = batch.offsets, batch.utterance
    P = len(path_b)
    lens = np.diff(offsets)
    final = ((batch.status & NO_FINAL) == 0)[path_b]
    arc = batch.arcs.astype(np.int64)
    frame = batch.frames.astype(np.int64)
    separator = separator_id(g)
    # with an oov slot the labels are collapsed into words first (a spelled word is several
    # labels), so every path's spans come from `token_spans` below
    runs_of = -1 if separator is None or problem.oov is not None else separator
    (tok_id, tok_first, tok_last, tok_off, e_path, e_frame, e_col, w_id, w_start, w_end, w_timed,
     w_off, split) = _path_arrays(arc, frame, offsets, g.ilabel, g.arc_source, g.next_state,
                                  g.olabel, g.num_emitting_arcs, problem.blank_ilabel, runs_of,
                                  final, merges_repeats(g))  # fmt: skip
    tok_ids, tok_frames, tok_ends = tok_id.tolist(), tok_first.tolist(), tok_last.tolist()
    tok_off = tok_off.tolist()
    label_ids = word_ids = w_id.tolist()
    spans = list(zip(w_start.tolist(), w_end.tolist(), strict=True))
    label_off = w_off = w_off.tolist()
    spelled: list = [None] * len(word_ids)
    if problem.oov is not None:
        word_ids, spelled, spans, w_off = _collapse_spelled(problem.oov, word_ids, spans,
                                                            w_timed.tolist(), w_off,
                                                            path_b.tolist())  # fmt: skip
    prons = g.pronunciations.by_word if g.pronunciations is not None else None
    if separator is not None or prons is not None:
        unsplit = range(P)  # the paths whose spans the rules below may give
        if runs_of >= 0:  # split into separator runs already
            unsplit = np.flatnonzero(~split).tolist() if prons is not None else []
        for k in unsplit:
            t0, t1, w0, w1 = tok_off[k], tok_off[k + 1], w_off[k], w_off[k + 1]
            path_prons = prons
            if any(spelled[w0:w1]):  # a spelled word is pronounced as it was spelled
                path_prons = dict(prons or {})
                path_prons[problem.oov.slot.open] = [s[1] for s in spelled[w0:w1] if s]
            found = token_spans(tok_ids[t0:t1], word_ids[w0:w1], path_prons, separator,
                                not final[k])  # fmt: skip
            if found is not None:
                spans[w0:w1] = [(tok_frames[t0 + a], tok_ends[t0 + b]) for a, b in found]
    names = g.words.symbols_of(word_ids) if g.words is not None else list(map(str, word_ids))
    if problem.oov is not None:
        for i, spelling in enumerate(spelled):
            if spelling:  # (word, token ids) of a spelled word
                names[i] = spelling[0]

    # scores in float64
    ac = problem.acoustic_costs(path_b[e_path], e_frame, e_col).astype(np.float64)
    acoustic = -np.bincount(e_path, weights=ac, minlength=P).astype(np.float64)
    pid = np.repeat(np.arange(P), lens)
    arc_total = np.bincount(
        pid, weights=problem.arc_cost[arc].astype(np.float64), minlength=P
    ).astype(np.float64)
    for k, b in enumerate(path_b.tolist()):
        if problem.boosts.automata[b] is not None:
            arc_total[k] -= problem.boosts.path_bonus(b, label_ids[label_off[k] : label_off[k + 1]])
    last_state = np.full(P, g.start, np.int64)
    nonempty = lens > 0
    last_state[nonempty] = g.next_state[arc[offsets[1:][nonempty] - 1]]
    arc_total[final] += g.final_cost[last_state[final]].astype(np.float64)
    graph_score = -arc_total

    hyps = []
    for k, (a, gs) in enumerate(zip(acoustic.tolist(), graph_score.tolist(), strict=True)):
        t0, t1, w0, w1 = tok_off[k], tok_off[k + 1], w_off[k], w_off[k + 1]
        hyps.append(made_from({
            "tokens": tuple(tok_ids[t0:t1]), "timestamps": tuple(tok_frames[t0:t1]),
            "score": a + gs, "words": tuple(names[w0:w1]), "word_ids": tuple(word_ids[w0:w1]),
            "word_timestamps": tuple(spans[w0:w1]), "acoustic_score": a, "graph_score": gs,
        }))  # fmt: skip
    return hyps
