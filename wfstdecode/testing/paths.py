"""An oracle for `wfstdecode.ctc._paths.to_hypotheses`: the `Hypothesis` of one path, built path
by path with plain NumPy (`to_hypotheses` builds a whole batch's at once)."""

from __future__ import annotations

import itertools

import numpy as np

from ..results import Hypothesis


def path_hypothesis(problem, b, arcs, frames, final=True, notes=()) -> Hypothesis:
    """Utterance ``b``'s path ``arcs`` (with ``frames``) of ``problem`` as a `Hypothesis`, the
    final cost included when ``final``."""
    g = problem.graph
    arcs = np.asarray(arcs, np.int64)
    frames = np.asarray(frames, np.int64)
    n_emit = g.num_emitting_arcs
    emitting = arcs < n_emit
    em_arcs = arcs[emitting]
    em_frames = frames[emitting]
    ilab = g.ilabel[em_arcs].astype(np.int64)
    src = np.searchsorted(g.e_offsets, em_arcs, side="right") - 1
    self_loop = src == g.next_state[em_arcs]
    blank = problem.blank_ilabel
    same_as_prev = np.zeros(len(em_arcs), bool)
    same_as_prev[1:] = ilab[1:] == ilab[:-1]
    writes_word = g.olabel[em_arcs] != 0  # a CTC repeat never writes a word
    new_token = (ilab != blank) & ~(self_loop & same_as_prev & ~writes_word)
    if g.metadata.get("topology") == "minimal":  # every non-blank frame is a token
        new_token = ilab != blank
    tokens = tuple(int(x) for x in ilab[new_token] - 1)
    timestamps = tuple(int(x) for x in em_frames[new_token])

    # words and their spans
    olab = g.olabel[arcs]
    word_pos = np.flatnonzero(olab != 0)
    pos_emitting = np.flatnonzero(emitting)  # path positions of emitting arcs
    nonblank_pos = pos_emitting[ilab != blank]
    nonblank_frames = em_frames[ilab != blank]
    newtok_pos = pos_emitting[new_token]
    newtok_frames = em_frames[new_token]
    word_ids = tuple(int(w) for w in olab[word_pos])
    nxt = np.append(word_pos[1:], len(arcs))
    first = np.searchsorted(newtok_pos, word_pos)  # first new token at or after the output arc
    has_token = first < len(newtok_pos)
    has_token[has_token] = newtok_pos[first[has_token]] < nxt[has_token]
    last = np.searchsorted(nonblank_pos, nxt) - 1  # last non-blank frame before the next word
    starts = np.where(has_token, newtok_frames[np.minimum(first, len(newtok_pos) - 1)]
                      if len(newtok_pos) else 0, np.maximum(frames[word_pos], 0))  # fmt: skip
    ends = np.where(has_token, nonblank_frames[np.maximum(last, 0)] if len(nonblank_pos) else 0,
                    starts)  # fmt: skip
    spans = [(int(a), int(e)) for a, e in zip(starts.tolist(), ends.tolist(), strict=True)]
    # frame by frame, each token's [id, first frame, last frame] (repeats extend it); then the
    # tokens of each word as the runs of tokens between separators (as many as words), else by
    # a depth-first search over spellings (shorter first)
    sep_name = g.metadata.get("separator")
    sep = g.tokens.get(sep_name) if sep_name is not None and g.tokens is not None else None
    token_frames: list[list[int]] = []
    for label, frame, new in zip(ilab.tolist(), em_frames.tolist(), new_token, strict=True):
        if new:
            token_frames.append([label - 1, frame, frame])
        elif label != blank:
            token_frames[-1][2] = frame
    groups = None
    if sep is not None:
        runs = itertools.groupby(token_frames, key=lambda t: t[0] == sep)
        groups = [list(run) for is_sep, run in runs if not is_sep]
        # (a path cut short may end in words whose output labels are still to come)
        enough = len(groups) == len(word_ids) or (not final and len(groups) > len(word_ids))
        groups = groups[: len(word_ids)] if enough else None
    if groups is None and g.pronunciations is not None:
        ids = [t[0] for t in token_frames]
        groups = _search(ids, list(word_ids), g.pronunciations.by_word, sep, 0, False)
        if groups is None:
            groups = _search(ids, list(word_ids), g.pronunciations.by_word, sep, 0, True)
        if groups is None and not final:  # tokens left: words whose labels are still to come
            groups = _search(ids, list(word_ids), g.pronunciations.by_word, sep, 0, True, True)
        if groups is not None:
            groups = [token_frames[a : b + 1] for a, b in groups]
    if groups is not None:
        spans = [(run[0][1], run[-1][2]) for run in groups]
    words = tuple(g.words.symbol(w) if g.words is not None else str(w) for w in word_ids)

    # scores
    ac = problem.acoustic_costs(np.full(len(em_frames), b), em_frames, ilab - 1)
    acoustic = -float(np.sum(ac.astype(np.float64)))
    automaton = problem.boosts.automata[b]
    arc_total = float(np.sum(problem.arc_cost[arcs].astype(np.float64)))
    if automaton is not None:
        arc_total -= occurrence_bonus(automaton.phrases, olab[word_pos])
    if final:
        last = int(g.next_state[arcs[-1]]) if len(arcs) else g.start
        arc_total += float(g.final_cost[last])
    graph_score = -arc_total
    return Hypothesis(
        tokens=tokens,
        timestamps=timestamps,
        score=acoustic + graph_score,
        words=words,
        word_ids=word_ids,
        word_timestamps=tuple(spans),
        acoustic_score=acoustic,
        graph_score=graph_score,
        notes=tuple(notes),
    )


def _search(tokens, words, prons, sep, i, cut_short, left=False) -> list[tuple[int, int]] | None:
    """The first split of ``tokens[i:]`` into the spellings of ``words`` (token index ranges),
    trying separators, then shorter spellings first; with ``cut_short`` the last word may be a
    prefix of a spelling; with ``left``, tokens may be left after the last word."""
    while i < len(tokens) and tokens[i] == sep:
        i += 1
    if not words:
        return [] if i == len(tokens) or left else None
    for pron in sorted(prons.get(words[0], ()), key=len):
        if tokens[i : i + len(pron)] == list(pron):
            rest = _search(tokens, words[1:], prons, sep, i + len(pron), cut_short, left)
            if rest is not None:
                return [(i, i + len(pron) - 1), *rest]
    rest_tokens = tokens[i:]
    if (
        cut_short
        and len(words) == 1
        and rest_tokens
        and any(list(p[: len(rest_tokens)]) == rest_tokens for p in prons.get(words[0], ()))
    ):
        return [(i, len(tokens) - 1)]
    return None


def occurrence_bonus(phrases: dict[tuple[int, ...], float], words) -> float:
    """What `wfstdecode.ctc.phrases.PhraseAutomaton.path_bonus` must equal, by counting: every
    occurrence of every phrase in ``words`` earns its bonus per word (the tests' independent
    check)."""
    words = tuple(int(w) for w in words)
    total = 0.0
    for phrase, bonus in phrases.items():
        k = len(phrase)
        hits = sum(1 for i in range(len(words) - k + 1) if words[i : i + k] == phrase)
        total += hits * k * float(bonus)
    return total
