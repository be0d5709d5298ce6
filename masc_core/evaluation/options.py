"""How an evaluation is run: what to score with (``EvalOptions``), where (``EngineOptions``), and the scoring identity.

Shared by the engines (the single process in ``run``, Ray in ``ray_engine``)
and by ``batch_scorer``, so none of them imports another.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import MascInputError
from ..models import checkpoints, siglip_checkpoint
from ..models.devices import resolve_device, resolve_dtype
from ..models.preprocess import PreprocessSpec
from . import metrics
from .summary import SummaryOptions

DEFAULT_CHUNK_SIZE = 32
ENGINES = ("single", "ray")
"""``single``: this process, chunk after chunk (``run``); ``ray``: actors on a Ray cluster (``ray_engine``)."""


@dataclass(frozen=True)
class EvalOptions:
    """How to score a manifest (model, baselines, batching) and summarize it."""

    model: str
    device: str = "auto"
    precision: str = "fp32"
    max_patches: int | None = None
    batch_size: int = 8
    chunk_size: int = DEFAULT_CHUNK_SIZE
    baselines: tuple[str, ...] = ()
    """Registered metrics to add to MaSC's, in this order (``metrics.REGISTRY`` keys: "global", "clip", ...)."""
    folders: dict[str, str] = field(default_factory=dict, hash=False)
    """Checkpoint folder of each baseline that takes one (e.g. {"clip": DIR})."""
    summary: SummaryOptions = field(default_factory=SummaryOptions)
    shard: tuple[int, int] | None = None
    fresh: bool = False
    """Ignore (delete) earlier results in the output folder."""

    @property
    def metric_names(self) -> list[str]:
        # cp_mean and blend exist for several-subject rows only: results add them when rows have them
        # (``metrics_present``), so a single-subject run's identity and files are what they always were.
        names = [c.name for c in metrics.MASC_COLUMNS if c.aspect in metrics.ASPECTS]
        for key in self.baselines:
            names += [c.name for c in metrics.get_spec(key).columns]
        return names


@dataclass(frozen=True)
class EngineOptions:
    """Where the chunks are scored: this process, or a Ray cluster (``--engine ray``)."""

    name: str = "single"
    address: str | None = None
    """Ray: the cluster to join (``HOST:PORT`` of ``ray start --head``, or ``auto``); None starts a local one."""
    workers: int | None = None
    """Ray: actors, each with the models loaded once (default: one per GPU with GPUs, else one per CPU)."""
    gpus_per_worker: float = 0.0
    """Ray: GPUs each actor asks for (0: the actors run on CPU)."""

    def scoring_device(self):
        """Where the workers score, when it is not this process (None: here, ``--device`` as given)."""
        if self.name != "ray":
            return None
        import torch

        return torch.device("cuda" if self.gpus_per_worker else "cpu")

    def check(self, precision: str = "fp32") -> None:
        """One line for options that do not fit together, before anything starts."""
        if self.name not in ENGINES:
            raise MascInputError(f"--engine '{self.name}' is not one of {', '.join(ENGINES)}")
        if self.name != "ray":
            given = [
                flag
                for flag, value in (
                    ("--address", self.address),
                    ("--workers", self.workers),
                    ("--gpus-per-worker", self.gpus_per_worker or None),
                )
                if value is not None
            ]
            if given:
                raise MascInputError(f"{given[0]} is an option of --engine ray: add --engine ray, or leave it out")
        if self.workers is not None and self.workers < 1:
            raise MascInputError(f"--workers is {self.workers}: give at least 1")
        if self.gpus_per_worker < 0:
            raise MascInputError(f"--gpus-per-worker is {self.gpus_per_worker:g}: give 0 (CPU) or more")
        if self.gpus_per_worker and precision == "auto":
            # 'auto' depends on the GPU model, which this process may not have: it must name the bits.
            raise MascInputError(
                "--precision auto with --gpus-per-worker: the GPUs are the workers', give fp32, bf16 or fp16"
            )


def scoring_identity(options: EvalOptions, device=None) -> dict:
    """Everything the scores depend on besides the rows, checked without loading any weights.

    ``device``: where the scoring runs when that is not this process (a Ray engine's workers): the
    precision is resolved for it, and ``options.device`` is then not checked here.
    """
    specs = [metrics.get_spec(key) for key in options.baselines]
    for spec in specs:
        if spec.folder_option and not options.folders.get(spec.key):
            raise MascInputError(f"{spec.folder_option} needs a checkpoint folder: pass {spec.folder_option} DIR")
    if options.chunk_size < 1:
        raise MascInputError(f"--chunk-size is {options.chunk_size}: give at least 1 row")
    folder, source = checkpoints.resolve(options.model)
    info = siglip_checkpoint.inspect(folder, source)
    spec = PreprocessSpec.from_configs(
        naflex=info.naflex,
        vision_config=info.vision_config,
        preprocessor_config=info.preprocessor_config,
        max_num_patches=options.max_patches,
    )
    dtype = resolve_dtype(options.precision, device if device is not None else resolve_device(options.device))
    identity = {
        "model": checkpoints.folder_digest(folder),
        "kind": "naflex" if spec.naflex else "fixed",
        "max_num_patches": spec.max_num_patches if spec.naflex else None,
        "precision": str(dtype).replace("torch.", ""),
        "metrics": options.metric_names,
        "chunk_size": options.chunk_size,
    }
    for metric in specs:
        if metric.folder_option:
            metric.check_folder(options.folders[metric.key])
            identity[metric.key] = checkpoints.folder_digest(options.folders[metric.key])
    return identity
