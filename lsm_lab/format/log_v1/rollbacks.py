"""v1 rollbacks: which blocks of a file slice's v1 logs still count.

Hudi never rewrites a log file to undo a failed or rolled-back commit: it
appends a *command block* (type 0, COMMAND_BLOCK_TYPE "0") whose
TARGET_INSTANT_TIME names the instant to forget, usually in a later log file
of the slice than the blocks it cancels:

    .f_t1.log.1   [data @t1] [data @t2] [delete @t2]
    .f_t1.log.2   [rollback → t2]
    effective:    [data @t1]

`effective_blocks` replays that: it walks all blocks of the slice in file
then block order, drops CORRUPT blocks (torn writes, blocks.py) and, at each
rollback, every block read so far with the target instant.

Simplified compared with Apache Hudi: Hudi's de-duplication of blocks from
retried Spark tasks (the BLOCK_IDENTIFIER header) and instant-range filtering
against the timeline are left to the table layer (filegroup/v1read.py).

Taught in: notebooks/09_real_hudi_tables.ipynb
"""

from __future__ import annotations

from collections.abc import Iterable

from lsm_lab.errors import UnsupportedFeatureError
from lsm_lab.format.log_v1.blocks import BlockType, LogBlock


def effective_blocks(blocks: Iterable[LogBlock]) -> list[LogBlock]:
    """The data and delete blocks that count, in order, after applying rollbacks.

    Pass the blocks of *all* log files of a file slice, in file then block order: a
    rollback usually sits in a later log file than the blocks it cancels. As in
    Hudi's log record reader, a rollback command removes every block read *before*
    it whose INSTANT_TIME equals the command's TARGET_INSTANT_TIME (a retried task
    may have written several); a rollback that matches nothing is ignored. CORRUPT
    blocks are dropped, command blocks consumed. Unknown commands raise
    `UnsupportedFeatureError`.
    """
    kept: list[LogBlock] = []
    for block in blocks:
        if block.block_type == BlockType.CORRUPT:
            continue
        if block.block_type == BlockType.COMMAND:
            if not block.is_rollback:
                raise UnsupportedFeatureError(
                    f"command block type {block.header.get('COMMAND_BLOCK_TYPE')!r} at offset {block.offset}"
                )
            target = block.target_instant_time
            kept = [b for b in kept if b.instant_time != target]
            continue
        kept.append(block)
    return kept


__all__ = ["effective_blocks"]
