"""Write a random-weight, full-size SD1.5 checkpoint with a ComfyUI host's own model code.

Run by the host suite with the HOST's interpreter, inside the host checkout:

    MASC_COMFYUI_PYTHON build_sd15.py COMFYUI_DIR OUT.safetensors

Nothing of ComfyUI is copied: the UNet, text encoder and VAE are the host's
classes (``comfy.supported_models.SD15``, ``comfy.sd.CLIP``,
``comfy.ldm.models.autoencoder.AutoencoderKL``), their state dicts merged by
the host's ``state_dict_for_saving`` so CheckpointLoaderSimple detects SD1.5.
Weights are N(0, 0.02) (every element written: comfy.ops layers start
uninitialized), biases 0, normalization scales 1; saved in fp16 (~2 GB).
Its images are noise; it exists so KSampler and VAEDecode run for real.
"""

from __future__ import annotations

import inspect
import os
import sys
import time

UNET = dict(
    use_checkpoint=False,
    image_size=32,
    out_channels=4,
    use_spatial_transformer=True,
    legacy=False,
    adm_in_channels=None,
    in_channels=4,
    model_channels=320,
    num_res_blocks=[2, 2, 2, 2],
    transformer_depth=[1, 1, 1, 1, 1, 1, 0, 0],
    channel_mult=[1, 2, 4, 4],
    transformer_depth_middle=1,
    use_linear_in_transformer=False,
    context_dim=768,
    num_heads=8,
    transformer_depth_output=[1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0],
    use_temporal_attention=False,
    use_temporal_resblock=False,
)
VAE = dict(
    double_z=True,
    z_channels=4,
    resolution=256,
    in_channels=3,
    out_ch=3,
    ch=128,
    ch_mult=[1, 2, 4, 4],
    num_res_blocks=2,
    attn_resolutions=[],
    dropout=0.0,
)


def randomize(module, generator) -> int:
    """Overwrite every parameter in place; the number of values written."""
    import torch

    written = 0
    with torch.no_grad():
        for owner in module.modules():
            is_norm = "norm" in type(owner).__name__.lower()
            for name, parameter in owner.named_parameters(recurse=False):
                if is_norm:
                    parameter.fill_(1.0 if name == "weight" else 0.0)
                elif name == "bias":
                    parameter.zero_()
                else:
                    values = torch.randn(parameter.shape, generator=generator) * 0.02
                    parameter.copy_(values.to(parameter.dtype))
                written += parameter.numel()
    return written


def main(comfy_dir: str, out: str) -> None:
    started = time.time()
    sys.path[0] = comfy_dir  # this script's own folder must not shadow the host's modules
    os.chdir(comfy_dir)
    import comfy.cli_args

    comfy.cli_args.args.cpu = True  # before comfy.model_management looks for a GPU
    import torch

    import comfy.ldm.models.autoencoder
    import comfy.sd
    import comfy.supported_models
    import comfy.utils

    generator = torch.Generator().manual_seed(0)
    config = comfy.supported_models.SD15(dict(UNET, dtype=torch.float32))
    model = config.get_model({}, device=torch.device("cpu"))
    clip = comfy.sd.CLIP(config.clip_target(), model_options={"dtype": torch.float32})
    vae = comfy.ldm.models.autoencoder.AutoencoderKL(ddconfig=VAE, embed_dim=4)
    counts = [randomize(part, generator) for part in (model.diffusion_model, clip.cond_stage_model, vae)]

    saving = inspect.signature(model.state_dict_for_saving).parameters
    parts = (clip.get_sd(), vae.state_dict())
    if "unet_state_dict" in saving:  # newer hosts pass the UNet's state dict in
        merged = model.state_dict_for_saving(model.diffusion_model.state_dict(), *parts)
    else:
        merged = model.state_dict_for_saving(*parts)
    tensors = {
        key: (value.half() if value.is_floating_point() else value).contiguous() for key, value in merged.items()
    }
    partial = out + ".partial"
    comfy.utils.save_torch_file(tensors, partial)
    os.replace(partial, out)  # a run killed mid-write never leaves a truncated checkpoint behind
    print(
        f"{out}: {len(tensors)} tensors, parameters {counts}, {os.path.getsize(out) / 1e9:.2f} GB, "
        f"{time.time() - started:.1f} s"
    )


if __name__ == "__main__":
    main(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]))
