"""Fixtures and the outcome summary of the fuzz suite (the machinery lives in fuzzkit.py)."""

from fuzzkit import fresh, pytest_terminal_summary, templates

__all__ = ["fresh", "pytest_terminal_summary", "templates"]
