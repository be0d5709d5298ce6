"""Benchmarks of the MaSC engine and node pack, runnable by anyone from a checkout: ``python -m benchmarks --help``.

Not part of the installed package (``masc_core``) nor of the node pack: they
build random-weight checkpoints of the real architectures (real compute
cost, meaningless scores) and time the public APIs. The paper's package
(masc-metric) is imported only by the comparison that asks for it.
"""
