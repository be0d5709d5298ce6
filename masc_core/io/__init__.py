"""Files in and out: images, JSON and text files, PNG text chunks, the scores saved in PNGs, text made safe to print.

Nothing is imported here: each module is imported by name, so importing a pure one loads no model code.
"""
