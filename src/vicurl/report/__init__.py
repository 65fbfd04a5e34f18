"""Reporting: aggregate per-seed scores, render LaTeX tables and learning-curve figures.

``aggregate.collect``       score dicts (one per run x step x benchmark) -> long per-seed table
``aggregate.across_seeds``  per-seed table -> mean / std / n_seeds per cell, plus the "average" column
``latex.render_table``      aggregated cells -> a table in the paper's style
``figures.learning_curves`` per-seed table -> Pass@k vs training step, one panel per benchmark
"""
