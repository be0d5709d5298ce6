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

NODE_CLASS_MAPPINGS = {
    "MaSCLoadEncoder": MaSCLoadEncoder,
    "MaSCConceptPreservation": MaSCConceptPreservation,
    "MaSCPromptFollowing": MaSCPromptFollowing,
    "MaSCStripSubject": MaSCStripSubject,
    "MaSCScore": MaSCScore,
    "MaSCSelectBest": MaSCSelectBest,
    "MaSCGate": MaSCGate,
    "MaSCLoadAutoMaskModel": MaSCLoadAutoMaskModel,
    "MaSCAutoMask": MaSCAutoMask,
    "MaSCLoadSAM3Model": MaSCLoadSAM3Model,
    "MaSCSampleUntil": MaSCSampleUntil,
    "MaSCSampleUntilCustom": MaSCSampleUntilCustom,
    "MaSCRules": MaSCRules,
    "MaSCPrune": MaSCPrune,
    "MaSCLogScores": MaSCLogScores,
    "MaSCSubject": MaSCSubject,
    "MaSCScoreSubjects": MaSCScoreSubjects,
    "MaSCContactSheet": MaSCContactSheet,
    "MaSCPick": MaSCPick,
    "MaSCScoreVideo": MaSCScoreVideo,
    "MaSCVideoOptions": MaSCVideoOptions,
    "MaSCSweepLoRA": MaSCSweepLoRA,
    "MaSCSweepLoRAModel": MaSCSweepLoRAModel,
    "MaSCSweep": MaSCSweep,
    "MaSCSweepCustom": MaSCSweepCustom,
}

NODE_DISPLAY_NAME_MAPPINGS = {
    "MaSCLoadEncoder": "Load MaSC Encoder",
    "MaSCConceptPreservation": "MaSC Concept Preservation",
    "MaSCPromptFollowing": "MaSC Prompt Following",
    "MaSCStripSubject": "Strip Subject",
    "MaSCScore": "MaSC Score",
    "MaSCSelectBest": "MaSC Select Best",
    "MaSCGate": "MaSC Gate",
    "MaSCLoadAutoMaskModel": "Load MaSC Auto Mask Model",
    "MaSCAutoMask": "MaSC Auto Mask",
    "MaSCLoadSAM3Model": "Load MaSC SAM3 Model",
    "MaSCSampleUntil": "MaSC Sample Until",
    "MaSCSampleUntilCustom": "MaSC Sample Until (Custom)",
    "MaSCRules": "MaSC Rules",
    "MaSCPrune": "MaSC Prune",
    "MaSCLogScores": "MaSC Log Scores",
    "MaSCSubject": "MaSC Subject",
    "MaSCScoreSubjects": "MaSC Score Subjects",
    "MaSCContactSheet": "MaSC Contact Sheet",
    "MaSCPick": "MaSC Pick",
    "MaSCScoreVideo": "MaSC Score Video",
    "MaSCVideoOptions": "MaSC Video Options",
    "MaSCSweepLoRA": "MaSC Sweep LoRA",
    "MaSCSweepLoRAModel": "MaSC Sweep LoRA Model",
    "MaSCSweep": "MaSC Sweep",
    "MaSCSweepCustom": "MaSC Sweep (Custom)",
}
