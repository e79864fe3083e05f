"""From a backend's arc paths to `Hypothesis` objects (shared by every backend).

Tokens: the path takes exactly one emitting arc per frame. Frame ``t`` emits its token unless the
arc is blank, or it is a repeat — the arc is a self-loop and frame ``t-1`` had the same input
label (the CTC topology's "stay on the same token" loop). So ``a a`` through a self-loop is one
token, while ``a <blk> a`` — or ``a a`` through two different arcs, as the compact topology allows —
are two. ``timestamps`` holds the frame of each token's first frame; a token lasts through its
repeats (the frames of its self-loop).

Words: the non-epsilon output labels along the path. ``word_timestamps[i] = (start, end)``
(inclusive frames) is the first frame of word ``i``'s first token and the last frame of its last
token, wherever label pushing put the word's output arc. Which tokens are word ``i``'s: with a
word separator (the graph's ``metadata["separator"]``, e.g. ``|`` or ``<wb>``, which the lexicon
puts between words), the ``i``-th run of tokens between separators, when there are as many runs
as words; else, when the graph keeps its lexicon (`Pronunciations`, as graphs built here do),
the split of the path's tokens into a pronunciation of each word in turn (separators skipped; the
last word of a path cut short may be a prefix of one). Separators belong to no word. Failing
both, the tokens from the word's output arc to
the next word's: ``start`` is the first token at or after the output arc, ``end`` the last
non-blank frame before the next word's output arc (or the end); a word with no token there gets
``(f, f)``, ``f`` the frame of its output arc (clamped to >= 0).

Scores (log scores, higher is better), recomputed along the path in float64:
``acoustic_score = -sum(ac)`` over the frames (``acoustic_scale * log_prob``),
``graph_score = -(sum of arc costs incl. penalties - phrase bonuses + final cost)``,
``score = acoustic_score + graph_score`` (equal to the negated float32 search cost up to rounding).
"""

from __future__ import annotations

import numpy as np

from ..results import Hypothesis
from ._problem import RawResult, SearchProblem
from .status import DIED, NO_FINAL

NOTE_NO_FINAL = (
    "no final state survived the last frame: best partial path returned, final cost not included"
)


def to_hypotheses(problem: SearchProblem, raw: list[RawResult]) -> list[list[Hypothesis]]:
    """All utterances' hypotheses, built with a few array operations over the whole batch
    (`wfstdecode.testing.paths.path_hypothesis` is the one-path version they are tested
    against)."""
    out: list[list | None] = []
    paths = []  # (utterance, arcs, frames, final)
    for b, r in enumerate(raw):
        if r.status & DIED or not r.paths:
            where = f"frame {r.died_frame}" if r.status & DIED else "the end"
            note = f"search died at {where}: every token was pruned or had infinite cost; no path"
            out.append([Hypothesis((), (), float("-inf"), notes=(*r.notes, note))])
            continue
        out.append([])
        for arcs, frames, _cost in r.paths:
            paths.append((b, arcs, frames, not (r.status & NO_FINAL)))
    if paths:
        for (b, _, _, final), hyp in zip(paths, _batch_hypotheses(problem, paths), strict=True):
            notes = (*raw[b].notes, *(() if final else (NOTE_NO_FINAL,)))
            out[b].append(_with_notes(hyp, notes) if notes else hyp)
    return out


def separator_id(graph) -> int | None:
    """The token id of the graph's word separator (``metadata["separator"]``), if it has one."""
    name = graph.metadata.get("separator")
    if name is None or graph.tokens is None:
        return None
    return graph.tokens.get(name)


def token_spans(tokens, words, prons, separator) -> list[tuple[int, int]] | None:
    """(first, last) index into ``tokens`` of each word's tokens (module docstring), or None
    when neither the separator runs nor the pronunciations account for the words. The runs come
    first: they give the split the pronunciations would, at a fraction of the cost."""
    if separator is not None:
        runs: list[list[int]] = []
        for i, token in enumerate(tokens):
            if token == separator:
                continue
            if runs and runs[-1][1] == i - 1:
                runs[-1][1] = i
            else:
                runs.append([i, i])
        if len(runs) == len(words):
            return [(a, b) for a, b in runs]
    return _pronounced(tokens, words, prons, separator) if prons is not None else None


def _pronounced(tokens, words, prons, separator) -> list[tuple[int, int]] | None:
    """Split ``tokens`` into a pronunciation of each word in turn; of several splits, the one
    whose words end earliest, first word first (a depth-first search trying shorter spellings
    first finds it; this finds it in one pass forward over the reachable positions and one
    back). The last word may be cut short when nothing else fits."""
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
    finishing = [set() for _ in range(m)] + [{n}]  # starts from which the rest fits exactly
    for j in range(m - 1, -1, -1):
        finishing[j] = {i for i, options in moves[j].items()
                        if any(nxt in finishing[j + 1] for _, nxt in options)}  # fmt: skip
    i = skip(0)
    if i not in finishing[0]:
        return None
    spans = []
    for j in range(m):
        last, nxt = next(o for o in moves[j][i] if o[1] in finishing[j + 1])
        spans.append((i, last))
        i = nxt
    return spans


