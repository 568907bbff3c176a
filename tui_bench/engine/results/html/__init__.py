"""The HTML report's rooms: ``page`` (what a page shows, gathered), ``markup`` (escaping and a
computed table as HTML), ``shared`` (the machine, each run, trends and figures: on every page),
``compare`` (compare's question, verdict and the table registry's sections), ``regress`` (the
gate's page), ``style`` (the CSS). ``results/html_report.py`` puts them together."""

from __future__ import annotations
