"""What MaSC is, without a model: its equations, masks, the subject stripper, score records (one subject or several),
heatmaps and captions, the report text and the scores saved in PNGs.

Nothing is imported here: each module is imported by name, so importing one loads no model code.
"""
