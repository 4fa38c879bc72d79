"""Every operation against a dict model: writes *and* table services, on every table kind.

tests/test_table_model.py checks random write sequences against a dict model.
This machine extends it (`TableMachine`: its writes, deletes, new column, the
model and the row check) with the table services, so that sequences of
ordinary operations — which is how a table gets bricked (issue 28, finding 1:
two log compactions and a clean) — are explored too:

    writes     insert · upsert · bulk_insert · delete · add a column       (TableMachine)
    compact    strategy log | full | hybrid, run at once or plan_only (the plan then runs at the next compact)
    clean      KEEP_LATEST_COMMITS | KEEP_LATEST_FILE_VERSIONS, retained 1..3
    cluster    every small file group rewritten (a replacecommit)
    archive    keep 1..3 instants active
    savepoint  the latest write                 restore   to one of the savepoints
    rollback   the latest completed write       upgrade   a version 9 table to version 10

on MERGE_ON_READ `lsm_tree`, MERGE_ON_READ `default`, COPY_ON_WRITE and a CDC
table (one TestCase each).

The model is the dict of live rows after each completed instant, and the
history: every completed write instant (compactions, clusterings and upgrades
included: they change no row) with the model as of it.  A restore puts the
model back to the savepoint's entry and drops the later ones; a rollback drops
the latest write.  After every step:

  * the snapshot equals the model (TableMachine's invariant);
  * a lookup of every model key and of absent keys equals the model;
  * time travel to every instant of the history equals the model as of it, or
    raises the cleaner's typed "cannot time travel" `InputError` (lsm_lab's
    promise: a read beyond what the cleaner kept is refused, never partial) —
    never for the latest instant or a savepointed one;
  * on the CDC table, `read_cdc` from the start and from every instant equals
    the changes the model history implies, or raises the cleaner's `InputError`
    — never when every snapshot of the window is retained.

The rules are weighted towards what bricks tables (issue 28, finding 1: log
compactions and cleans that keep one commit) and towards small upserts that
stack logs on one file group: Hypothesis picks a rule uniformly among the
enabled ones, so those rules come two or three times (`upsert_2`,
`compact_log_2`, `clean_one_2`, ...) — that is their weight.

A read of the history beyond what the cleaner kept must be refused with a typed
error that says so (`_not_retained`); a "committed file is missing (deleted by
hand?)" error there is a failure (finding 12), and so is any partial result.

`make test` runs a bounded, seeded profile (`EXAMPLES`, `STEPS`, `SEEDS`) that
prints a failing example as found (shrinking one takes Hypothesis minutes);
benchmarks/model_campaign.py runs the same machines with bigger settings, and
shrinks.
"""

from __future__ import annotations

import collections
from typing import Any, ClassVar

from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule
from test_table_model import Key, TableMachine

import lsm_lab
from lsm_lab.errors import InputError, LsmLabError, TimelineError, UnsupportedFeatureError

EXAMPLES = {"mor_lsm_tree": 16, "mor_default": 10, "cow": 10, "cdc": 10}  # per machine, in `make test`
STEPS = 20
SEEDS = {"mor_lsm_tree": 0, "mor_default": 1, "cow": 2, "cdc": 3}  # `make test` is deterministic (seed 0 finds
# finding 1 of issue 28 in MOR lsm_tree's 8th example on the code the issue was filed against)
CLEAN_POLICIES = ["KEEP_LATEST_COMMITS", "KEEP_LATEST_FILE_VERSIONS"]
ROW = st.fixed_dictionaries({"id": st.sampled_from(["a", "b", "k1"]), "n": st.integers(0, 1),
                             "p": st.sampled_from(["x", "y"]), "ts": st.none(), "v": st.integers(0, 99),
                             "w": st.sampled_from([None, "w1"])})
