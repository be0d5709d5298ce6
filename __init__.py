"""MaSC for ComfyUI: ComfyUI loads this file as the node pack's entry point.

ComfyUI imports the pack as a package named after its folder, and has a
top-level module called ``nodes`` of its own: everything here is imported
relatively.
"""

from .nodes import NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS
from .nodes.host import copy_example_inputs, quiet_console, register_model_folders, register_pick_route

register_model_folders()
# An expected refusal is one line on the console (ComfyUI logs a traceback for every node error).
quiet_console()
# MaSC Pick's routes (the browser's answers and announcements), once per process, on this copy's board.
register_pick_route()
# The example workflows' inputs (masc_example_*), into ComfyUI/input (never over a user's file).
copy_example_inputs()

# Shows each scoring node's per-image scores as text on the node, and MaSC Pick's dialog.
WEB_DIRECTORY = "./web"

__all__ = ["NODE_CLASS_MAPPINGS", "NODE_DISPLAY_NAME_MAPPINGS", "WEB_DIRECTORY"]
