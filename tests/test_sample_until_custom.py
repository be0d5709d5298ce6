"""MaSC Sample Until (Custom), MaSC Rules and MaSC Prune without ComfyUI.

The custom twin samples with core's custom-sampling values (NOISE, GUIDER, SAMPLER, SIGMAS: comfy_harness's
stand-ins of Random Noise, CFG/Basic Guider, KSampler Select and Basic Scheduler) on the same stand-in model as
MaSC Sample Until, so the two nodes can be compared candidate by candidate: same rules, same seeds, same pixels,
same ledger. What only a real ComfyUI can show (core's guiders and samplers) is in tests/host/test_custom_sampling.py.
"""

from __future__ import annotations

import importlib

import pytest
import torch

from comfy_harness import (
    Noise_EmptyNoise,
    Noise_RandomNoise,
    StandInGuider,
    StandInSampler,
    basic_scheduler,
    sampler_custom_advanced,
    stand_in_sampling,
    text_conditioning,
)
from test_pick import Browser, scored
from test_sample_until import PROMPT, inputs, models, run  # noqa: F401 (models: a fixture)

RULE_NAMES = (
    "rank_by",
    "cp_weight",
    "pf_weight",
    "min_cp",
    "min_pf",
    "reject_small_masks",
    "min_foreground",
    "on_uncertain",
    "on_blend",
    "accept",
    "max_candidates",
    "batch_size",
    "on_shortfall",
)
WIDGET_TYPES = ("INT", "FLOAT", "STRING", "BOOLEAN")


def errors(pack):
    return importlib.import_module(pack.__name__ + ".masc_core.errors")


def make_rules(pack, **changes):
    """MaSC Rules' output for Sample Until's default test settings (test_sample_until.inputs) with ``changes``."""
    values = dict(
        rank_by="cp",
        cp_weight=1.0,
        pf_weight=1.0,
        min_cp=-1.0,
        min_pf=-1.0,
        reject_small_masks=False,
        min_foreground=0.05,
        on_uncertain="keep but mark",
        on_blend="report",
        accept=2,
        max_candidates=8,
        batch_size=1,
        on_shortfall="return best",
    )
    values.update((name, value) for name, value in changes.items() if name in RULE_NAMES)
    return pack.nodes.NODE_CLASS_MAPPINGS["MaSCRules"]().rules(**values)[0]


def make_prune(pack, prune_at=0.0, prune_keep=1, prune_study=False):
    return pack.nodes.NODE_CLASS_MAPPINGS["MaSCPrune"]().prune(prune_at, prune_keep, prune_study)[0]


def custom_inputs(pack, models, *, seed=1000, steps=3, sampler="euler", guider=None, prune=None, **rule_changes):
    """The custom twin's inputs for the same run as test_sample_until.inputs(**rule_changes)."""
    base = inputs(models, **rule_changes)
    sampler_value = sampler if isinstance(sampler, StandInSampler) else StandInSampler(sampler)
    return dict(
        noise=Noise_RandomNoise(seed),
        guider=guider or StandInGuider(models["model"], base["positive"], base["negative"], base["cfg"]),
        sampler=sampler_value,
        sigmas=basic_scheduler(steps),
        latent_image=base["latent_image"],
        vae=models["vae"],
        encoder=models["encoder"],
        rules=make_rules(pack, **rule_changes),
        prompt=base["prompt"],
        subject=base["subject"],
        reference_image=base["reference_image"],
        reference_mask=base["reference_mask"],
        segmenter=base["segmenter"],
        prune=prune,
        mask_subject=base["mask_subject"],
        mask_threshold=base["mask_threshold"],
        extra_pnginfo={},
        unique_id="8",
    )


def run_custom(pack, models, **changes):
    values = custom_inputs(pack, models, **changes)
    with stand_in_sampling(pack) as backend:
        out = pack.nodes.NODE_CLASS_MAPPINGS["MaSCSampleUntilCustom"]().sample(**values)
    return out, backend


