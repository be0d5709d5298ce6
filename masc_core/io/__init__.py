"""Files in: images (any type users hold, to RGB arrays), strict JSON and atomic writes, PNG text chunks.

Nothing is imported here: each module is imported by name.
"""