def _with_notes(h: Hypothesis, notes) -> Hypothesis:
    return Hypothesis(
        h.tokens, h.timestamps, h.score, h.words, h.word_ids, h.word_timestamps, h.durations,
        h.acoustic_score, h.graph_score, tuple(notes),
    )  # fmt: skip


def _collapse_spelled(oov, labels: list, spans: list, offsets: list):
    """Each path's spelled runs ``<oov> … </oov>`` as one word (`OovSpeller.collapse`), spanning
    the frames of its spelled tokens: ``(word ids, (word, token ids) of each spelled word or
    None, spans, offsets)``."""
    ids, spelled, out_spans, out_off = [], [], [], [0]
    for k in range(len(offsets) - 1):
        w0, w1 = offsets[k], offsets[k + 1]
        path = labels[w0:w1]
        if not any(w >= oov.slot.open for w in path):
            ids += path
            spelled += [None] * len(path)
            out_spans += spans[w0:w1]
        else:
            path_ids, path_spelled, label_spans = oov.collapse(path)
            ids += path_ids
            spelled += path_spelled
            for word, (first, last) in zip(path_spelled, label_spans, strict=True):
                if word is not None and last > first and path[last] == oov.slot.close:
                    last -= 1  # </oov> sits after the word's last token
                out_spans.append((spans[w0 + first][0], spans[w0 + last][1]))
        out_off.append(len(ids))
    return ids, spelled, out_spans, out_off


def _separator_spans(tokens, path, first_frames, last_frames, separator, starts, ends,
                     words_per_path):  # fmt: skip
    """`token_spans`' first rule for every path at once: where path k has as many runs of
    non-separator tokens as words, they are its words' tokens.

    tokens, path, first_frames, last_frames: every path's tokens, path after path: id, path,
    first and last frame. starts, ends: every path's words' frames so far, path after path,
    ``words_per_path`` each. Returns them with the runs' frames at the words of the paths that
    split into runs, and which paths those are."""
    inside = tokens != separator
    same_path = path[1:] == path[:-1]
    begins, run_ends = inside.copy(), inside.copy()
    begins[1:] &= ~(inside[:-1] & same_path)  # after a separator or at a path's start
    run_ends[:-1] &= ~(inside[1:] & same_path)
    split = np.bincount(path[begins], minlength=len(words_per_path)) == words_per_path
    word_split = np.repeat(split, words_per_path)
    starts, ends = starts.copy(), ends.copy()
    starts[word_split] = first_frames[begins & split[path]]
    ends[word_split] = last_frames[run_ends & split[path]]
    return starts, ends, split


