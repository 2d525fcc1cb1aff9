"""Benchmarks (not tests): each ``bench/<name>.py`` has a ``main()`` that prints its figures.

``python -m bench`` runs every benchmark listed in ``bench.__main__.BENCHMARKS``, in turn;
``python -m bench.<name>`` runs one. Figures vary run to run on a shared machine: compare within
one run, and prefer ratios. Results and how to read them: ``docs/benchmarks.md``.
"""
