"""Acting on scores: ranking and the pass rules, the sample-until loop, pruning and its one round path, the artist's
picks, the contact sheet.

Nothing is imported here: each module is imported by name, so importing one loads no model code.
"""
