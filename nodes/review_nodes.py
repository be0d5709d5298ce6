"""The artist's review: MaSC Contact Sheet (every candidate in one captioned picture) and MaSC Pick (the artist
chooses).

They convert ComfyUI's types and call ``masc_core.selection.contact_sheet`` (layout, order, captions) and
``masc_core.selection.picks``
(the waiting, the checks on an answer, the labels); the browser's side is ``web/masc_pick.js``, its route ``host``.
"""

from __future__ import annotations

from dataclasses import replace

from ..masc_core.selection.contact_sheet import MAX_TILE, MIN_TILE, ORDERS, contact_sheet, tiles_from
from ..masc_core.errors import MascInputError
from ..masc_core.selection.picks import (
    NO_BROWSER,
    SHOWN,
    TIMED_OUT,
    PickOutcome,
    check_counts,
    pick_labels,
    timeout_seconds,
)
from ..masc_core.selection.ranking import RANK_KEYS, PassRules
from . import host
from ..masc_core.io.images import to_rgb_uint8_list
from .convert import to_comfy_image_batch
from .metadata import HIDDEN_INPUTS, image_digests, record
from .declarations import (
    CARRIED_INPUTS,
    carried_outputs,
    CP_WEIGHT_INPUT,
    int_input,
    MaSCNode,
    PF_WEIGHT_INPUT,
    rank_by_input,
    RULES_INPUT,
    SCORED_BATCH_INPUTS,
)
from .selection_nodes import check_batch, chosen_outputs, passing_from
from .types import MASC_SCORES, Output


class MaSCContactSheet(MaSCNode):
    """Every candidate side by side in one picture: each tile captioned with its number, seed, CP, PF, mask share and
    verdict, the kept ones framed in green, in rank or seed order. Feed it MaSC Sample Until's 'candidates' and 'scores'
    (or any images with their MaSC scores); save it with Save Image."""

    SEARCH_ALIASES = ["contact sheet", "grid", "review", "compare candidates", "image grid"]
    FUNCTION = "sheet"
    OUTPUTS = (Output("IMAGE", "sheet", "One picture holding every candidate's tile."),)

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "images": (
                    "IMAGE",
                    {"tooltip": "The candidates, in the order they were scored (MaSC Sample Until's 'candidates')."},
                ),
                "scores": (
                    MASC_SCORES,
                    {"tooltip": "Their scores (MaSC Sample Until's or a MaSC scoring node's 'scores')."},
                ),
                "order": (
                    list(ORDERS),
                    {
                        "default": "rank",
                        "tooltip": "rank: kept first, then best score; seed: by seed; index: as scored.",
                    },
                ),
                "rank_by": (
                    list(RANK_KEYS),
                    {
                        "default": "cp",
                        "tooltip": "What rank order sorts by after the kept ones: cp, pf, or both (CP + PF).",
                    },
                ),
                "tile_size": int_input(256, MIN_TILE, MAX_TILE, "Width of each tile in pixels.", step=8),
                "columns": int_input(0, 0, 64, "Tiles per row; 0 = about square."),
            }
        }

    def sheet(self, images, scores, order, rank_by, tile_size, columns):
        arrays = to_rgb_uint8_list(images, "images")
        if len(arrays) != len(scores.scores):
            raise MascInputError(
                f"images has {len(arrays)} pictures but scores has {len(scores.scores)}: connect the images those "
                "scores were "
                "made for (MaSC Sample Until: 'candidates' with 'scores')"
            )
        sheet = contact_sheet(
            arrays, tiles_from(scores, by=rank_by), tile=int(tile_size), columns=int(columns), order=order
        )
        return (to_comfy_image_batch([sheet]),)


