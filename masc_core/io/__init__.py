"""Files in, one module each:

- ``files``: strict JSON (bounded nesting), atomic writes, regular files only (``check_regular_file``);
- ``images``: images of any type users hold to RGB uint8 arrays, thumbnails, the pixel limit;
- ``png_text``: PNG text chunks found and read without decoding the pixels;
- ``video``: a clip's frames from a folder of frame images or a video file, counted and sized as decoded.

Nothing is imported here: each module is imported by name.
"""
