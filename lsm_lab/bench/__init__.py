"""Benchmarks that print ratios against peers measured in the same run (see each module)."""