def _batch_hypotheses(problem: SearchProblem, paths) -> list[Hypothesis]:
    g = problem.graph
    P = len(paths)
    lens = np.array([len(p[1]) for p in paths], np.int64)
    offsets = np.concatenate(([0], np.cumsum(lens)))
    path_b = np.array([p[0] for p in paths], np.int64)
    final = np.array([p[3] for p in paths], bool)
    arc = np.concatenate([np.asarray(p[1], np.int64) for p in paths])
    frame = np.concatenate([np.asarray(p[2], np.int64) for p in paths])
    pid = np.repeat(np.arange(P), lens)
    blank = problem.blank_ilabel

    # tokens: one emitting arc per frame; a new token unless blank or a self-loop repeat
    e_pos = np.flatnonzero(arc < g.num_emitting_arcs)
    ea, ef, ep = arc[e_pos], frame[e_pos], pid[e_pos]
    il = g.ilabel[ea].astype(np.int64)
    src = g.arc_source[ea]
    same_as_prev = np.zeros(len(ea), bool)
    same_as_prev[1:] = (il[1:] == il[:-1]) & (ep[1:] == ep[:-1])
    new_token = (il != blank) & ~((src == g.next_state[ea]) & same_as_prev)
    nonblank = il != blank
    newtok_pos, newtok_frames = e_pos[new_token], ef[new_token]
    nonblank_pos, nonblank_frames = e_pos[nonblank], ef[nonblank]
    tok_ids = (il[new_token] - 1).tolist()
    tok_frames = newtok_frames.tolist()
    tok_off = np.concatenate(([0], np.cumsum(np.bincount(ep[new_token], minlength=P)))).tolist()
    # a token's last frame: the last of the non-blank frames from its first to the next token's
    # (a blank always ends a token, so those frames are its repeats)
    run = np.cumsum(new_token[nonblank])
    last_of_run = np.flatnonzero(np.append(run[1:] != run[:-1], True)) if len(run) else run
    tok_ends = nonblank_frames[last_of_run].tolist()

    # words and their spans (see the module docstring)
    olab = g.olabel[arc]
    w_pos = np.flatnonzero(olab != 0)
    wp = pid[w_pos]
    nxt = offsets[wp + 1]
    same_path_next = np.zeros(len(w_pos), bool)
    same_path_next[:-1] = wp[1:] == wp[:-1]
    nxt[:-1] = np.where(same_path_next[:-1], w_pos[1:], nxt[:-1])
    first = np.searchsorted(newtok_pos, w_pos)
    has_token = first < len(newtok_pos)
    has_token[has_token] = newtok_pos[first[has_token]] < nxt[has_token]
    last = np.searchsorted(nonblank_pos, nxt) - 1
    fallback = np.maximum(frame[w_pos], 0)
    starts = np.where(has_token, newtok_frames[np.minimum(first, len(newtok_pos) - 1)]
                      if len(newtok_pos) else 0, fallback)  # fmt: skip
    ends = np.where(has_token, nonblank_frames[np.maximum(last, 0)] if len(nonblank_pos) else 0,
                    starts)  # fmt: skip
    label_ids = word_ids = olab[w_pos].tolist()
    spans = list(zip(starts.tolist(), ends.tolist(), strict=True))
    label_off = w_off = np.concatenate(([0], np.cumsum(np.bincount(wp, minlength=P)))).tolist()
    spelled: list = [None] * len(word_ids)
    if problem.oov is not None:
        word_ids, spelled, spans, w_off = _collapse_spelled(problem.oov, word_ids, spans, w_off)
    separator = separator_id(g)
    prons = g.pronunciations.by_word if g.pronunciations is not None else None
    if separator is not None or prons is not None:
        unsplit = range(P)
        if separator is not None and problem.oov is None:
            starts, ends, split = _separator_spans(
                il[new_token] - 1, ep[new_token], newtok_frames, nonblank_frames[last_of_run],
                separator, starts, ends, np.diff(w_off))  # fmt: skip
            spans = list(zip(starts.tolist(), ends.tolist(), strict=True))
            unsplit = np.flatnonzero(~split).tolist() if prons is not None else []
        for k in unsplit:
            t0, t1, w0, w1 = tok_off[k], tok_off[k + 1], w_off[k], w_off[k + 1]
            path_prons = prons
            if any(spelled[w0:w1]):  # a spelled word is pronounced as it was spelled
                path_prons = dict(prons or {})
                path_prons[problem.oov.slot.open] = [s[1] for s in spelled[w0:w1] if s]
            found = token_spans(tok_ids[t0:t1], word_ids[w0:w1], path_prons, separator)
            if found is not None:
                spans[w0:w1] = [(tok_frames[t0 + a], tok_ends[t0 + b]) for a, b in found]
    names = g.words.symbols_of(word_ids) if g.words is not None else list(map(str, word_ids))
    if problem.oov is not None:
        for i, spelling in enumerate(spelled):
            if spelling:  # (word, token ids) of a spelled word
                names[i] = spelling[0]

    # scores in float64
    ac = problem.acoustic_costs(path_b[ep], ef, il - 1).astype(np.float64)
    acoustic = -np.bincount(ep, weights=ac, minlength=P).astype(np.float64)
    arc_total = np.bincount(
        pid, weights=problem.arc_cost[arc].astype(np.float64), minlength=P
    ).astype(np.float64)
    for k, (b, *_rest) in enumerate(paths):
        if problem.boosts.automata[b] is not None:
            arc_total[k] -= problem.boosts.path_bonus(b, label_ids[label_off[k] : label_off[k + 1]])
    last_state = np.full(P, g.start, np.int64)
    nonempty = lens > 0
    last_state[nonempty] = g.next_state[arc[offsets[1:][nonempty] - 1]]
    arc_total[final] += g.final_cost[last_state[final]].astype(np.float64)
    graph_score = -arc_total

    hyps = []
    for k in range(P):
        t0, t1, w0, w1 = tok_off[k], tok_off[k + 1], w_off[k], w_off[k + 1]
        ids = tuple(word_ids[w0:w1])
        hyps.append(Hypothesis(
            tokens=tuple(tok_ids[t0:t1]), timestamps=tuple(tok_frames[t0:t1]),
            score=float(acoustic[k] + graph_score[k]),
            words=tuple(names[w0:w1]),
            word_ids=ids, word_timestamps=tuple(spans[w0:w1]),
            acoustic_score=float(acoustic[k]), graph_score=float(graph_score[k]),
        ))  # fmt: skip
    return hyps
