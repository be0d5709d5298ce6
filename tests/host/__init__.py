"""Tests against a real ComfyUI (opt-in): MASC_COMFYUI_DIR (a checkout) + MASC_COMFYUI_PYTHON (its interpreter).

Without both variables every test here is skipped with a one-line reason, so
the normal ``python -m pytest -q`` (CI, no ComfyUI) collects and skips them.
See ``conftest.py`` for what a session sets up and ``README`` notes for the
command line.
"""