def widgets(spec: dict) -> list[str]:
    """The inputs the front end draws as widgets (combos and INT/FLOAT/STRING/BOOLEAN), not link sockets."""
    return [
        name
        for section in ("required", "optional")
        for name, value in spec.get(section, {}).items()
        if isinstance(value[0], (list, tuple)) or value[0] in WIDGET_TYPES
    ]


CASES = {
    "plain, rounds of 3": dict(changes=dict(batch_size=3, accept=2, max_candidates=7, min_cp=1.0), prune=None),
    "early stop": dict(changes=dict(accept=2, max_candidates=8, min_cp=-1.0), prune=None),
    "pruned, euler resumes": dict(
        changes=dict(steps=4, batch_size=4, max_candidates=8, accept=2, min_cp=1.0),
        prune=dict(prune_at=0.5, prune_keep=1),
    ),
    "pruned, dpmpp_2m replays": dict(
        changes=dict(steps=4, batch_size=4, max_candidates=8, accept=2, min_cp=1.0, sampler_name="dpmpp_2m"),
        prune=dict(prune_at=0.5, prune_keep=1),
    ),
    "study": dict(
        changes=dict(steps=10, batch_size=2, max_candidates=2, accept=2, min_cp=-1.0), prune=dict(prune_study=True)
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_custom_twin_gives_sample_untils_candidates_ledger_and_pixels(pack, models, case):
    """Same settings, said once through MaSC Rules / MaSC Prune and once through the widgets: identical outputs."""
    changes, prune = CASES[case]["changes"], CASES[case]["prune"]
    widget_prune = {f"prune_{k}" if not k.startswith("prune_") else k: v for k, v in (prune or {}).items()}
    out, _ = run(pack, models, **changes, **widget_prune)
    rule_changes = {k: v for k, v in changes.items() if k not in ("steps", "sampler_name")}
    twin, backend = run_custom(
        pack,
        models,
        steps=changes.get("steps", 3),
        sampler=changes.get("sampler_name", "euler"),
        prune=None if prune is None else make_prune(pack, **prune),
        **rule_changes,
    )
    images, latent, mask, scores, used, seeds, report, candidates = out["result"]
    t_images, t_latent, t_mask, t_scores, t_used, t_seeds, t_report, t_candidates = twin["result"]
    assert (t_used, t_seeds) == (used, seeds)
    assert torch.equal(t_images, images) and torch.equal(t_latent["samples"], latent["samples"])
    assert t_latent["batch_index"] == latent["batch_index"] and torch.equal(t_candidates, candidates)
    assert [s.cp for s in t_scores.scores] == [s.cp for s in scores.scores]
    assert t_scores.context.verdicts == scores.context.verdicts and t_scores.context.seeds == scores.context.seeds
    assert t_scores.context.ledger == scores.context.ledger
    assert [s.previews for s in t_scores.scores] == [s.previews for s in scores.scores]
    assert t_scores.context.node == "MaSCSampleUntilCustom" and scores.context.node == "MaSCSampleUntil"
    # the report is the same but for how a plain round was batched (the twin samples one candidate per call)
    assert t_report.splitlines()[0] == report.splitlines()[0]
    if prune is not None:
        assert backend.phase_calls and all(
            c["sampler"] == changes.get("sampler_name", "euler") for c in backend.phase_calls
        )


def test_candidate_i_is_sampler_custom_advanced_with_random_noise_at_seed_plus_i(pack, models):
    guider = StandInGuider(models["model"], text_conditioning(PROMPT), text_conditioning(PROMPT), 1.0)  # Basic Guider
    out, backend = run_custom(pack, models, seed=77, guider=guider, accept=4, max_candidates=4, min_cp=1.0)
    images, latent, _, scores, used, seeds, _, _ = out["result"]
    assert used == 4 and scores.context.seeds == [77, 78, 79, 80] and backend.calls == [[77], [78], [79], [80]]
    for position, seed in enumerate(int(s) for s in seeds.split(", ")):
        plain = sampler_custom_advanced(
            None,
            Noise_RandomNoise(seed),
            guider,
            StandInSampler("euler"),
            basic_scheduler(3),
            {"samples": torch.zeros(1, 4, 32, 32)},
        )[0]["samples"]
        assert torch.equal(latent["samples"][position : position + 1], plain)
        assert torch.equal(images[position : position + 1], models["vae"].decode(plain))


def test_the_graphs_noise_is_never_changed(pack, models):
    values = custom_inputs(pack, models, accept=3, max_candidates=3, min_cp=1.0)
    with stand_in_sampling(pack):
        pack.nodes.NODE_CLASS_MAPPINGS["MaSCSampleUntilCustom"]().sample(**values)
    assert values["noise"].seed == 1000  # a cached Random Noise output is shared with the graph's other nodes


def test_another_packs_sampler_is_replayed_and_the_report_says_why(pack, models):
    """A SAMPLER that is none of core's (sampler_name None) prunes by replay, which is exact for any sampler."""
    out, backend = run_custom(
        pack,
        models,
        steps=4,
        sampler=StandInSampler(None),
        batch_size=4,
        max_candidates=4,
        accept=1,
        min_cp=1.0,
        prune=make_prune(pack, prune_at=0.5, prune_keep=1),
    )
    scores, report = out["result"][3], out["result"][6]
    ledger = scores.context.ledger
    assert ledger["replayed"] == 2 and ledger["spent"] == 4 * 2 + 4  # judged at 2 by all; the survivor from step 0
    assert "is not one of core's samplers that resume exactly after a split" in report
    assert "the plain sampler gives at its seed" in report


def test_the_widgets_an_artist_sees_are_few(pack):
    custom = pack.nodes.NODE_CLASS_MAPPINGS["MaSCSampleUntilCustom"].INPUT_TYPES()
    rules = pack.nodes.NODE_CLASS_MAPPINGS["MaSCRules"].INPUT_TYPES()
    prune = pack.nodes.NODE_CLASS_MAPPINGS["MaSCPrune"].INPUT_TYPES()
    today = pack.nodes.NODE_CLASS_MAPPINGS["MaSCSampleUntil"].INPUT_TYPES()
    assert widgets(custom) == ["prompt", "subject", "mask_subject", "mask_threshold"]
    assert len(widgets(rules)) == 13 and len(widgets(prune)) == 3  # each at most ~16
    assert len(widgets(today)) == 26  # what the typed nodes split up


def test_sample_untils_saved_inputs_keep_their_names_and_order(pack):
    """Saved workflows store widget values by position: MaSC Sample Until's inputs never move."""
    spec = pack.nodes.NODE_CLASS_MAPPINGS["MaSCSampleUntil"].INPUT_TYPES()
    assert list(spec["required"]) == [
        "model",
        "positive",
        "negative",
        "latent_image",
        "vae",
        "seed",
        "steps",
        "cfg",
        "sampler_name",
        "scheduler",
        "denoise",
        "encoder",
        "prompt",
        "subject",
        "accept",
        "max_candidates",
        "batch_size",
        "rank_by",
        "cp_weight",
        "pf_weight",
        "min_cp",
        "min_pf",
        "reject_small_masks",
        "min_foreground",
        "on_shortfall",
        "mask_subject",
        "mask_threshold",
    ]
    assert list(spec["optional"]) == [
        "reference_image",
        "reference_mask",
        "segmenter",
        "subjects",
        "on_blend",
        "on_uncertain",
        "prune_at",
        "prune_keep",
        "prune_study",
        "video",  # appended (a socket, no widget): saved graphs keep every slot
    ]


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"rules": "cp > 0.5"}, "rules is not MaSC Rules' output ('cp > 0.5' arrived): connect a MaSC Rules node"),
        ({"noise": Noise_EmptyNoise()}, "noise has no seed to count up from (Disable Noise?)"),
        ({"noise": "42"}, "noise is not a NOISE ('42' arrived): connect Random Noise"),
        ({"guider": 3}, "guider is not a GUIDER (3 arrived): connect CFG Guider"),
        ({"sampler": None}, "sampler is not a SAMPLER (None arrived): connect KSampler Select"),
        # A STRING through core's If/Else Switch into the sockets that were met only after the first round was sampled:
        ({"vae": "decode me"}, "vae is not a VAE ('decode me' arrived): connect Load Checkpoint's VAE"),
        (
            {"encoder": "siglip"},
            "encoder is not a MaSC encoder ('siglip' arrived): connect Load MaSC Encoder's 'encoder' output",
        ),
        ({"segmenter": "clipseg"}, "segmenter is not a MaSC segmenter ('clipseg' arrived)"),
        (
            {"latent_image": torch.zeros(1, 4, 8, 8)},
            "latent_image is not a LATENT (a tensor of shape [1, 4, 8, 8] arrived)",
        ),
        ({"sigmas": torch.tensor([1.0])}, "sigmas is (1,), not a schedule of at least 2 finite noise levels"),
        ({"sigmas": torch.tensor([1.0, float("nan"), 0.0])}, "not a schedule of at least 2 finite noise levels"),
        ({"prune": {"prune_at": 0.5}}, "prune is not MaSC Prune's output"),
        (
            {"noise": Noise_RandomNoise(0xFFFFFFFFFFFFFFFF)},
            "seed 18446744073709551615 is outside 0..18446744073709551608",
        ),
    ],
)
def test_a_value_that_cannot_work_is_one_line_before_anything_is_sampled(pack, models, changes, message):
    values = custom_inputs(pack, models)
    values.update(changes)
    with stand_in_sampling(pack) as backend:
        with pytest.raises(errors(pack).MascInputError) as caught:
            pack.nodes.NODE_CLASS_MAPPINGS["MaSCSampleUntilCustom"]().sample(**values)
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert backend.calls == []


