"""The MaSC node pack: thin ComfyUI adapters over masc_core."""

from .encoder_node import MaSCLoadEncoder
from .log_nodes import MaSCLogScores
from .mask_nodes import MaSCAutoMask, MaSCLoadAutoMaskModel, MaSCLoadSAM3Model
from .review_nodes import MaSCContactSheet, MaSCPick
from .rules_nodes import MaSCPrune, MaSCRules
from .custom_sampling_node import MaSCSampleUntilCustom
from .sampling_nodes import MaSCSampleUntil
from .scoring_nodes import MaSCConceptPreservation, MaSCPromptFollowing, MaSCScore, MaSCStripSubject
from .selection_nodes import MaSCGate, MaSCSelectBest
from .subject_nodes import MaSCScoreSubjects, MaSCSubject
from .sweep_nodes import MaSCSweep, MaSCSweepCustom, MaSCSweepLoRA, MaSCSweepLoRAModel
from .video_nodes import MaSCScoreVideo, MaSCVideoOptions

NODES = (
    (MaSCLoadEncoder, "Load MaSC Encoder"),
    (MaSCConceptPreservation, "MaSC Concept Preservation"),
    (MaSCPromptFollowing, "MaSC Prompt Following"),
    (MaSCStripSubject, "Strip Subject"),
    (MaSCScore, "MaSC Score"),
    (MaSCSelectBest, "MaSC Select Best"),
    (MaSCGate, "MaSC Gate"),
    (MaSCLoadAutoMaskModel, "Load MaSC Auto Mask Model"),
    (MaSCAutoMask, "MaSC Auto Mask"),
    (MaSCLoadSAM3Model, "Load MaSC SAM3 Model"),
    (MaSCSampleUntil, "MaSC Sample Until"),
    (MaSCSampleUntilCustom, "MaSC Sample Until (Custom)"),
    (MaSCRules, "MaSC Rules"),
    (MaSCPrune, "MaSC Prune"),
    (MaSCLogScores, "MaSC Log Scores"),
    (MaSCSubject, "MaSC Subject"),
    (MaSCScoreSubjects, "MaSC Score Subjects"),
    (MaSCContactSheet, "MaSC Contact Sheet"),
    (MaSCPick, "MaSC Pick"),
    (MaSCScoreVideo, "MaSC Score Video"),
    (MaSCVideoOptions, "MaSC Video Options"),
    (MaSCSweepLoRA, "MaSC Sweep LoRA"),
    (MaSCSweepLoRAModel, "MaSC Sweep LoRA Model"),
    (MaSCSweep, "MaSC Sweep"),
    (MaSCSweepCustom, "MaSC Sweep (Custom)"),
)
"""Every node class with its display name, in the node library's order. A node's id is its class name: a saved
workflow names its nodes by id, so a class is never renamed (``tests/test_nodes.py`` holds the list)."""

NODE_CLASS_MAPPINGS = {node.__name__: node for node, _ in NODES}
NODE_DISPLAY_NAME_MAPPINGS = {node.__name__: name for node, name in NODES}
