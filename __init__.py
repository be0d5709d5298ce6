"""MaSC for ComfyUI: ComfyUI loads this file as the node pack's entry point.

ComfyUI imports the pack as a package named after its folder, and has a
top-level module called ``nodes`` of its own: everything here is imported
relatively. The nodes reach ComfyUI on core's V3 schema: ``comfy_entrypoint``
returns them as ``io.ComfyNode`` classes (``nodes/host/schema.py``). This module
exports no ``NODE_CLASS_MAPPINGS``: core would then load the pack the V1 way and
never call the entry point. The node classes themselves (what the unit tests
run) are ``nodes.NODE_CLASS_MAPPINGS``.
"""

# Shows each scoring node's per-image scores as text on the node, and MaSC Pick's dialog.
WEB_DIRECTORY = "./web"

if not __package__:
    # This file imported on its own, not as a package: pytest does that to a clone whose folder name is no Python
    # identifier (README's "masc-comfyui"). There is nothing to register then; ComfyUI always imports a package.
    __all__ = ["WEB_DIRECTORY"]
else:
    from .nodes import NODE_CLASS_MAPPINGS as _NODE_CLASSES
    from .nodes import NODE_DISPLAY_NAME_MAPPINGS as _DISPLAY_NAMES
    from .nodes.host import IN_COMFYUI, copy_example_inputs, quiet_console, register_model_folders, register_pick_route
    from .nodes.host import schema as _schema

    register_model_folders()
    # An expected refusal is one line on the console (ComfyUI logs a traceback for every node error).
    quiet_console()
    # MaSC Pick's routes (the browser's answers and announcements), once per process, on this copy's board.
    register_pick_route()
    # The example workflows' inputs (masc_example_*), into ComfyUI/input (never over a user's file).
    copy_example_inputs()

    if _schema.available():

        async def comfy_entrypoint():
            """Core's V3 entry point: every MaSC node as an ``io.ComfyNode``."""
            return _schema.extension(_NODE_CLASSES, _DISPLAY_NAMES)

        __all__ = ["WEB_DIRECTORY", "comfy_entrypoint"]
    else:
        if IN_COMFYUI:  # a core older than the pack supports: one line, no nodes (never a failed import)
            _schema.explain_missing_api()
        __all__ = ["WEB_DIRECTORY"]
