"""Table services: the lock, rollback (and, later, compaction, cleaning, archiving)."""
