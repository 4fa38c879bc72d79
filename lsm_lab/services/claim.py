"""Claiming a planned table service (compaction, log compaction, clustering) before running it.

A plan sits on the timeline as `<t>.<action>.requested` until some process runs
it.  Whoever runs it first makes the plan its own, under the table lock:

    lock ─┬─ roll back failed writes (their files must not be read)
          ├─ find <t>; completed already? → nothing to do
          ├─ take the heartbeat of <t>       (ConflictError: a live process runs it)
          ├─ delete what a dead earlier attempt left (instant files, markers)
          └─ requested → inflight            (an inflight plan stays inflight)
    unlock; run the plan without the lock; the heartbeat says "alive" meanwhile

Compaction and clustering differ in what they run, not in how they claim it,
so both call `claim`.

Simplified compared with Apache Hudi: Hudi's table service clients do the
same steps inside their transaction manager; lsm_lab keeps only the ones a
single table lock needs.

Taught in: notebooks/07_compaction.ipynb
"""

from __future__ import annotations

from collections.abc import Collection

from lsm_lab.errors import InputError
from lsm_lab.services import heartbeat, markers
from lsm_lab.services.lock import table_lock
from lsm_lab.services.rollback import delete_instant_files, rollback_failed_writes
from lsm_lab.table.state import TableState
from lsm_lab.timeline.instant import Instant, State, requested_instant


def claim(table: TableState, begin: str, actions: Collection[str],
          what: str) -> tuple[Instant, heartbeat.Heartbeat | None]:
    """Make the planned instant `begin` this process's own: (its inflight instant, the started heartbeat).

    When the instant has completed already, returns (the completed instant, None).
    `what` names the service for the error when `begin` is another action.
    """
    timeline = table.active_timeline
    with table_lock(table.path):
        rollback_failed_writes(table.path, timeline)
        current = timeline.find(begin)
        if current.action not in actions:
            raise InputError(f"{current} is not a {what}")
        if current.is_completed:
            return current, None
        hb = heartbeat.Heartbeat(table.path, begin).start()  # ConflictError if a live runner has it
        try:
            # leftovers of a dead earlier attempt; the table's version as this operation read it (no GET of
            # hoodie.properties again): lsm_lab has no downgrade, so a version read earlier is never above
            # the current one, and a lower one only makes `files_of_instant` the more cautious (markers only)
            delete_instant_files(table.path, begin, table_version=table.config.version, pending=True)
            markers.delete_markers(table.path, begin)
            inflight = current if current.state is State.INFLIGHT else \
                timeline.start(requested_instant(current, table.config.timeline_layout))
        except BaseException:
            hb.stop()
            raise
    return inflight, hb


__all__ = ["claim"]