ABSENT = ["zz", "k9"]
CLUSTER_ALL = {"hoodie.clustering.plan.strategy.small.file.limit": "1" + "0" * 12}
RULES: collections.Counter[str] = collections.Counter()  # rule (and variant) → times run, for the campaign
# a write's CDC change of one key: (op, key, the row before, the row after) in the model
Change = tuple[str, Key, dict[str, Any] | None, dict[str, Any] | None]


def _not_retained(exc: BaseException) -> bool:
    """The cleaner's refusal (TableState.check_retained, table/cdc.py): the only error a read of the history may
    give — typed, and saying that the cleaner removed that snapshot (issue 28, finding 12), not that a file
    was "deleted by hand"."""
    text = str(exc).lower()
    return (isinstance(exc, LsmLabError) and ("cleaner" in text or "cannot time travel" in text)
            and "deleted by hand" not in text)


class ServicesMachine(TableMachine):
    """TableMachine's writes plus every table service, against the model history."""

    cdc = False
    versions: ClassVar[list[int]] = [10, 9]

    def __init__(self) -> None:
        super().__init__()
        self.tombstones: dict[str, dict[Key, int]] = {}  # begin time → tombstones as of that write
        self.changes: dict[str, list[Change]] = {}  # begin time of a write → its CDC changes
        self.savepoints: dict[str, str] = {}  # savepoint instant → savepointed begin time
        self.readable: dict[str, bool] = {}  # begin time → time travel to it worked at the last full check
        self.full_check = True  # after a service every snapshot is checked again; after a write the latest two

    # ------------------------------------------------------------------ set-up
    @initialize(partitioned=st.booleans(), composite=st.booleans(), buckets=st.integers(1, 2),
                version=st.sampled_from([10, 9]))
    def create(self, partitioned: bool, composite: bool, buckets: int, version: int) -> None:
        self.ordering, self.partitioned, self.composite, self.hive = False, partitioned, composite, True
        if version not in self.versions:
            version = self.versions[0]
        self.table = lsm_lab.create_table(
            self.location, name="model", record_key=["id", "n"] if composite else "id",
            partition_by="p" if partitioned else None, table_type=self.table_type, layout=self.layout,
            num_buckets=buckets, table_version=version, cdc=self.cdc)

    def teardown(self) -> None:  # the time travel of TableMachine's teardown runs after every step here
        self.history = []
        super().teardown()

    # ------------------------------------------------------------------ bookkeeping
    @property
    def t(self) -> lsm_lab.Table:
        assert self.table is not None
        return self.table

    def _note(self, name: str) -> None:
        self.full_check = self.full_check or not name.startswith(("insert", "upsert", "bulk_insert", "delete"))
        RULES[f"{type(self).__name__.split('_', 1)[-1]}:{name}"] += 1

    def _committed(self, instant: lsm_lab.Instant) -> None:
        before = self.history[-1][1] if self.history else {}
        super()._committed(instant)
        self.tombstones[instant.begin_time] = dict(self.tombstone)
        changes: list[Change] = []
        for key in sorted(set(before) | set(self.model), key=repr):
            old, new = before.get(key), self.model.get(key)
            if new is not None and new["_hoodie_commit_time"] == instant.begin_time:
                changes.append(("u" if old is not None else "i", key, old, new))
            elif new is None and old is not None:
                changes.append(("d", key, old, None))
        self.changes[instant.begin_time] = changes

    def _sync(self) -> list[lsm_lab.Instant]:
        """Add the completed write instants a service made (they change no row) to the history."""
        known = {i.begin_time for i, _ in self.history}
        new = [i for i in self.t.completed_writes() if i.begin_time not in known]
        for inst in new:
            assert not self.history or str(inst.completion_time) > str(self.history[-1][0].completion_time)
            self.history.append((inst, {k: dict(v) for k, v in self.model.items()}))
            self.tombstones[inst.begin_time] = dict(self.tombstone)
        return new

    def _reset_to(self, index: int) -> None:
        """The model as of history[index] (-1: the empty table), dropping every later entry."""
        self.history = self.history[:index + 1]
        if self.history:
            inst, state = self.history[-1]
            self.model = {k: dict(v) for k, v in state.items()}
            self.tombstone = dict(self.tombstones[inst.begin_time])
        else:
            self.model, self.tombstone = {}, {}
        kept = {i.begin_time for i, _ in self.history}
        self.savepoints = {sp: b for sp, b in self.savepoints.items() if b in kept}

    # ------------------------------------------------------------------ writes (TableMachine's, counted)
    def _write(self, op: str, rows: list[dict[str, Any]], form: str) -> None:
        self._note(op)
        TableMachine.write(self, op=op, rows=rows, form=form)

    write = rule(op=st.sampled_from(["insert", "upsert", "bulk_insert"]), rows=st.lists(ROW, min_size=1, max_size=4),
                 form=st.sampled_from(["arrow", "dicts", "pandas"]))(_write)

    # the rules that brick tables come more than once (Hypothesis picks rules uniformly: this is their weight)
    @rule(rows=st.lists(ROW, min_size=1, max_size=2))
    def upsert(self, rows: list[dict[str, Any]]) -> None:
        self._write("upsert", rows, "arrow")

    @rule(rows=st.lists(ROW, min_size=1, max_size=2))
    def upsert_2(self, rows: list[dict[str, Any]]) -> None:
        self._write("upsert", rows, "dicts")

    @rule(rows=st.lists(ROW, min_size=1, max_size=2))
    def upsert_3(self, rows: list[dict[str, Any]]) -> None:
        self._write("upsert", rows, "pandas")

    @rule(rows=st.lists(ROW, max_size=3), form=st.sampled_from(["arrow", "dicts", "keys"]))
    def delete(self, rows: list[dict[str, Any]], with_ts: bool = False, form: str = "dicts") -> None:
        self._note("delete")
        TableMachine.delete(self, rows=rows, with_ts=False, form=form)

    # ------------------------------------------------------------------ table services
    def _compact(self, strategy: str, plan_only: bool) -> None:
        self._note(f"compact {strategy}{' plan_only' if plan_only else ''}")
        done = self.t.compact(strategy=strategy, plan_only=plan_only)
        if plan_only:
            assert done is None or not done.is_completed
        new = self._sync()
        if not self.t.config.is_mor:
            assert done is None and not new
        elif not plan_only and done is not None:
            assert done.begin_time in {i.begin_time for i in new}

    compact = rule(strategy=st.sampled_from(["log", "full", "hybrid"]), plan_only=st.booleans())(_compact)

    @rule()
    def compact_log(self) -> None:
        self._compact("log", False)

    @rule()
    def compact_log_2(self) -> None:
        self._compact("log", False)

    def _clean(self, policy: str, retained: int) -> None:
        self._note(f"clean {policy} {retained}")
        self.t.clean(policy=policy, retained=retained)
        assert not self._sync()

    clean = rule(policy=st.sampled_from(CLEAN_POLICIES), retained=st.integers(1, 3))(_clean)

    @rule()
    def clean_one(self) -> None:
        self._clean("KEEP_LATEST_COMMITS", 1)

    @rule()
    def clean_one_2(self) -> None:
        self._clean("KEEP_LATEST_COMMITS", 1)

    @rule()
    def cluster(self) -> None:
        self._note("cluster")
        self.t.cluster(options=CLUSTER_ALL)
        self._sync()

    @rule(keep=st.integers(1, 3))
    def archive(self, keep: int) -> None:
        self._note(f"archive {keep}")
        self.t.archive(keep=keep)
        assert not self._sync()

    @precondition(lambda self: self.history)
    @rule()
    def savepoint(self) -> None:
        self._note("savepoint")
        latest = self.t.completed_writes()[-1]
        assert latest.begin_time == self.history[-1][0].begin_time
        if latest.begin_time in self.savepoints.values():
            try:
                self.t.savepoint()
            except InputError as exc:
                assert "already savepointed" in str(exc)
                return
            raise AssertionError(f"savepointed {latest} twice")
        sp = self.t.savepoint()
        self.savepoints[sp.begin_time] = latest.begin_time

    @precondition(lambda self: self.savepoints)
    @rule(data=st.data())
    def restore(self, data: st.DataObject) -> None:
        self._note("restore")
        sp = data.draw(st.sampled_from(sorted(self.savepoints)), label="savepoint")
        target = self.savepoints[sp]
        index = next(n for n, (i, _) in enumerate(self.history) if i.begin_time == target)
        archived = {i.begin_time for i in self.t.archived_instants()}
        if any(i.begin_time in archived for i, _ in self.history[index + 1:]):
            try:
                self.t.restore(sp)
            except TimelineError as exc:
                assert "archived" in str(exc)
                return
            raise AssertionError("restored over archived instants")
        self.t.restore(sp)
        self._reset_to(index)
        assert [i.begin_time for i in self.t.completed_writes()] == [i.begin_time for i, _ in self.history]

    @precondition(lambda self: self.history)
    @rule()
    def rollback(self) -> None:
        """Roll back the latest completed write: refused unless it is a commit, deltacommit or replacecommit
        (an overwrite or a clustering, not the upgrade) still active."""
        latest, _ = self.history[-1]
        if latest.begin_time in self.savepoints.values():
            return  # a savepointed write: not modelled (restore is the way back to it)
        archived = {i.begin_time for i in self.t.archived_instants()}
        upgraded = latest.begin_time not in archived and \
            self.t.instant_metadata(latest).get("operationType") == "UPGRADE_TO_V10"
        ok = latest.action in ("commit", "deltacommit", "replacecommit", "clustering") and not upgraded \
            and latest.begin_time not in archived
        self._note(f"rollback {'write' if ok else 'refused'}")
        if not ok:
            try:
                self.t.rollback(latest)
            except (InputError, TimelineError):
                return
            raise AssertionError(f"rolled back {latest}")
        try:
            self.t.rollback(latest)
        except LsmLabError as exc:  # the snapshot before it was cleaned: a refusal that says so is right
            assert _not_retained(exc) and not self.readable.get(self.history[-2][0].begin_time, True), exc
            return
        self._reset_to(len(self.history) - 2)
        self.changes.pop(latest.begin_time, None)
        assert [i.begin_time for i in self.t.completed_writes()] == [i.begin_time for i, _ in self.history]

    @precondition(lambda self: self.table is not None and self.t.config.version < 10)
    @rule()
    def upgrade(self) -> None:
        pending = [i for i in self.t.active_timeline.pending() if i.action in ("compaction", "logcompaction")]
        self._note(f"upgrade{' refused' if pending else ''}")
        if pending:
            try:
                self.t.upgrade()
            except UnsupportedFeatureError:
                return
            raise AssertionError("upgraded over a pending compaction plan")
        self.table = self.t.upgrade()
        assert self.t.config.version == 10
        self._sync()

    # ------------------------------------------------------------------ invariants
    def _retained(self) -> list[bool]:
        """Time travel to every history entry: equal to the model then, or the cleaner's refusal."""
        out = []
        pinned = set(self.savepoints.values())
        for n, (inst, state) in enumerate(self.history):
            if not self.full_check and n < len(self.history) - 2 and inst.begin_time in self.readable:
                out.append(self.readable[inst.begin_time])  # a write changes no older snapshot
                continue
            try:
                got = self.t.read(as_of=inst)  # the snapshot as the instant completed (a CompletionTime)
            except LsmLabError as exc:
                assert _not_retained(exc), f"time travel to {inst}: {type(exc).__name__}: {exc}"
                assert n < len(self.history) - 1, f"the latest instant {inst} is not readable: {exc}"
                assert inst.begin_time not in pinned, f"savepointed {inst} is not readable: {exc}"
                out.append(False)
            else:
                self._check(got, state, f"as of {inst}")
                out.append(True)
            self.readable[inst.begin_time] = out[-1]
        return out

    def _check_lookup(self) -> None:
        keys = {self._expected_meta(k)[0] for k in self.model}
        absent = [f"id:{a},n:0" if self.composite else a for a in ABSENT]
        got = self.t.lookup(sorted(keys) + absent)
        self._check(got, self.model, "lookup")

    def _image(self, row: dict[str, Any] | None, fields: list[str]) -> tuple[tuple[str, Any], ...] | None:
        return None if row is None else tuple((f, row.get(f)) for f in fields)

    def _check_cdc(self, retained: list[bool]) -> None:
        writes = [(n, i) for n, (i, _) in enumerate(self.history) if i.begin_time in self.changes]
        starts: list[tuple[int, str | None]] = [(-1, None)] + [(n, i.completion_time)
                                                                for n, (i, _) in enumerate(self.history)]
        if not self.full_check:  # after a write: the whole stream and the write's own change records
            starts = [starts[0], *starts[-2:]]
        for n, start in starts:
            try:
                got = self.t.read_cdc(start)
            except LsmLabError as exc:
                assert _not_retained(exc), f"read_cdc({start}): {type(exc).__name__}: {exc}"
                assert not all(retained[max(n, 0):]), f"read_cdc({start}) over retained snapshots: {exc}"
                continue
            fields = [f.name for f in got.schema.field("after").type]
            want = []
            for m, inst in writes:
                if m <= n:
                    continue
                for op, key, old, new in self.changes[inst.begin_time]:
                    want.append((inst.begin_time, op, self._expected_meta(key)[0],
                                 self._image(old, fields), self._image(new, fields)))
            have = [(r["commit_time"], r["op"], r["record_key"],
                     self._image(r["before"], fields), self._image(r["after"], fields)) for r in got.to_pylist()]
            assert sorted(have, key=repr) == sorted(want, key=repr), f"read_cdc({start})"

    @invariant()
    def services_keep_the_model(self) -> None:
        if self.table is None:
            return
        self._check_lookup()
        retained = self._retained()
        if self.cdc:
            self._check_cdc(retained)
        self.full_check = False


