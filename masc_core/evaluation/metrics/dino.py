"""DINO-I (the DreamBench protocol), from any ViT, DINOv2 or DINOv3 checkpoint folder.

``dino_i``: cosine of the DINO embeddings (the CLS token of the last
layer, after its layer norm) of output and reference; mean over views.
"""

from __future__ import annotations

from ...metric.equations import mean_cosine_to_references
from ...models.embedders import DINO_MODEL_TYPES, DinoEmbedder, inspect_folder
from .base import ChunkInputs, Column, GroupInputs, Metric, MetricSpec, Models, RowValues


class DinoMetric(Metric):
    def __init__(self, models: Models, folder: str | None):
        self.embedder = DinoEmbedder.load(
            folder, device=models.device, dtype=models.dtype, batch_size=models.batch_size
        )

    def start_group(self, group: GroupInputs) -> None:
        self.references = self.embedder.images(group.refs)

    def encode(self, chunk: ChunkInputs) -> None:
        self.outputs = self.embedder.images(chunk.outs)

    def score(self, chunk: ChunkInputs) -> list[RowValues]:
        return [RowValues({"dino_i": value}) for value in mean_cosine_to_references(self.outputs, self.references)]

    def forwards(self) -> dict[str, int]:
        return {"dino_images": self.embedder.forwards}


SPEC = MetricSpec(
    key="dino",
    columns=(Column("dino_i", "cp"),),
    description="DINO (ViT/DINOv2) checkpoint folder: adds DINO-I",
    load=DinoMetric,
    folder_option="--dino",
    check_folder=lambda folder: inspect_folder(folder, "--dino", tuple(DINO_MODEL_TYPES)),
)
