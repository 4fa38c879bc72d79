"""The table: records in, records out, and what is on disk."""
