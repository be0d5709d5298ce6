"""MaSC Contact Sheet: every candidate in one captioned picture, for the artist's review.

It converts ComfyUI's types and calls ``masc_core.contact_sheet``; the layout, order and captions live there.
"""

from __future__ import annotations

from ..masc_core.contact_sheet import MAX_TILE, MIN_TILE, ORDERS, contact_sheet, tiles_from
from ..masc_core.errors import MascInputError
from ..masc_core.ranking import RANK_KEYS
from ..masc_core.scores import ScoreBatch
from .convert import comfy_images, to_comfy_image_batch
from .inputs import checked_inputs
from .types import CATEGORY, MASC_SCORES, Output, declare_outputs


@checked_inputs
class MaSCContactSheet:
    """Node: MaSC Contact Sheet."""

    SEARCH_ALIASES = ["contact sheet", "grid", "review", "compare candidates", "image grid"]
    """Words the node library's search finds it by (ComfyUI 0.33 and later; older versions ignore it)."""

    DESCRIPTION = (
        "Every candidate side by side in one picture: each tile captioned with its number, seed, CP, PF, mask share "
        "and verdict, the kept ones framed in green, in rank or seed order. Feed it MaSC Sample Until's 'candidates' "
        "and 'scores' (or any images with their MaSC scores); save it with Save Image."
    )
    CATEGORY = CATEGORY
    FUNCTION = "sheet"
    RETURN_TYPES, RETURN_NAMES, OUTPUT_TOOLTIPS = declare_outputs(
        Output("IMAGE", "sheet", "One picture holding every candidate's tile."),
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "images": ("IMAGE", {"tooltip": "The candidates, in the order they were scored (MaSC Sample Until's 'candidates')."}),
                "scores": (MASC_SCORES, {"tooltip": "Their scores (MaSC Sample Until's or a MaSC scoring node's 'scores')."}),
                "order": (list(ORDERS), {"default": "rank", "tooltip": "rank: kept first, then best score; seed: by seed; index: as scored."}),
                "rank_by": (list(RANK_KEYS), {"default": "cp", "tooltip": "What rank order sorts by after the kept ones: cp, pf, or both (CP + PF)."}),
                "tile_size": ("INT", {"default": 256, "min": MIN_TILE, "max": MAX_TILE, "step": 8, "tooltip": "Width of each tile in pixels."}),
                "columns": ("INT", {"default": 0, "min": 0, "max": 64, "tooltip": "Tiles per row; 0 = about square."}),
            }
        }

    def sheet(self, images, scores, order, rank_by, tile_size, columns):
        if not isinstance(scores, ScoreBatch):
            raise MascInputError("scores is not a MaSC scores object: connect the 'scores' output of a MaSC node")
        arrays = comfy_images(images, "images")
        if len(arrays) != len(scores.scores):
            raise MascInputError(
                f"images has {len(arrays)} pictures but scores has {len(scores.scores)}: connect the images those scores were "
                "made for (MaSC Sample Until: 'candidates' with 'scores')"
            )
        sheet = contact_sheet(arrays, tiles_from(scores, by=rank_by), tile=int(tile_size), columns=int(columns), order=order)
        return (to_comfy_image_batch([sheet]),)