@pytest.mark.parametrize(
    "prune, sampler, batch_size, message",
    [
        (dict(prune_at=0.5, prune_keep=2), "euler", 2, "nothing would be pruned"),
        (dict(prune_at=0.5, prune_keep=1), "dpm_adaptive", 2, "sampler dpm_adaptive chooses its own steps"),
        (
            dict(prune_at=0.5, prune_keep=1),
            StandInSampler("opaque", splittable=False),
            2,
            "cannot be stopped at a step",
        ),
    ],
)
def test_pruning_that_cannot_work_with_these_inputs_is_one_line(pack, models, prune, sampler, batch_size, message):
    with pytest.raises(errors(pack).MascInputError, match=message):
        run_custom(
            pack,
            models,
            steps=4,
            sampler=sampler,
            batch_size=batch_size,
            max_candidates=4,
            prune=make_prune(pack, **prune),
        )


def test_masc_rules_refuses_rules_that_cannot_work(pack):
    with pytest.raises(errors(pack).MascInputError, match="accept is 5 but max_candidates is 4"):
        make_rules(pack, accept=5, max_candidates=4)
    with pytest.raises(errors(pack).MascInputError, match="rank_by"):
        make_rules(pack, rank_by="cp; rm -rf /")


def test_masc_rules_cannot_be_forged_over_a_link(pack):
    """A MASC_RULES value whose fields were changed after MaSC Rules made it is checked again where it arrives."""
    batch, images, _ = scored(pack)
    rules = make_rules(pack)
    forged = type(rules)(passing=rules.passing, accept=9, max_candidates=3)
    with pytest.raises(errors(pack).MascInputError, match="accept is 9 but max_candidates is 3"):
        pack.nodes.NODE_CLASS_MAPPINGS["MaSCGate"]().gate(batch, images, 0.6, -1.0, False, 0.05, rules=forged)


