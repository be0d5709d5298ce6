"""What a score is and how it is computed: the equations, masks, stripping, the batch API (``batch``), several
subjects, mask bands, heatmaps and captions.

Nothing is imported here: each module is imported by name, so importing a pure one loads no model code.
"""