class MaSCPick(MaSCNode):
    """Shows the best candidates in the browser with their scores and waits for you to pick one or several; passes the
    picked images, latents and masks on as Select Best does. After 'timeout' seconds (at once over the API) it keeps the
    first 'keep' in score order. Logged picks feed 'python -m masc_core calibrate'."""

    SEARCH_ALIASES = ["pick", "choose", "image chooser", "human in the loop", "review", "select by hand", "label"]
    FUNCTION = "pick"
    OUTPUTS = (
        *carried_outputs("The picked images", "in score order"),
        Output(
            MASC_SCORES,
            "scores",
            "Every candidate's scores with your labels (picked / passed over): connect MaSC Log Scores.",
        ),
        Output("STRING", "indices", "Batch indices of the picked images, comma-separated."),
        Output("STRING", "report", "What was shown, what was picked, and how (your pick, the timeout, or no browser)."),
    )

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                **SCORED_BATCH_INPUTS,
                "show": int_input(
                    4,
                    SHOWN.low,
                    SHOWN.high,
                    f"How many candidates to show, best first (at most the batch, at most {SHOWN.high}).",
                ),
                "keep": int_input(
                    1, SHOWN.low, SHOWN.high, "How many the default keeps (the first in score order) when nobody picks."
                ),
                "rank_by": rank_by_input("both", "The score order: cp, pf, or both = cp_weight*CP + pf_weight*PF."),
                "cp_weight": CP_WEIGHT_INPUT,
                "pf_weight": PF_WEIGHT_INPUT,
                "timeout": int_input(
                    300,
                    0,
                    86400,
                    "Seconds to wait for your pick before keeping the default; the queue waits "
                    "meanwhile. 0 = never ask.",
                ),
            },
            "optional": {
                **CARRIED_INPUTS,
                "heatmaps": (
                    "IMAGE",
                    {
                        "tooltip": "Optional: one heatmap per image (e.g. MaSC Score's presence heatmaps), shown on "
                        "demand in the dialog."
                    },
                ),
                "rules": (
                    RULES_INPUT[0],
                    dict(
                        RULES_INPUT[1],
                        tooltip="Optional: the score order from MaSC Rules (its rank_by and weights) in place of this "
                        "node's.",
                    ),
                ),
            },
            "hidden": dict(HIDDEN_INPUTS),
        }

    @classmethod
    def IS_CHANGED(cls, **_):
        # A pick is a person's act: never served from ComfyUI's cache, so re-queueing asks again.
        return float("nan")

    def pick(self, **inputs):
        images, unique_id = inputs["images"], inputs.get("unique_id")
        scores = check_batch(inputs["scores"], images)
        count = images.shape[0]
        show, keep, seconds = int(inputs["show"]), int(inputs["keep"]), timeout_seconds(inputs["timeout"])
        check_counts(show, keep, count)
        heatmap_arrays, heatmaps = None, inputs.get("heatmaps")
        if heatmaps is not None:
            heatmap_arrays = to_rgb_uint8_list(heatmaps, "heatmaps")
            if len(heatmap_arrays) != count:
                raise MascInputError(
                    f"heatmaps has {len(heatmap_arrays)} pictures for {count} images: connect one heatmap per scored "
                    "image"
                )
        # Pick orders, it does not judge: of MaSC Rules it takes the ranking key only (a person decides what passes).
        order = passing_from(inputs.get("rules"), PassRules.from_widgets(inputs)).ordering()
        ranking = order.rank(scores.scores)
        shown = ranking.order[:show]
        outcome = self._ask(
            scores=scores,
            images=images,
            shown=shown,
            keep=keep,
            seconds=seconds,
            heatmap_arrays=heatmap_arrays,
            rank_by=order.by,
            unique_id=unique_id,
        )
        chosen = sorted((shown[p] for p in outcome.picks), key=shown.index)
        verdicts = outcome.verdicts(count, shown, chosen)
        labels = pick_labels(shown, count, outcome)
        labelled = replace(scores, context=replace(scores.context, verdicts=verdicts, kept=chosen, labels=labels))
        outputs = [chosen.index(i) if i in chosen else None for i in range(count)]
        record(
            inputs.get("extra_pnginfo"),
            unique_id,
            labelled,
            "MaSCPick",
            verdicts=verdicts,
            outputs=outputs,
            pixels=image_digests(images),
        )
        report = outcome.report(count, shown, chosen, seconds)
        result = chosen_outputs(images, chosen, inputs.get("latent"), inputs.get("mask")) + (
            labelled,
            ", ".join(str(i) for i in chosen),
            report,
        )
        return {"ui": {"text": [report]}, "result": result}

    @staticmethod
    def _ask(scores, images, shown, keep, seconds, heatmap_arrays, rank_by, unique_id) -> PickOutcome:
        """Show ``shown`` in the browser and wait; the default at once when nobody can be asked or timeout is 0.

        Only a page whose script announced it can answer is asked (an API script on the websocket is not).
        """
        default = list(range(keep))
        board = host.pick_board()
        browser = host.pick_browser()
        client = browser.client() if browser is not None else None
        if client is None or board.announcements(client) == 0:
            return PickOutcome(default, NO_BROWSER, 0.0)
        if seconds == 0:
            return PickOutcome(default, TIMED_OUT, 0.0)
        pictures = to_rgb_uint8_list(images[shown], "images")
        tiles = {tile.index: tile for tile in tiles_from(scores, by=rank_by)}
        request = board.open(unique_id, len(shown), default)
        shown_request = {
            "token": request.token,
            "node": request.node_id,
            "timeout": seconds,
            "keep": keep,
            "default": default,
            "images": host.save_previews(pictures, "masc_pick"),
            "heatmaps": host.save_previews([heatmap_arrays[i] for i in shown], "masc_pick_heatmap")
            if heatmap_arrays
            else [],
            "captions": [tiles[i].lines()[:2] for i in shown],
            "indices": list(shown),
        }
        try:
            return board.wait(request, seconds, host.check_interrupt, _Page(board, browser, client, shown_request))
        finally:
            board.close(request)
            browser.send(host.PICK_CLOSED_EVENT, {"token": request.token, "node": request.node_id}, client)


class _Page:
    """The tab a pick is shown on (``picks.Audience``): its socket, its announcements, and the request to (re)send."""

    def __init__(self, board, browser, client: str, request: dict):
        self.board, self.browser, self.client, self.request = board, browser, client, request

    def reachable(self) -> bool:
        return self.browser.connected(self.client)

    def announcements(self) -> int:
        return self.board.announcements(self.client)

    def show(self, seconds_left: float) -> None:
        self.browser.send(host.PICK_EVENT, dict(self.request, timeout=round(seconds_left, 1)), self.client)