def test_gate_and_select_best_judge_by_masc_rules_as_by_their_own_widgets(pack):
    nodes = pack.nodes.NODE_CLASS_MAPPINGS
    batch, images, latent = scored(pack)  # CP 0.40, 0.90, 0.55, 0.70, 0.20, 0.65
    rules = make_rules(pack, rank_by="cp", min_cp=0.6)
    by_widgets = nodes["MaSCGate"]().gate(batch, images, 0.6, -1.0, False, 0.05, latent=latent)["result"]
    by_rules = nodes["MaSCGate"]().gate(batch, images, -1.0, -1.0, False, 0.05, latent=latent, rules=rules)["result"]
    assert (
        by_rules[3] == by_widgets[3] == 3
        and torch.equal(by_rules[0], images[[1, 3, 5]])
        and torch.equal(by_widgets[0], by_rules[0])
    )
    best = nodes["MaSCSelectBest"]().select(batch, images, "pf", 1.0, 1.0, 2, -1.0, -1.0, False, 0.05, rules=rules)[
        "result"
    ]
    assert best[3] == 1 and best[4] == "1, 3"  # MaSC Rules' cp ranking and threshold, not the widgets' pf
    with pytest.raises(errors(pack).MascInputError, match="rules is not MaSC Rules' output"):
        nodes["MaSCGate"]().gate(batch, images, 0.6, -1.0, False, 0.05, rules={"min_cp": 0.6})


