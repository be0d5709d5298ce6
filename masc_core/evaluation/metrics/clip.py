"""CLIP-I and CLIP-T (the DreamBench protocol, Ruiz et al.), from any CLIP checkpoint folder.

- ``clip_i``: cosine of the CLIP image embeddings (projected) of output and
  reference; mean over reference views.
- ``clip_t``: cosine of the output's CLIP image embedding with the CLIP text
  embedding of the prompt as given (not stripped).
"""

from __future__ import annotations

from ...metric.equations import prompt_following, mean_cosine_to_references
from ...models.embedders import ClipEmbedder, inspect_folder
from .base import ChunkInputs, Column, GroupInputs, Metric, MetricSpec, Models, RowValues


class ClipMetrics(Metric):
    def __init__(self, models: Models, folder: str | None):
        self.embedder = ClipEmbedder.load(
            folder, device=models.device, dtype=models.dtype, batch_size=models.batch_size
        )

    def start_group(self, group: GroupInputs) -> None:
        self.references = self.embedder.images(group.refs)

    def encode(self, chunk: ChunkInputs) -> None:
        self.outputs = self.embedder.images(chunk.outs)
        self.texts = self.embedder.texts(chunk.prompts)

    def score(self, chunk: ChunkInputs) -> list[RowValues]:
        clip_i = mean_cosine_to_references(self.outputs, self.references)
        clip_t = prompt_following(self.outputs, self.texts).tolist()
        return [RowValues({"clip_i": clip_i[i], "clip_t": clip_t[i]}) for i in range(len(clip_i))]

    def forwards(self) -> dict[str, int]:
        return {"clip_images": self.embedder.forwards, "clip_texts": self.embedder.text_forwards}


SPEC = MetricSpec(
    key="clip",
    columns=(Column("clip_i", "cp"), Column("clip_t", "pf")),
    description="CLIP checkpoint folder: adds CLIP-I and CLIP-T",
    load=ClipMetrics,
    folder_option="--clip",
    check_folder=lambda folder: inspect_folder(folder, "--clip", ("clip",)),
)
