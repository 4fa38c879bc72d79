"""The loser tree of RFC-103: a k-way merge as a plain, steppable state machine.

k sorted inputs (no key twice inside one input) are merged by a tournament.
Every input is a *leaf* holding its head record. Each internal node remembers
the *loser* of the match played there; the overall winner (the champion) sits
in ``tree[0]``. With k = 5 the nodes and leaves are numbered like a heap:

                         tree[0] = champion leaf
                               |
                           node 1
                        /          \\
                   node 2          node 3
                  /      \\        /      \\
              node 4    leaf 1  leaf 2   leaf 3        leaf i lives at position k + i,
             /      \\                                  its parent is (k + i) // 2
         leaf 4    leaf 0

**Core invariant: node m holds the loser of the match between the winners of
its two subtrees, and the winner of the whole tree is in tree[0].** Records
are ordered by key, and equal keys by source index (base = 0, then logs in
completion order), so the merge is deterministic. When the champion's input
advances, only the matches on its leaf-to-root path can change: ``adjust``
replays that path, one comparison per level, O(log k) per record, where a
binary heap needs up to two comparisons per level.

**Six states.** RFC-103 (following Apache Paimon's loser tree) pops *all*
records of one key before any input advances, so the merge function sees the
whole group, and it finds the next record of the same key without comparing
keys. Each leaf carries a state:

    WINNER_WITH_NEW_KEY   climbing/at the top, first of its key
    WINNER_WITH_SAME_KEY  at the top, same key as the record just popped
    WINNER_POPPED         its record was taken; the input has not advanced yet
    LOSER_WITH_NEW_KEY    stored at a node, key differs from the winner that beat it
    LOSER_WITH_SAME_KEY   stored at a node, key equals the winner that beat it
    LOSER_POPPED          a popped leaf parked at a node until its input advances

and ``first_same`` (RFC-103's firstSameKeyIndex): the lowest node on the
leaf's path where it beat a loser with the *same* key. Popping a champion
whose ``first_same`` is set does not read input: the same-key loser at that
node takes the champion's place, the popped leaf is parked there, and the new
contender climbs to the root comparing only source indices with other
same-key losers (``WINNER_WITH_SAME_KEY``). When a popped champion has no
same-key loser, the key's group is complete: the merge emits one merged record
(the fold of semantics.py), then *advances* popped leaves. During that phase a
popped leaf wins every match, so popped leaves surface at the root one at a
time; each is advanced and its path replayed with real key comparisons, until
the champion is a real record again.

The merge can be run one transition at a time: ``trace_merge`` returns the
frozen `Step` snapshots (tree array, leaf heads and states, what moved, output
so far, comparisons so far), each with a text ``dump()``; a widget only draws
these. `MergeIterator` is the same machine as an iterator (``is_valid``,
``key``, ``value``, ``next``), and ``merge_batches`` runs it over Arrow
batches: this is the exact reference engine, one Python step per record.
The sorted engine reuses `LoserTree` with one leaf per input whose "records"
are whole batches keyed by their last key (see sorted.py).

Simplified compared with Apache Hudi/Paimon: records are Python objects (no
object reuse, so the delayed advance is kept for its clarity and for the
comparison savings, not for memory safety), there is no spill and no
sequence-number tie-break beyond the source index.

Taught in: notebooks/05_loser_tree.ipynb, notebooks/06_merge_semantics.ipynb, notebooks/10_sorted_vs_hash_on_spark.ipynb
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Generic, TypeVar

import pyarrow as pa

from lsm_lab.errors import InputError
from lsm_lab.merge.semantics import MergeSpec, SourceInput, check_keys_not_null, fold, surviving_row

K = TypeVar("K")
P = TypeVar("P")


class LeafState(str, enum.Enum):
    """The six states of a leaf (see the module docstring)."""

    WINNER_WITH_NEW_KEY = "WINNER_WITH_NEW_KEY"
    WINNER_WITH_SAME_KEY = "WINNER_WITH_SAME_KEY"
    WINNER_POPPED = "WINNER_POPPED"
    LOSER_WITH_NEW_KEY = "LOSER_WITH_NEW_KEY"
    LOSER_WITH_SAME_KEY = "LOSER_WITH_SAME_KEY"
    LOSER_POPPED = "LOSER_POPPED"


@dataclass(eq=False)
class _Leaf(Generic[K, P]):
    """One input: its head record, its state and its same-key pointer."""

    source: int
    stream: Iterator[tuple[K, P]]
    key: K | None = None
    payload: P | None = None
    exhausted: bool = False
    popped: bool = False
    state: LeafState = LeafState.WINNER_WITH_NEW_KEY
    first_same: int = -1
    consumed: int = 0
    _last: Any = field(default=None, repr=False)

    def advance(self) -> None:
        """Read the next record (or become exhausted); checks the input is strictly sorted."""
        self.popped = False
        self.first_same = -1
        item = next(self.stream, None)
        if item is None:
            self.exhausted, self.key, self.payload = True, None, None
            return
        key, payload = item
        if self.consumed and not (self._last < key):
            raise InputError(f"source {self.source}: keys are not strictly sorted "
                             f"({self._last!r} is followed by {key!r})")
        self.key, self.payload, self._last = key, payload, key
        self.consumed += 1


StepHook = Callable[["LoserTree[Any, Any]", str, str, tuple[int, ...], tuple[int, ...]], None]


class LoserTree(Generic[K, P]):
    """The RFC-103 loser tree over k streams of ``(key, payload)`` items.

    ``peek()`` shows the champion; ``pop_group()`` pops every record of the
    champion's key (in source order) without advancing any input;
    ``advance_popped()`` then advances the popped inputs and restores the tree.
    ``comparisons`` counts key comparisons; ``tie_breaks`` counts same-key
    contests decided by source index alone (no key compared).
    """

    def __init__(self, streams: Sequence[Iterable[tuple[K, P]]], *, on_step: StepHook | None = None) -> None:
        self.k = len(streams)
        self.leaves: list[_Leaf[K, P]] = [_Leaf(i, iter(s)) for i, s in enumerate(streams)]
        self.tree: list[int] = [-1] * max(self.k, 1)
        self.comparisons = 0
        self.tie_breaks = 0
        self._on_step = on_step
        for leaf in self.leaves:
            leaf.advance()
        for i in range(self.k):
            self._climb(i)
        if self.k:
            self._note("init", f"built the tree over {self.k} inputs ({self.comparisons} comparisons)",
                       tuple(range(self.k)), tuple(range(self.k)))

    # ---- queries -------------------------------------------------------------------

    @property
    def champion(self) -> _Leaf[K, P] | None:
        """The leaf in tree[0] (None when there are no inputs)."""
        return self.leaves[self.tree[0]] if self.k else None

    def is_exhausted(self) -> bool:
        """True when every input is exhausted (and nothing is waiting to advance)."""
        c = self.champion
        return c is None or (c.exhausted and not c.popped)

    def peek(self) -> tuple[K, int, P] | None:
        """The champion's (key, source, payload), or None when done or popped."""
        c = self.champion
        if c is None or c.exhausted or c.popped:
            return None
        return c.key, c.source, c.payload  # type: ignore[return-value]

    # ---- transitions -----------------------------------------------------------------

    def pop(self) -> tuple[K, int, P]:
        """Pop the champion's record; a same-key contender (if any) becomes champion."""
        c = self.champion
        if c is None or c.exhausted or c.popped:
            raise IndexError("pop from an exhausted or popped loser tree")
        record = (c.key, c.source, c.payload)
        c.popped, c.state = True, LeafState.WINNER_POPPED
        if c.first_same < 0:
            if self._on_step is not None:
                self._note("pop", f"popped {c.key!r} from leaf {c.source}; no same-key loser: "
                                  f"the key is complete", (c.source,), ())
            return record  # type: ignore[return-value]
        nodes = self._promote(c)
        c.first_same = -1  # used up; a popped leaf points nowhere until it advances
        if self._on_step is not None:
            new = self.leaves[self.tree[0]]
            self._note("pop", f"popped {c.key!r} from leaf {c.source}; parked it at node {nodes[0]}; "
                              f"leaf {new.source} (same key) is champion via nodes {list(nodes)}",
                       (c.source, new.source), nodes)
        return record  # type: ignore[return-value]

    def pop_group(self) -> list[tuple[K, int, P]]:
        """Pop every record of the champion's key, in source order; inputs do not advance."""
        group = [self.pop()]
        while not self.leaves[self.tree[0]].popped:
            group.append(self.pop())
        return group

    def advance_popped(self) -> None:
        """Advance every popped input and replay its path, until the champion is a real record."""
        while self.k and self.leaves[self.tree[0]].popped:
            leaf = self.leaves[self.tree[0]]
            before = self.comparisons
            leaf.advance()
            nodes = self._climb(leaf.source)
            if self._on_step is not None:
                head = "exhausted" if leaf.exhausted else repr(leaf.key)
                self._note("advance", f"leaf {leaf.source} advanced to {head}; replayed nodes {list(nodes)} "
                                      f"({self.comparisons - before} comparison(s)); "
                                      f"champion is leaf {self.tree[0]}", (leaf.source,), nodes)

    # ---- the machinery ---------------------------------------------------------------

    def _note(self, action: str, text: str, leaves: tuple[int, ...], nodes: tuple[int, ...]) -> None:
        """Report a transition to the step hook (callers build the text only when there is one)."""
        if self._on_step is not None:
            self._on_step(self, action, text, leaves, nodes)

    def _beats(self, a: _Leaf[K, P], b: _Leaf[K, P]) -> tuple[bool, bool]:
        """(a wins, same key) for the ordinary match: popped first, exhausted last."""
        if a.popped or b.popped:
            if a.popped and b.popped:
                return a.source < b.source, False
            return a.popped, False
        if a.exhausted or b.exhausted:
            if a.exhausted and b.exhausted:
                return a.source < b.source, False
            return b.exhausted, False
        self.comparisons += 1
        ka, kb = a.key, b.key
        if ka < kb:  # type: ignore[operator]
            return True, False
        if kb < ka:  # type: ignore[operator]
            return False, False
        return a.source < b.source, True

    def _climb(self, leaf_index: int) -> tuple[int, ...]:
        """``adjust``: replay the matches on one leaf-to-root path; returns the nodes visited."""
        cand = self.leaves[leaf_index]
        cand.state = LeafState.WINNER_POPPED if cand.popped else LeafState.WINNER_WITH_NEW_KEY
        node = (leaf_index + self.k) // 2
        visited: list[int] = []
        while node >= 1:
            visited.append(node)
            if self.tree[node] < 0:  # building: first arrival waits for its opponent
                self.tree[node] = cand.source
                cand.state = LeafState.LOSER_WITH_NEW_KEY
                return tuple(visited)
            other = self.leaves[self.tree[node]]
            cand_wins, same = self._beats(cand, other)
            winner, loser = (cand, other) if cand_wins else (other, cand)
            self.tree[node] = loser.source
            if loser.popped:
                loser.state = LeafState.LOSER_POPPED
            else:
                loser.state = LeafState.LOSER_WITH_SAME_KEY if same else LeafState.LOSER_WITH_NEW_KEY
            if same and winner.first_same < 0:
                winner.first_same = node
            winner.state = LeafState.WINNER_POPPED if winner.popped else LeafState.WINNER_WITH_NEW_KEY
            cand = winner
            node //= 2
        self.tree[0] = cand.source
        return tuple(visited)

    def _promote(self, popped: _Leaf[K, P]) -> tuple[int, ...]:
        """Jump to the same-key loser at ``popped.first_same`` and let it climb (source ties only)."""
        node = popped.first_same
        cand = self.leaves[self.tree[node]]
        assert cand.state is LeafState.LOSER_WITH_SAME_KEY and not cand.popped
        self.tree[node] = popped.source
        popped.state = LeafState.LOSER_POPPED
        cand.state = LeafState.WINNER_WITH_SAME_KEY
        visited = [node]
        node //= 2
        while node >= 1:
            visited.append(node)
            other = self.leaves[self.tree[node]]
            if other.state is LeafState.LOSER_WITH_SAME_KEY:
                # same key as the candidate: the lower source index wins, no key comparison
                self.tie_breaks += 1
                if other.source < cand.source:
                    self.tree[node] = cand.source
                    cand.state = LeafState.LOSER_WITH_SAME_KEY
                    cand, other = other, cand
                    cand.state = LeafState.WINNER_WITH_SAME_KEY
                if cand.first_same < 0:
                    cand.first_same = node
            # LOSER_WITH_NEW_KEY (greater key) and LOSER_POPPED lose without a comparison
            node //= 2
        self.tree[0] = cand.source
        return tuple(visited)


