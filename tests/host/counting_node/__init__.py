"""A test-only ComfyUI node pack for the host suite: counts the diffusion model's evaluations from outside MaSC, and
stands in for a text encoder.

``HostTestCountModelCalls`` clones a MODEL with a post-CFG function that core's sampling calls once per model
evaluation (one denoising of the batch, whatever the conditioning batching); ``HostTestModelCalls`` reports and
resets the count once its input (e.g. MaSC Sample Until's report) exists. ``HostTestConditioning`` makes a
CONDITIONING from text without a text encoder (the tiny DiTs have no T5 or Qwen-VL): a fixed random tensor per
text, of the width the model was built with, with a pooled vector. Loaded only by the servers that
tests/host/test_pruning.py and test_custom_sampling.py start (whitelisted there); never part of the pack.
"""

import hashlib

import torch

CALLS = [0]


class HostTestCountModelCalls:
    CATEGORY = "host tests"
    FUNCTION = "wrap"
    RETURN_TYPES = ("MODEL",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",)}}

    @classmethod
    def IS_CHANGED(cls, **_):
        return float("nan")

    def wrap(self, model):
        counted = model.clone()

        def count(args):
            CALLS[0] += 1
            return args["denoised"]

        counted.set_model_sampler_post_cfg_function(count)
        CALLS[0] = 0
        return (counted,)


class HostTestModelCalls:
    CATEGORY = "host tests"
    FUNCTION = "read"
    OUTPUT_NODE = True
    RETURN_TYPES = ("STRING",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"after": ("STRING", {"forceInput": True})}}

    @classmethod
    def IS_CHANGED(cls, **_):
        return float("nan")

    def read(self, after):
        text = str(CALLS[0])
        return {"ui": {"text": [text]}, "result": (text,)}


class HostTestConditioning:
    CATEGORY = "host tests"
    FUNCTION = "encode"
    RETURN_TYPES = ("CONDITIONING",)

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "text": ("STRING", {"multiline": True}),
                "width": ("INT", {"default": 64, "min": 1, "max": 8192}),
                "tokens": ("INT", {"default": 8, "min": 1, "max": 512}),
                "pooled": ("INT", {"default": 768, "min": 0, "max": 8192}),
            }
        }

    def encode(self, text, width, tokens, pooled):
        seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:4], "little")
        generator = torch.Generator().manual_seed(seed)
        cond = torch.randn(1, tokens, width, generator=generator)
        extra = {"pooled_output": torch.randn(1, pooled, generator=generator)} if pooled else {}
        return ([[cond, extra]],)


NODE_CLASS_MAPPINGS = {
    "HostTestCountModelCalls": HostTestCountModelCalls,
    "HostTestModelCalls": HostTestModelCalls,
    "HostTestConditioning": HostTestConditioning,
}
