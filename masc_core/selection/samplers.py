"""What pruning and a batched round know of core's samplers, by name: which resume exactly after a split, which
restart a multistep history, which draw noise while sampling, and which batch exactly.

A split (sampling to a judged step, then on from it) is exact only for samplers whose state at a step is the latent
alone; a batch built from per-candidate noise equals separate runs only for samplers that draw no noise while
sampling. Any name not listed here counts as the unsafe case (replayed, sampled one by one).
"""

from __future__ import annotations

UNSPLITTABLE_SAMPLERS = frozenset({"dpm_fast", "dpm_adaptive"})
"""Samplers that choose their own steps between the schedule's ends: there is no step ``s`` to stop at."""
RESTARTING_SAMPLERS = frozenset(
    {
        "lms",
        "dpmpp_2m",
        "dpmpp_2m_cfg_pp",
        "dpmpp_2m_sde",
        "dpmpp_2m_sde_gpu",
        "dpmpp_3m_sde",
        "dpmpp_3m_sde_gpu",
        "ipndm",
        "ipndm_v",
        "deis",
        "res_multistep",
        "res_multistep_cfg_pp",
        "res_multistep_ancestral",
        "res_multistep_ancestral_cfg_pp",
        "uni_pc",
        "uni_pc_bh2",
        "gradient_estimation",
        "gradient_estimation_cfg_pp",
    }
)
"""Multistep samplers: each step uses the previous steps' predictions, a history a split would start again."""
RESUMABLE_SAMPLERS = frozenset({"euler", "euler_cfg_pp", "heun", "heunpp2", "dpm_2", "ddim"})
"""Single-step samplers that draw no noise (ddim is core's euler): a candidate resumed after a split from the
latent it left inside the sampler is the one sampled in one go. Every other sampler is *replayed*."""


BATCH_EXACT_SAMPLERS = frozenset(
    {
        "euler",
        "euler_cfg_pp",
        "heun",
        "heunpp2",
        "dpm_2",
        "lms",
        "dpm_fast",
        "dpm_adaptive",
        "dpmpp_2m",
        "dpmpp_2m_cfg_pp",
        "ipndm",
        "ipndm_v",
        "deis",
        "res_multistep",
        "res_multistep_cfg_pp",
        "gradient_estimation",
        "gradient_estimation_cfg_pp",
        "uni_pc",
        "uni_pc_bh2",
    }
)
"""Samplers that draw no noise while sampling (ComfyUI 0.3.64 and 0.33): only their initial noise depends on the
seed, so a batch built from per-candidate noise equals separate runs. The others (ancestral, SDE, lcm, ddpm,
ddim's inpainting noise, ...) draw step noise for the whole batch from one seed; any name not listed counts as one."""


def samples_one_by_one(sampler_name: str) -> bool:
    """Whether a round must sample each candidate on its own to equal separate KSampler runs."""
    return sampler_name not in BATCH_EXACT_SAMPLERS


def resumes_at_split(sampler_name: str) -> bool:
    """Whether a survivor goes on from its judged step (else it is sampled again from step 0, the replay)."""
    return sampler_name in RESUMABLE_SAMPLERS


def split_note(sampler_name: str, known: bool = True) -> str | None:
    """Why survivors cost more with this sampler than the judged steps saved suggest (None when they resume).

    ``known`` False: ``sampler_name`` describes a sampler that is none of core's (another pack's, or core's with its
    options changed), which is always replayed: a split is exact only for the samplers this module names.
    """
    if known and resumes_at_split(sampler_name):
        return None
    if not known:
        why = "is not one of core's samplers that resume exactly after a split"
    elif sampler_name in RESTARTING_SAMPLERS:
        why = "is a multistep sampler (a split would restart its history)"
    else:
        why = "draws noise while sampling (a split would change its noise)"
    return (
        f"{sampler_name} {why}: each survivor was sampled again from step 0, so it is the image the plain sampler "
        "gives at its seed; the ledger counts the replayed steps"
    )