# --------------------------------------------------------------------------------------
# Snapshots
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LeafView:
    """One leaf as drawn: its input, head record and state."""

    source: int
    key: Any
    row: Mapping[str, Any] | None
    state: LeafState
    first_same: int
    exhausted: bool
    popped: bool
    consumed: int


@dataclass(frozen=True)
class Step:
    """An immutable snapshot of the merge after one transition.

    ``action`` is one of ``init``, ``pop``, ``emit``, ``advance``, ``done``;
    ``moved_leaves``/``moved_nodes`` say what the transition touched;
    ``tree[0]`` is the champion leaf, ``tree[m]`` the loser leaf at node m.
    """

    index: int
    action: str
    description: str
    moved_leaves: tuple[int, ...]
    moved_nodes: tuple[int, ...]
    tree: tuple[int, ...]
    leaves: tuple[LeafView, ...]
    output: tuple[Mapping[str, Any], ...]
    output_keys: tuple[str, ...]
    comparisons: int
    tie_breaks: int

    def _repr_html_(self) -> str:
        """The text dump in a notebook (`lsm_lab.viz.step_html` draws the tree as a picture)."""
        import html

        return f"<pre style='line-height:1.25'>{html.escape(self.dump())}</pre>"

    def dump(self) -> str:
        """A plain-text rendering: header, tree by level, leaves, output, counters."""
        lines = [f"step {self.index} [{self.action}] {self.description}"]
        k = len(self.leaves)
        champ = self.tree[0] if k else -1
        lines.append(f"  tree[0] = champion #{champ}" if k else "  (no inputs)")
        level, node = 0, 1
        while node < k:
            width = 1 << level
            row = [f"n{m}:#{self.tree[m]}" for m in range(node, min(node + width, k))]
            lines.append("  " + "  ".join(row))
            node += width
            level += 1
        for leaf in self.leaves:
            head = "<exhausted>" if leaf.exhausted else repr(leaf.key)
            if leaf.popped:
                head += " (popped)"
            mark = "*" if leaf.source == champ else " "
            same = "-" if leaf.first_same < 0 else f"n{leaf.first_same}"
            lines.append(f" {mark}#{leaf.source} src={leaf.source} head={head:<22} "
                         f"{leaf.state.value:<21} first_same={same} read={leaf.consumed}")
        lines.append(f"  output ({len(self.output)}): {', '.join(repr(k) for k in self.output_keys)}")
        lines.append(f"  comparisons: {self.comparisons} (+{self.tie_breaks} by source index)")
        return "\n".join(lines)


