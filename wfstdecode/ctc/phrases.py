"""The context automaton of one utterance's boosted phrases (Aho-Corasick over word ids), which
the search walks alongside each token: a token's state is (graph state, context state).

What it computes: a word sequence earns, for every occurrence of every boosted phrase in it
(occurrences may overlap, as Aho-Corasick reports them), the phrase's bonus once per word — a
single word at 2.0 earns 2.0 wherever it occurs, "new york" at 3.0 earns 6.0. Decoding with it is
decoding TLG ∘ C for the weighted acceptor C this class describes (`fst_arrays`), without
composing.

How the bonus is paid out along a path: a partial match earns its bonus word by word as it grows
and gives it back when it fails (icefall's ContextGraph), so a phrase's first words are not pruned
before the phrase completes. Formally each node ``n`` of the phrase trie has

* ``banked(n)``: the bonuses of the phrases that end at ``n`` (``n`` itself and its suffixes,
  through the failure links) — what reaching ``n`` pays for good;
* ``phi(n)``: the anticipated bonus of a match in progress at ``n`` (``depth(n)`` words of the
  best longer phrase through ``n``, less what the phrases ending on the way to ``n`` banked,
  never negative);

and the word ``w`` read in context state ``x`` moves to the node ``child`` the Aho-Corasick goto /
failure walk reaches (the root when none) and earns ``banked(child) + phi(enter(child)) -
phi(x)``; the end of the utterance gives ``phi`` of the last state back. The sum telescopes to
the banked bonuses: exactly the occurrence count above, whatever ``phi`` is. ``enter(n)`` is the
state kept after reaching ``n``: ``n`` itself, or, when no phrase extends ``n`` (a complete phrase
at a leaf), the state its failure link leads to — from a leaf every word fails anyway, so the two
behave alike. Hence a list of single words has one context state (the root), and the search keeps
today's one token per graph state.
"""

from __future__ import annotations

from collections import deque

import numpy as np

ROOT = 0


class PhraseAutomaton:
    """Built from ``{phrase (tuple of word ids): bonus per word}``; nodes are numbered in
    breadth-first order, the root 0."""

    def __init__(self, phrases: dict[tuple[int, ...], float]):
        children: list[dict[int, int]] = [{}]
        depth = [0]
        parent = [ROOT]
        own = [0.0]  # the bonus of the phrase ending exactly here
        longer = [0.0]  # the best positive per-word bonus of a phrase continuing past here
        for words, bonus in phrases.items():
            node = ROOT
            for i, w in enumerate(words):
                if bonus > longer[node]:
                    longer[node] = float(bonus)
                nxt = children[node].get(w)
                if nxt is None:
                    nxt = len(children)
                    children[node][w] = nxt
                    children.append({})
                    depth.append(i + 1)
                    parent.append(node)
                    own.append(0.0)
                    longer.append(0.0)
                node = nxt
            own[node] += float(bonus) * len(words)
        n = len(children)
        fail = [ROOT] * n
        banked = [0.0] * n
        prefix_banked = [0.0] * n
        order = []
        queue = deque([ROOT])
        while queue:  # breadth first: a node's failure target is shallower, so already done
            node = queue.popleft()
            order.append(node)
            for w, child in children[node].items():
                if node != ROOT:
                    f = fail[node]
                    while w not in children[f] and f != ROOT:
                        f = fail[f]
                    fail[child] = children[f].get(w, ROOT)
                banked[child] = own[child] + banked[fail[child]]
                prefix_banked[child] = own[child] + prefix_banked[node]
                queue.append(child)
        phi = [0.0] * n
        enter = list(range(n))
        for node in order:
            if children[node] or node == ROOT:
                phi[node] = max(0.0, depth[node] * longer[node] - prefix_banked[node])
            else:
                enter[node] = enter[fail[node]]  # shallower: already resolved
        # renumber breadth first (order), so that the arrays read in that order
        self._order = order
        rank = {node: i for i, node in enumerate(order)}
        self.num_nodes = n
        self.children = [{w: rank[c] for w, c in children[old].items()} for old in order]
        self.fail = np.array([rank[fail[old]] for old in order], np.int32)
        self.enter = np.array([rank[enter[old]] for old in order], np.int32)
        self.banked = np.array([banked[old] for old in order], np.float64)
        self.phi = np.array([phi[old] for old in order], np.float32)
        gain = self.banked + self.phi[self.enter].astype(np.float64)
        self.gain = gain.astype(np.float32)
        self.num_phrases = len(phrases)
        self.phrases = dict(phrases)

    @property
    def num_contexts(self) -> int:
        """Context states a token can be in: the root and every node some phrase extends."""
        return int(np.count_nonzero(self.enter == np.arange(self.num_nodes)))

    def step(self, x: int, word: int) -> tuple[int, np.float32]:
        """Read ``word`` in context state ``x``: ``(next state, bonus)``, the bonus in float32
        exactly as the search computes it (`bundles.arc_cost`)."""
        node = x
        while True:
            child = self.children[node].get(word)
            if child is not None:
                bonus = self.gain[child] if x == ROOT else self.gain[child] - self.phi[x]
                return int(self.enter[child]), np.float32(bonus)
            if node == ROOT:
                return ROOT, np.float32(-self.phi[x] if x != ROOT else 0.0)
            node = int(self.fail[node])

    def path_bonus(self, words) -> float:
        """The bonus of a whole word sequence (give-back at the end included), in float64."""
        x, total = ROOT, 0.0
        for w in words:
            x, bonus = self.step(x, int(w))
            total += float(bonus)
        return total - float(self.phi[x])

    def fst_arrays(self, vocabulary):
        """C as a weighted acceptor over ``vocabulary`` (word ids), one state per context state,
        costs = -bonus, final cost = the give-back: TLG ∘ C is the graph a phrase-boosted search
        decodes (used by the tests' OpenFst oracle)."""
        from ..fstio import FstArrays

        states = np.flatnonzero(self.enter == np.arange(self.num_nodes))
        number = {int(s): i for i, s in enumerate(states)}
        src, dst, lab, cost = [], [], [], []
        for s in states.tolist():
            for w in vocabulary:
                nxt, bonus = self.step(s, int(w))
                src.append(number[s])
                dst.append(number[nxt])
                lab.append(int(w))
                cost.append(-float(bonus))
        final = self.phi[states].astype(np.float32)
        lab_arr = np.array(lab, np.int32)
        return FstArrays(0, final, np.array(src, np.int32), np.array(dst, np.int32), lab_arr,
                         lab_arr, np.array(cost, np.float32))  # fmt: skip
