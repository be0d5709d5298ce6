"""MaSC for ComfyUI: ComfyUI loads this file as the node pack's entry point."""

NODE_CLASS_MAPPINGS = {}
NODE_DISPLAY_NAME_MAPPINGS = {}
