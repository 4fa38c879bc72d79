"""Table services: everything that keeps a table healthy besides reads and writes.

    lock.py        the table lock (an OS file lock; short critical sections only)
    heartbeat.py   liveness of the process that owns a pending instant
    markers.py     a note per data file, written before the file
    occ.py         optimistic concurrency: snapshot, write without the lock, conflict check at commit
    rollback.py    undo a dead write (or the latest completed one); run a restore's rollbacks
    planner.py     the hybrid compaction planner (FULL or LOG per file group)
    compaction.py  run a plan: L0 + L1 → L1, or L0 → L0; inline triggers
    clustering.py  small file groups → fewer key-sorted ones, as a replacecommit
    clean.py       delete files no retained snapshot needs
    savepoint.py   savepoints and restore
    archiver.py    move old instants into the LSM timeline (timeline/archive.py)
    upgrade.py     table-format upgrades: to version 9 (native logs), to version 10 (data rewritten)
    command.py     the `lsm-lab` commands for all of the above

The services take a `TableState` (table/state.py: timeline, schema, files),
never the `Table` facade: `Table` sits above them and exposes them as thin
methods (compact, clean, rollback, savepoint, restore, archive).

Taught in: notebooks/07_compaction.ipynb, notebooks/11_clustering.ipynb
"""