# --------------------------------------------------------------------------------------
# The merge: iterator, trace and the Arrow engine
# --------------------------------------------------------------------------------------

RowStream = Iterable[tuple[str, Mapping[str, Any]]]


class MergeIterator:
    """The loser-tree merge as an iterator of merged rows (one per surviving key).

    mini-lsm style: ``is_valid()``, ``key()``, ``value()``, ``next()``; also a
    plain Python iterator of rows. Inputs are streams of ``(key, row)`` pairs,
    each strictly sorted by key; rows are dicts holding the spec's columns.
    """

    def __init__(self, inputs: Sequence[RowStream], spec: MergeSpec, *,
                 on_step: StepHook | None = None,
                 on_emit: Callable[[str, Mapping[str, Any] | None, int], None] | None = None) -> None:
        self.spec = spec
        self.tree: LoserTree[str, Mapping[str, Any]] = LoserTree(inputs, on_step=on_step)
        self.on_emit = on_emit
        self.records = 0
        self._current: tuple[str, dict[str, Any]] | None = None
        self.next()

    def is_valid(self) -> bool:
        """True while `key()`/`value()` hold a merged row."""
        return self._current is not None

    def key(self) -> str:
        """The current merged row's key."""
        assert self._current is not None
        return self._current[0]

    def value(self) -> dict[str, Any]:
        """The current merged row (input columns without the delete column)."""
        assert self._current is not None
        return self._current[1]

    def next(self) -> None:
        """Move to the next surviving key (skipping keys whose final state is a delete)."""
        self._current = None
        while not self.tree.is_exhausted():
            group = self.tree.pop_group()
            self.records += len(group)
            key = group[0][0]
            row = surviving_row(fold((payload for _, _, payload in group), self.spec), self.spec)
            if self.on_emit is not None:
                self.on_emit(key, row, len(group))
            self.tree.advance_popped()
            if row is not None:
                self._current = (key, row)
                return

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while self.is_valid():
            row = self.value()
            self.next()
            yield row

    @property
    def comparisons(self) -> int:
        """Key comparisons so far."""
        return self.tree.comparisons


