"""A test-only ComfyUI node pack for the host suite: counts the diffusion model's evaluations from outside MaSC.

``HostTestCountModelCalls`` clones a MODEL with a post-CFG function that core's sampling calls once per model
evaluation (one denoising of the batch, whatever the conditioning batching); ``HostTestModelCalls`` reports and
resets the count once its input (e.g. MaSC Sample Until's report) exists. Loaded only by the server that
tests/host/test_pruning.py starts (whitelisted there); never part of the pack.
"""

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


NODE_CLASS_MAPPINGS = {"HostTestCountModelCalls": HostTestCountModelCalls, "HostTestModelCalls": HostTestModelCalls}
