"""Acting on scores: ranking and the pass rules, the sample-until loop, pruning, the artist's picks, the contact
sheet and the report text.

Nothing is imported here: each module is imported by name, so importing a pure one loads no model code.
"""