def _row_stream(rows: Iterable[Mapping[str, Any]], spec: MergeSpec) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for row in rows:
        yield row[spec.key], row


def trace_merge(inputs: Sequence[Sequence[Mapping[str, Any]]], spec: MergeSpec) -> list[Step]:
    """Run the loser-tree merge on lists of row dicts and return every step's snapshot.

    Meant for small inputs (notebooks, the step-through widget): each snapshot
    copies the leaves and the output so far.
    """
    steps: list[Step] = []
    output: list[tuple[str, Mapping[str, Any]]] = []
    trees: list[LoserTree[Any, Any]] = []

    def on_step(tree: LoserTree[Any, Any], action: str, text: str,
                leaves: tuple[int, ...], nodes: tuple[int, ...]) -> None:
        trees[:] = [tree]
        steps.append(_snap(len(steps), action, text, leaves, nodes, tree, output))

    def on_emit(key: str, row: Mapping[str, Any] | None, n: int) -> None:
        if row is not None:
            output.append((key, MappingProxyType(dict(row))))
            text = f"emitted {key!r}: the fold of {n} record(s)"
        else:
            text = f"dropped {key!r}: the fold of {n} record(s) ends in a delete"
        steps.append(_snap(len(steps), "emit", text, (), (), trees[0], output))

    it = MergeIterator([_row_stream(rows, spec) for rows in inputs], spec, on_step=on_step, on_emit=on_emit)
    while it.is_valid():
        it.next()
    tree = it.tree
    steps.append(_snap(len(steps), "done", f"all inputs exhausted; {len(output)} row(s) out of "
                                           f"{it.records} record(s), {tree.comparisons} comparisons",
                       (), (), tree, output))
    return steps


