"""Measurement: statistics, signal-task selection, judge audit, gain retention and the HTML report.

Formulas follow METHODS.md; `analysis.stats` is the public entry point for notebooks.
"""
