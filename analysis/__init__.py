"""Measurement: statistics, signal-task selection, judge audit, gain retention and the HTML report.

Formulas follow docs/methods.md; `analysis.stats` is the public entry point for notebooks.
"""