def _snap(index: int, action: str, text: str, leaves: tuple[int, ...], nodes: tuple[int, ...],
          tree: LoserTree[Any, Any], output: list[tuple[str, Mapping[str, Any]]]) -> Step:
    views = tuple(
        LeafView(source=leaf.source, key=leaf.key,
                 row=None if leaf.payload is None else MappingProxyType(dict(leaf.payload)),
                 state=leaf.state, first_same=leaf.first_same, exhausted=leaf.exhausted,
                 popped=leaf.popped, consumed=leaf.consumed)
        for leaf in tree.leaves)
    return Step(index=index, action=action, description=text, moved_leaves=leaves, moved_nodes=nodes,
                tree=tuple(tree.tree) if tree.k else (), leaves=views,
                output=tuple(row for _, row in output), output_keys=tuple(key for key, _ in output),
                comparisons=tree.comparisons, tie_breaks=tree.tie_breaks)


def comparisons_bound(k: int) -> int:
    """ceil(log2 k): the key comparisons per record of a loser tree over k inputs (distinct keys)."""
    return max(0, math.ceil(math.log2(k))) if k > 0 else 0


# ---- the Arrow engine ------------------------------------------------------------------

def _arrow_rows(inp: SourceInput, spec: MergeSpec) -> Iterator[tuple[str, dict[str, Any]]]:
    key = spec.key
    for batch in inp.batches():
        if batch.num_rows == 0:
            continue
        check_keys_not_null(batch.column(key), inp.index)
        for row in batch.to_pylist():
            yield row[key], row


def merge_batches(inputs: Sequence[SourceInput], schema: pa.Schema, spec: MergeSpec,
                  batch_size: int, *, stats: dict[str, int] | None = None) -> Iterator[pa.RecordBatch]:
    """The ``loser_tree`` engine: Arrow batches in, merged batches out, one Python step per record.

    ``stats`` (if given) receives ``records`` and ``comparisons`` at the end.
    """
    out_schema = spec.output_schema(schema)
    it = MergeIterator([_arrow_rows(inp, spec) for inp in inputs], spec)
    buf: list[dict[str, Any]] = []
    while it.is_valid():
        buf.append(it.value())
        it.next()
        if len(buf) >= batch_size:
            yield pa.RecordBatch.from_pylist(buf, schema=out_schema)
            buf = []
    if buf:
        yield pa.RecordBatch.from_pylist(buf, schema=out_schema)
    if stats is not None:
        stats["records"] = it.records
        stats["comparisons"] = it.comparisons


__all__ = [
    "LeafState",
    "LeafView",
    "LoserTree",
    "MergeIterator",
    "Step",
    "comparisons_bound",
    "merge_batches",
    "trace_merge",
]
