"""Fixtures and the outcome summary of the fuzz suite (the machinery lives in fuzzkit.py)."""

from fuzzkit import _report_outcomes, fresh, pytest_runtest_logreport, pytest_terminal_summary, templates

__all__ = ["_report_outcomes", "fresh", "pytest_runtest_logreport", "pytest_terminal_summary", "templates"]