def test_pick_orders_by_masc_rules_but_lets_the_person_judge(pack, comfy_dirs):
    host = importlib.import_module(pack.__name__ + ".nodes.host")
    batch, images, latent = scored(pack)
    browser = Browser(host.pick_board(), picks=[0])
    rules = make_rules(pack, rank_by="cp", min_cp=0.99)  # nothing would pass: Pick still shows the best 4 by CP
    with host.use_pick_browser(browser):
        out = pack.nodes.NODE_CLASS_MAPPINGS["MaSCPick"]().pick(
            batch, images, 4, 1, "pf", 1.0, 1.0, 60, latent=latent, rules=rules, unique_id="9"
        )
    for thread in browser.threads:
        thread.join()
    assert browser.events[0][1]["indices"] == [1, 3, 5, 2] and out["result"][4] == "1"


@pytest.mark.parametrize(
    "sampler, guider_kind, groups",
    [
        ("euler", "core", [3, 3, 1]),  # core's guider, a sampler drawing no noise: one call a round (the last cut to 1)
        ("dpmpp_2m_sde", "core", [1] * 7),  # draws noise while sampling: one call per candidate
        ("euler", "another pack's", [1] * 7),  # a guider MaSC does not know: one call per candidate
    ],
)
def test_a_plain_round_is_one_call_only_where_that_is_exact(pack, models, sampler, guider_kind, groups):
    class AnotherPacksGuider(StandInGuider):
        pass

    base = inputs(models)
    kind = StandInGuider if guider_kind == "core" else AnotherPacksGuider
    guider = kind(models["model"], base["positive"], base["negative"], base["cfg"])
    settings = dict(sampler=sampler, batch_size=3, max_candidates=7, accept=2, min_cp=1.0)
    out, backend = run_custom(pack, models, guider=guider, **settings)
    assert backend.plain_groups == groups and out["result"][4] == 7
    # Batched or not, each candidate is the one SamplerCustomAdvanced makes at its seed: the same as rounds of 1.
    single, _ = run_custom(pack, models, guider=guider, **dict(settings, batch_size=1))
    assert out["result"][5] == single["result"][5] and torch.equal(out["result"][0], single["result"][0])
    assert torch.equal(out["result"][7], single["result"][7])
