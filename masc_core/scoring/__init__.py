"""The metric run with the encoder: ``batch`` (score_images, the batch API in its steps), several subjects in each
output (``subject_scoring``) and how much a score hangs on its masks (``mask_bands``).

Nothing is imported here: each module is imported by name.
"""
