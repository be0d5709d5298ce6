"""Scores that travel with saved images: each scoring or selecting node's ``masc`` entry in ``extra_pnginfo``.

ComfyUI gives the nodes that declare the hidden inputs below the prompt's
``extra_pnginfo`` dict (which core Save Image writes into every PNG) and
their own node id. Each MaSC node puts its entry under its id
(``masc_core.metric.saved_scores``), so several MaSC nodes in one graph keep
separate entries. The front end always sends ``extra_pnginfo``; an API
client must send ``extra_data: {"extra_pnginfo": {}}`` or nothing is saved.
"""

from __future__ import annotations

import os
import weakref

import torch

from ..masc_core.models.checkpoints import folder_digest
from ..masc_core.metric.saved_scores import add_node_entry, node_entry, pixel_digest
from ..masc_core.metric.scores import ScoreBatch, ScoreContext

HIDDEN_INPUTS = {"extra_pnginfo": "EXTRA_PNGINFO", "unique_id": "UNIQUE_ID"}
"""What a node declares under "hidden" to receive the prompt's PNG metadata and its own id."""


WEIGHT_SAMPLE_BYTES = 64 * 1024
"""Bytes read from the start, middle and end of each weight file for the encoder's digest (never the whole file)."""


_IDENTITIES: "weakref.WeakKeyDictionary[object, dict[str, str]]" = weakref.WeakKeyDictionary()


def encoder_identity(encoder) -> dict[str, str]:
    """The encoder's folder name (as the loader named it) and a short hash of the folder and samples of its weights.

    Worked out once per loaded encoder (its files are read), not at every run of every node that saves scores.
    """
    identity = _IDENTITIES.get(encoder)
    if identity is None:
        folder = encoder.core.info.folder
        digest = folder_digest(folder, sample_bytes=WEIGHT_SAMPLE_BYTES)[:12]
        identity = _IDENTITIES[encoder] = {
            "model": encoder.name or os.path.basename(os.path.normpath(folder)),
            "digest": digest,
        }
    return dict(identity)


def image_digests(images) -> list[str]:
    """Each image's hash as core Save Image will quantize and write it (an IMAGE batch, or RGB uint8 arrays)."""
    digests = []
    for image in images:
        if isinstance(image, torch.Tensor):
            pixels = image.detach().cpu()
            image = (pixels.float() if pixels.dtype == torch.bfloat16 else pixels).numpy()
        digests.append(pixel_digest(image))
    return digests


def scoring_context(node: str, encoder, subject: str | None) -> ScoreContext:
    """The context a scoring node's batch carries on to Select Best, Gate and the log."""
    return ScoreContext(node=node, subject=subject, encoder=encoder_identity(encoder))


def record(extra_pnginfo, unique_id, batch: ScoreBatch, node: str, *, verdicts=None, outputs=None, pixels=None) -> bool:
    """Add this node's entry to the prompt's PNG metadata; False when ComfyUI gave none."""
    if not isinstance(extra_pnginfo, dict):
        return False
    return add_node_entry(
        extra_pnginfo, unique_id, node_entry(batch, node=node, verdicts=verdicts, outputs=outputs, pixels=pixels)
    )
