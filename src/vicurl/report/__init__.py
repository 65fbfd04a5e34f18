"""Reporting: per-seed scores -> the paper's tables and figures, and the comparison with the paper.

Tables (one idea per module):
``aggregate``    score files -> per-seed table; mean / std across seeds (the Average column rule)
``tableconfig``  the config's ``tables:`` section -> resolved, explicit table definitions
``spec``         what a table shows, apart from where its numbers come from (``TableSpec``)
``layouts``      a table definition -> ``spec.TableSpec`` (columns, blocks, rows) per table type
``cells``        per-seed scores -> the cells a table shows (means across seeds, mechanism metrics)
``latex``        spec + cells -> LaTeX in the paper's style (the bold rule, dashes)
``paper``        the paper's reported numbers (config/paper_numbers.csv) as cells
``compare``      ours vs the paper's, cell by cell (CSV and LaTeX)
``texparse``     a paper-style LaTeX table read back (tests, transcription)
``labels``       the paper's names of rewards, curricula and settings

``notes``        the sentences under a table (rows of other seed counts, grading timeouts)

Figures: ``curves`` (learning-curves grid), ``schedule`` (beta_t / tau_t of a run),
``variance`` (variance ratio and absolute variance from the probes), ``plotting`` (shared).

Findings: ``findings`` (one study's claims against its model, the verdicts), ``claimed`` (a claims
file's or a pre-registration's claims across studies), ``probe_stats`` (the probes' statistics behind them).

``jobs``: the figure and findings jobs as functions of paths and settings (their rules call them).
"""
