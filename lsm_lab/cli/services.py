"""`lsm-lab` commands for the table services (`register` and `SHOW`, called by `lsm_lab.cli.app`).

    lsm-lab compact PATH [--dry-run | --plan-only] [--strategy hybrid|full|log] [--merge sorted|hash] [--option K=V]
    lsm-lab cluster PATH [--dry-run | --plan-only] [--merge sorted|hash] [--option K=V]
    lsm-lab rollback PATH [--instant T]
    lsm-lab clean PATH [--policy KEEP_LATEST_COMMITS|KEEP_LATEST_FILE_VERSIONS] [--retained N]
    lsm-lab savepoint PATH [--instant T] [--comment C] | --list | --delete T
    lsm-lab restore PATH INSTANT
    lsm-lab archive PATH [--keep N]
    lsm-lab show plan PATH [--json]                 the latest compaction plan

Taught in: notebooks/07_compaction.ipynb, notebooks/11_clustering.ipynb
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from lsm_lab.cli.console import ENGINES, TABLE_HELP, parse_options

if TYPE_CHECKING:  # start-up: the table and the services load when a command runs
    from lsm_lab.api import Table


def _table(path: str) -> Table:
    from lsm_lab.api import open_table  # start-up: on first use

    return open_table(path)


def cmd_compact(args: argparse.Namespace) -> int:
    from lsm_lab.filegroup.planner import format_plan, read_plan  # start-up: on first use
    from lsm_lab.services import compaction  # start-up: on first use

    table = _table(args.path)
    if args.dry_run:
        planned = compaction.plan(table, strategy=args.strategy, merge=args.merge, options=parse_options(args.option))
        if planned is None:
            print("nothing to compact")
        else:
            print(format_plan(None, planned))
            print(f"dry run: nothing saved; `lsm-lab compact {args.path}` plans again and runs it")
        return 0
    result = table.compact(strategy=args.strategy, merge=args.merge, plan_only=args.plan_only,
                           options=parse_options(args.option))
    if result is None:
        print("nothing to compact")
        return 0
    if args.plan_only:
        print(format_plan(result, read_plan(table.active_timeline, result)))
        print(f"saved as {result.file_name}; run `lsm-lab compact {args.path}` to execute it")
    else:
        meta = table.instant_metadata(result)
        stats = sum(len(v) for v in (meta.get("partitionToWriteStats") or {}).values())
        print(f"{result.action} {result.begin_time} completed at {result.completion_time}: {stats} file(s) written")
    return 0


def cmd_cluster(args: argparse.Namespace) -> int:
    from lsm_lab.services import clustering  # start-up: on first use

    table = _table(args.path)
    if args.dry_run:
        planned = clustering.plan(table, options=parse_options(args.option))
        if planned is None:
            print("nothing to cluster")
        else:
            print(clustering.format_plan(None, planned))
            print(f"dry run: nothing saved; `lsm-lab cluster {args.path}` plans again and runs it")
        return 0
    result = table.cluster(plan_only=args.plan_only, options=parse_options(args.option), merge=args.merge)
    if result is None:
        print("nothing to cluster")
        return 0
    if args.plan_only:
        print(clustering.format_plan(result, clustering.read_plan(table.active_timeline, result)))
        print(f"saved as {result.file_name}; run `lsm-lab cluster {args.path}` to execute it")
    else:
        print(clustering.format_result(result, table.instant_metadata(result)))
    return 0


def cmd_rollback(args: argparse.Namespace) -> int:
    table = _table(args.path)
    done = table.rollback(args.instant)
    if not done:
        print("nothing to roll back" if args.instant is None else f"{args.instant}: plan removed")
    for inst in done:
        meta = table.instant_metadata(inst)
        target = ", ".join(e["commitTime"] for e in meta.get("instantsRollback") or [])
        print(f"rolled back {target}: {meta.get('totalFilesDeleted', 0)} file(s) deleted ({inst})")
    return 0


def cmd_clean(args: argparse.Namespace) -> int:
    table = _table(args.path)
    done = table.clean(policy=args.policy, retained=args.retained)
    if done is None:
        print("nothing to clean")
        return 0
    meta = table.instant_metadata(done)
    print(f"clean {done.begin_time}: {meta.get('totalFilesDeleted', 0)} file(s) deleted "
          f"(earliest retained instant {meta.get('earliestCommitToRetain') or '—'})")
    return 0


def cmd_savepoint(args: argparse.Namespace) -> int:
    table = _table(args.path)
    if args.delete:
        table.delete_savepoint(args.delete)
        print(f"savepoint of {args.delete} deleted")
        return 0
    if args.list:
        sps = table.savepoints()
        if not sps:
            print("(no savepoints)")
        for sp in sps:
            n = sum(len(v) for v in sp["files"].values())
            print(f"{sp['savepointedInstant']} (completed {sp['savepointedCompletionTime']})  savepoint "
                  f"{sp['instant']} by {sp['savepointedBy']}: {n} file(s)  {sp['comments'] or ''}".rstrip())
        return 0
    done = table.savepoint(args.instant, comment=args.comment or "")
    meta = table.instant_metadata(done)
    print(f"savepoint {done.begin_time} pins instant {meta['savepointedInstant']}")
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    table = _table(args.path)
    done = table.restore(args.instant)
    meta = table.instant_metadata(done)
    rolled = meta.get("instantsToRollback") or []
    print(f"restored to {args.instant}: {len(rolled)} instant(s) rolled back ({done})")
    return 0


def cmd_archive(args: argparse.Namespace) -> int:
    table = _table(args.path)
    done = table.archive(keep=args.keep)
    if not done:
        print("nothing to archive")
    else:
        print(f"archived {len(done)} instant(s): {done[0].begin_time} … {done[-1].begin_time}")
    return 0


def show_plan(args: argparse.Namespace) -> int:
    """`lsm-lab show plan PATH`: the pending compaction plan (else the latest completed one)."""
    from lsm_lab.filegroup.planner import format_plan  # start-up: on first use

    table = _table(args.path)
    plans = table.compaction_plans()
    if not plans:
        print("(no compaction plan on the active timeline)")
        return 0
    pending = [p for p in plans if not p[0].is_completed]
    inst, plan = (pending or plans)[-1]
    if args.json:
        print(json.dumps({"instant": inst.begin_time, "action": inst.action, "state": inst.state.value,
                          "plan": plan.to_json()}, indent=2, sort_keys=True))
    else:
        print(format_plan(inst, plan))
    return 0


SHOW: dict[str, Callable[[argparse.Namespace], int]] = {"plan": show_plan}


def _plan_modes(p: argparse.ArgumentParser, plan_file: str, then: str) -> None:
    """`--dry-run` (print the plan, save nothing) or `--plan-only` (save it as `plan_file`, run nothing)."""
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the plan and save nothing")
    mode.add_argument("--plan-only", action="store_true", help=f"save the plan ({plan_file}) without running it: {then}")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("compact", help="plan and run a compaction (hybrid, full or log)",
                       description="Compact the table at PATH: finish pending plans, then plan and run a new one. "
                                   "hybrid picks FULL (logs + base → new base) or LOG (logs → one log) per file "
                                   "group; full and log force one kind.")
    p.add_argument("path", help=TABLE_HELP)
    _plan_modes(p, "<t>.compaction.requested", "the next `compact` (or `spark compact`) runs it, and its file "
                                               "groups take no other compaction meanwhile")
    p.add_argument("--strategy", choices=["hybrid", "full", "log"], default="hybrid",
                   help="hybrid (default), full or log")
    p.add_argument("--merge", choices=ENGINES,
                   help="force a merge engine (default: sorted for lsm_tree, hash otherwise)")
    p.add_argument("--option", action="append", metavar="KEY=VALUE",
                   help="planner threshold override, e.g. hoodie.compaction.hybrid.log.file.num.threshold=3")
    p.set_defaults(func=cmd_compact)

    p = sub.add_parser("cluster", help="rewrite small file groups as fewer key-sorted ones (replacecommit)",
                       description="Cluster the table at PATH: finish pending clustering plans, then plan and run "
                                   "a new one. Small file groups of a partition are merged (all slices, deletes "
                                   "applied) into key-sorted file groups with disjoint key ranges; with the bucket "
                                   "index each bucket is merged on its own. Committed as a replacecommit.")
    p.add_argument("path", help=TABLE_HELP)
    _plan_modes(p, "<t>.clustering.requested", "the next `cluster` runs it, and its file groups take no "
                                               "compaction or other clustering meanwhile")
    p.add_argument("--merge", choices=ENGINES,
                   help="force a merge engine (default: sorted for sorted inputs, hash otherwise)")
    p.add_argument("--option", action="append", metavar="KEY=VALUE",
                   help="plan limit override, e.g. hoodie.clustering.plan.strategy.small.file.limit=1048576")
    p.set_defaults(func=cmd_cluster)

    p = sub.add_parser("rollback", help="roll back failed writes, or one instant",
                       description="Without --instant: roll back every pending write whose process is dead. "
                                   "With --instant: roll back that instant (pending and dead, or the latest "
                                   "completed write: a commit, a deltacommit, or a replacecommit — an overwrite or "
                                   "a clustering, whose replaced file groups are live again).")
    p.add_argument("path", help=TABLE_HELP)
    p.add_argument("--instant", help="begin time of the instant to roll back")
    p.set_defaults(func=cmd_rollback)

    p = sub.add_parser("clean", help="delete data files no retained snapshot needs",
                       description="Clean the table at PATH with a retention policy (default from "
                                   "hoodie.properties: KEEP_LATEST_COMMITS, 10 commits).")
    p.add_argument("path", help=TABLE_HELP)
    p.add_argument("--policy", choices=["KEEP_LATEST_COMMITS", "KEEP_LATEST_FILE_VERSIONS"],
                   help="retention policy")
    p.add_argument("--retained", type=int, help="commits (or file versions) to retain")
    p.set_defaults(func=cmd_clean)

    p = sub.add_parser("savepoint", help="savepoint a write (files kept, restore possible); list or delete",
                       description="Savepoint the latest (or the given) completed write of the table at PATH.")
    p.add_argument("path", help=TABLE_HELP)
    p.add_argument("--instant", help="begin time of the write to savepoint (default: the latest)")
    p.add_argument("--comment", help="a comment stored with the savepoint")
    p.add_argument("--list", action="store_true", help="list the savepoints")
    p.add_argument("--delete", metavar="INSTANT", help="delete the savepoint of INSTANT")
    p.set_defaults(func=cmd_savepoint)

    p = sub.add_parser("restore", help="restore the table to a savepoint",
                       description="Roll back every instant after the savepointed INSTANT (a restore instant "
                                   "records what was undone).")
    p.add_argument("path", help=TABLE_HELP)
    p.add_argument("instant", help="the savepointed instant (or the savepoint's own instant)")
    p.set_defaults(func=cmd_restore)

    p = sub.add_parser("archive", help="move old completed instants into the LSM timeline",
                       description="Archive completed instants of the table at PATH into "
                                   ".hoodie/timeline/history/ (keeps hoodie.keep.min.commits active by default).")
    p.add_argument("path", help=TABLE_HELP)
    p.add_argument("--keep", type=int, help="completed instants to keep on the active timeline")
    p.set_defaults(func=cmd_archive)