def machine(table_type: str, layout: str, *, cdc: bool = False, name: str | None = None,
            versions: tuple[int, ...] = (10, 9)) -> type[ServicesMachine]:
    return type(name or f"Services_{table_type}_{layout}{'_cdc' if cdc else ''}", (ServicesMachine,),
                {"table_type": table_type, "layout": layout, "cdc": cdc, "versions": list(versions)})


MACHINES = {
    "mor_lsm_tree": machine("MERGE_ON_READ", "lsm_tree", name="Services_mor_lsm_tree"),
    "mor_default": machine("MERGE_ON_READ", "default", name="Services_mor_default"),
    "cow": machine("COPY_ON_WRITE", "lsm_tree", name="Services_cow"),
    "cdc": machine("MERGE_ON_READ", "lsm_tree", cdc=True, name="Services_cdc"),
}


def profile(examples: int, steps: int, *, derandomize: bool) -> settings:
    return settings(max_examples=examples, stateful_step_count=steps, deadline=None, derandomize=derandomize,
                    database=None, report_multiple_bugs=False,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                           HealthCheck.data_too_large])


def _case(key: str) -> type:
    """The bounded profile: seeded, and without shrinking (a failing example is printed as found, at most STEPS
    steps): shrinking a failure of this machine takes Hypothesis minutes; the campaign shrinks."""
    case = seed(SEEDS[key])(MACHINES[key]).TestCase
    case.settings = settings(profile(EXAMPLES[key], STEPS, derandomize=False), phases=[Phase.explicit, Phase.generate])
    return case


TestServicesMorLsmTree = _case("mor_lsm_tree")
TestServicesMorDefault = _case("mor_default")
TestServicesCow = _case("cow")
TestServicesCdc = _case("cdc")
