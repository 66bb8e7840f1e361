"""Clustering of merged contractions (paper Sec. III-D). Depends on SHAPES only, never on values.

Rank-based clustering (axis-aligned merging): modalities with the same number of lagging axes
(the same A-array rank) form one cluster; each cluster is padded and merged on its own.

Agglomerative clustering (block-diagonal merging): start from one block per modality, an
``r_i x c_i`` matrix (r_i = prod of its lagging sizes, c_i = m_i). Repeatedly merge the pair whose
block-diagonal union adds the fewest artificial zeros,

    delta_z(i, j) = (r_i + r_j)(c_i + c_j) - (r_i c_i + r_j c_j) = r_i c_j + r_j c_i,

ties broken by the smallest member indices, so the result is deterministic. The greedy deltas never
decrease (a pair involving a freshly merged cluster costs delta(i,k) + delta(j,k), more than either
part, and every other pair already cost at least the chosen minimum), so the cumulative added-zeros
curve ``Z_k`` (k merges done, k = 0..M-1) is convex and increasing: the paper's "hyperbolic curve".

The elbow rule (ours; the paper only says "the elbow of the curve"): the Kneedle criterion on that
curve. With both axes normalised to [0, 1], stop after the k merges that maximise the distance below
the chord from the first to the last point,

    k* = argmax_k  (k / K - Z_k / Z_K),    K = M - 1,

computed exactly in integers as ``argmax_k (k * Z_K - K * Z_k)``, taking the smallest such k on ties.
Why this rule: it is parameter-free and scale-free (the zero counts range over orders of magnitude
between models, so any absolute threshold would need tuning per model family); on a convex curve it
picks the point where the cost of one more merge overtakes the average cost, i.e. exactly where the
cheap merges (similar small blocks: fewer, larger matvecs for a few zeros) end and the expensive ones
(gluing a large block to everything else) begin; and it is exact and deterministic (integer
arithmetic). Ties (a curve with no bend, e.g. only two blocks) resolve to fewer merges: without
evidence of a knee we do not add zeros.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

Clusters = tuple[tuple[int, ...], ...]


def rank_clusters(lagging_shapes: Sequence[Sequence[int]]) -> Clusters:
    """Group item indices by rank (number of lagging axes); clusters ordered by rank, members ascending."""
    by_rank: dict[int, list[int]] = {}
    for i, s in enumerate(lagging_shapes):
        by_rank.setdefault(len(tuple(s)), []).append(i)
    return tuple(tuple(by_rank[k]) for k in sorted(by_rank))


@dataclass(frozen=True)
class AgglomerativeResult:
    """The greedy merge history and the clusters at the elbow.

    merges:     ((a, b), ...) representative (smallest member) of each merged pair, in merge order
    deltas:     added zeros of each merge (non-decreasing)
    cumulative: Z_0 = 0, Z_1, ..., Z_{M-1}
    elbow:      k*, the number of merges kept
    clusters:   the clusters after k* merges: members ascending, clusters ordered by first member
    """

    merges: tuple[tuple[int, int], ...]
    deltas: tuple[int, ...]
    cumulative: tuple[int, ...]
    elbow: int
    clusters: Clusters


def elbow_index(cumulative: Sequence[int]) -> int:
    """Kneedle elbow of an increasing convex curve Z_0..Z_K: argmax_k (k Z_K - K Z_k), smallest k on ties."""
    Z = [int(z) for z in cumulative]
    K = len(Z) - 1
    if K <= 0:
        return 0
    best_k, best = 0, 0
    for k, z in enumerate(Z):
        score = k * Z[K] - K * z
        if score > best:
            best_k, best = k, score
    return best_k


def _clusters_after(M: int, merges: Sequence[tuple[int, int]]) -> Clusters:
    members = {i: [i] for i in range(M)}
    for a, b in merges:
        members[a] = sorted(members[a] + members.pop(b))
    return tuple(tuple(members[k]) for k in sorted(members))


def agglomerative_clusters(row_sizes: Sequence[int], col_sizes: Sequence[int], num_merges: int | None = None) -> AgglomerativeResult:
    """Greedy min-added-zeros merging of blocks (r_i x c_i); keep ``num_merges`` merges (default: the elbow)."""
    r = [int(x) for x in row_sizes]
    c = [int(x) for x in col_sizes]
    M = len(r)
    if M == 0 or len(c) != M:
        raise ValueError("agglomerative_clusters: need one (rows, cols) pair per block")
    big = max(r) * sum(c) + max(c) * sum(r) >= 2 ** 62
    dt = object if big else np.int64
    rows = np.array(r, dtype=dt)
    cols = np.array(c, dtype=dt)
    # delta[a, b] (a < b, both active): the added zeros of merging a and b; every other entry holds a
    # sentinel above any real delta. After a merge only the pairs with the merged cluster change.
    sentinel = 2 ** 200 if big else np.iinfo(np.int64).max
    delta = np.outer(rows, cols) + np.outer(cols, rows)
    delta[~np.triu(np.ones((M, M), dtype=bool), 1)] = sentinel
    active = np.ones(M, dtype=bool)
    index = np.arange(M)
    merges, deltas = [], []
    for _ in range(M - 1):
        # row-major first minimum = smallest (a, b): deterministic tie-break
        a, b = divmod(int(np.argmin(delta)), M)
        merges.append((int(a), int(b)))
        deltas.append(int(delta[a, b]))
        rows[a] += rows[b]
        cols[a] += cols[b]
        active[b] = False
        delta[b, :] = sentinel
        delta[:, b] = sentinel
        new = rows[a] * cols + cols[a] * rows
        before, after = active & (index < a), active & (index > a)
        delta[before, a] = new[before]
        delta[a, after] = new[after]
    cumulative = tuple(int(x) for x in np.concatenate([[0], np.cumsum(np.array(deltas, dtype=object))])) if deltas else (0,)
    k = elbow_index(cumulative) if num_merges is None else int(num_merges)
    if not 0 <= k <= M - 1:
        raise ValueError(f"agglomerative_clusters: num_merges must be in [0, {M - 1}], got {k}")
    return AgglomerativeResult(tuple(merges), tuple(deltas), cumulative, k, _clusters_after(M, merges[:k]))
