"""The metric's version: saved with every score that leaves the package (PNG metadata, score logs).

Kept in a module of its own (no imports) so the pure modules can name it
without importing the package's ``__init__``, which loads model code.
"""

__version__ = "0.2.0"
