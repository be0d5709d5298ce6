"""Write tiny random-weight diffusion transformers (and their VAE) with a ComfyUI host's own model code.

Run by the host suite with the HOST's interpreter, inside the host checkout:

    MASC_COMFYUI_PYTHON build_dits.py COMFYUI_DIR MODELS_DIR flux

Nothing of ComfyUI is copied: the transformer is built by the host's ``comfy.supported_models`` class (so its
``UNETLoader`` detects the same model family from the saved keys) and the VAE by the host's autoencoder classes.

- ``flux``: Flux.1 (``comfy.ldm.flux.model.Flux``): hidden 256, two heads (the host derives heads = hidden / 128),
  one double and one single block, guidance embedding (dev/Kontext), T5 width shrunk to 64, CLIP pooled 768; and a
  16-channel VAE as Flux's ``ae.safetensors`` is laid out (no quant convs), its decoder 4x narrower where the host's
  VAE loader reads the decoder's width (0.33; 0.3.64 gets it full width). The host
  detects it as Flux; ReferenceLatent (Kontext) works on it.
- ``flux_clip_l``: the same Flux with its text input 768 wide, so a CLIP-L (the test SD1.5's CLIP) conditions it
  through CLIP Text Encode: MaSC Sweep (Custom) re-encodes each prompt with a real CLIP, LoRA-patched per cell.
- ``sd3``: SD3 (``comfy.ldm.modules.diffusionmodules.mmdit.MMDiT``) with two joint blocks (the host reads the width as
  64 per block: 128), T5 width shrunk to 64, CLIP pooled 2048, positions for up to 32x32 patches; its VAE has
  Flux's 16-channel layout (built as Flux's).
- ``qwen_image``: Qwen-Image (``comfy.ldm.qwen_image.model``) with one block. The host's detection reads only the
  input channels and the block count (its width stays Qwen-Image's: about 150M parameters), and the
  ``__index_timestep_zero__`` buffer that marks Edit 2511; and the Wan 2.1-style VAE Qwen-Image uses
  (``comfy.ldm.wan.vae.WanVAE``), at width 32 where the host reads the width from the weights (0.33; 0.3.64 fixes
  it at 96, and gets that).
- ``wan_vace``: Wan 2.1 VACE (``comfy.ldm.wan.model.VaceWanModel``): width 256 (the host reads it from
  ``head.modulation``: two heads), one block and one VACE block, text width 4096 (Wan's, which the host does not
  read), and the same Wan 2.1 VAE at width 32.

Weights are N(0, 0.02) (every element written: comfy.ops layers start uninitialized), biases 0, norms 1, fp32.
Written to ``MODELS_DIR/diffusion_models/masc-host-test-<family>.safetensors`` and
``MODELS_DIR/vae/masc-host-test-<family>-vae.safetensors``. Its images are noise; it exists so core's custom
sampling runs a real DiT for real.
"""

from __future__ import annotations

import os
import sys
import time

from build_sd15 import randomize

FLUX = dict(
    image_model="flux",
    in_channels=16,
    out_channels=16,
    vec_in_dim=768,
    context_in_dim=64,
    hidden_size=256,
    mlp_ratio=4.0,
    num_heads=2,
    depth=1,
    depth_single_blocks=1,
    axes_dim=[16, 56, 56],
    theta=10000,
    qkv_bias=True,
    guidance_embed=True,
    patch_size=2,
    txt_ids_dims=[],
)
FLUX_VAE = dict(
    double_z=True,
    z_channels=16,
    resolution=256,
    in_channels=3,
    out_ch=3,
    ch=128,
    ch_mult=[1, 2, 4, 4],
    num_res_blocks=2,
    attn_resolutions=[],
    dropout=0.0,
)
FLUX_VAE_DECODER_CH = 32
QWEN_IMAGE = dict(image_model="qwen_image", in_channels=64, num_layers=1, default_ref_method="index_timestep_zero")
WAN_VAE = dict(
    dim=32,
    z_dim=16,
    dim_mult=[1, 2, 4, 4],
    num_res_blocks=2,
    attn_scales=[],
    temperal_downsample=[False, True, True],
    dropout=0.0,
)
WAN_VACE = dict(
    image_model="wan2.1",
    model_type="vace",
    dim=256,
    in_dim=16,
    out_dim=16,
    num_heads=2,
    ffn_dim=512,
    num_layers=1,
    vace_layers=1,
    vace_in_dim=96,
    text_dim=4096,
    patch_size=(1, 2, 2),
    freq_dim=256,
    window_size=(-1, -1),
    qk_norm=True,
    cross_attn_norm=True,
    eps=1e-6,
)
SD3 = dict(
    in_channels=16,
    out_channels=16,
    patch_size=2,
    depth=2,
    adm_in_channels=2048,
    input_size=None,
    pos_embed_scaling_factor=None,
    context_embedder_config={"target": "torch.nn.Linear", "params": {"in_features": 64, "out_features": 128}},
    num_patches=1024,
    pos_embed_max_size=32,
    x_block_self_attn_layers=[],
)
FAMILIES = {
    "flux": "Flux",
    "flux_clip_l": "Flux (text input for CLIP-L)",
    "qwen_image": "Qwen-Image (Edit 2511 where the host has it)",
    "sd3": "SD3",
    "wan_vace": "Wan 2.1 VACE",
}


def accepted(config: dict, names) -> dict:
    """The settings this host's class takes (older hosts lack newer ones, e.g. 0.3.64's Flux has no txt_ids_dims)."""
    return {k: v for k, v in config.items() if k == "image_model" or k in names}


def flux(torch, generator):
    import dataclasses

    import comfy.ldm.flux.model
    import comfy.ldm.models.autoencoder
    import comfy.supported_models

    config = comfy.supported_models.Flux(
        accepted(FLUX, {f.name for f in dataclasses.fields(comfy.ldm.flux.model.FluxParams)})
    )
    model = config.get_model({}, device=torch.device("cpu"))
    import comfy.sd

    def autoencoder(decoder_ch):
        return comfy.ldm.models.autoencoder.AutoencodingEngine(
            regularizer_config={"target": "comfy.ldm.models.autoencoder.DiagonalGaussianRegularizer"},
            encoder_config={"target": "comfy.ldm.modules.diffusionmodules.model.Encoder", "params": FLUX_VAE},
            decoder_config={
                "target": "comfy.ldm.modules.diffusionmodules.model.Decoder",
                "params": dict(FLUX_VAE, ch=decoder_ch),
            },
        )

    vae = autoencoder(FLUX_VAE_DECODER_CH)
    try:  # the host's own VAE loader decides: older hosts (0.3.64) take a decoder only as wide as the encoder
        comfy.sd.VAE(sd=vae.state_dict())
    except RuntimeError:
        vae = autoencoder(FLUX_VAE["ch"])
    return model.diffusion_model, vae


def flux_clip_l(torch, generator):
    FLUX["context_in_dim"] = 768
    return flux(torch, generator)


def qwen_image(torch, generator):
    import inspect

    import comfy.ldm.qwen_image.model
    import comfy.supported_models

    # A host without Edit 2511 (0.3.64) builds Qwen-Image-Edit without 2511's reference method.
    names = inspect.signature(comfy.ldm.qwen_image.model.QwenImageTransformer2DModel.__init__).parameters
    config = comfy.supported_models.QwenImage(accepted(QWEN_IMAGE, names))
    model = config.get_model({}, device=torch.device("cpu"))
    return model.diffusion_model, wan_vae()


def wan_vae():
    """The Wan 2.1 VAE at width 32 where the host's VAE loader reads the width from the weights (0.33); full width
    (96) on a host that fixes it (0.3.64)."""
    import comfy.ldm.wan.vae
    import comfy.sd

    vae = comfy.ldm.wan.vae.WanVAE(**WAN_VAE)
    try:  # the host's own VAE loader decides, as for Flux's
        comfy.sd.VAE(sd=vae.state_dict())
    except RuntimeError:
        vae = comfy.ldm.wan.vae.WanVAE(**dict(WAN_VAE, dim=96))
    return vae


def wan_vace(torch, generator):
    import comfy.supported_models

    config = comfy.supported_models.WAN21_Vace(dict(WAN_VACE))
    model = config.get_model({}, device=torch.device("cpu"))
    return model.diffusion_model, wan_vae()


def sd3(torch, generator):
    import comfy.supported_models

    config = comfy.supported_models.SD3(dict(SD3))
    model = config.get_model({}, device=torch.device("cpu"))
    return model.diffusion_model, flux(torch, generator)[1]  # SD3's VAE has Flux's 16-channel layout


def main(comfy_dir: str, models_dir: str, family: str) -> None:
    started = time.time()
    sys.path[0] = comfy_dir  # this script's own folder must not shadow the host's modules
    os.chdir(comfy_dir)
    import comfy.cli_args

    comfy.cli_args.args.cpu = True  # before comfy.model_management looks for a GPU
    import torch

    import comfy.utils

    generator = torch.Generator().manual_seed(0)
    builders = {"flux": flux, "flux_clip_l": flux_clip_l, "qwen_image": qwen_image, "sd3": sd3, "wan_vace": wan_vace}
    transformer, vae = builders[family](torch, generator)
    counts = [randomize(part, generator) for part in (transformer, vae)]
    written = []
    for folder, name, module in (
        ("diffusion_models", f"masc-host-test-{family}.safetensors", transformer),
        ("vae", f"masc-host-test-{family}-vae.safetensors", vae),
    ):
        path = os.path.join(models_dir, folder, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        state = {k: v.detach().to(torch.float32).contiguous() for k, v in module.state_dict().items()}
        comfy.utils.save_torch_file(state, path)
        written.append(f"{folder}/{name}")
    print(
        f"built {FAMILIES[family]} ({counts[0] / 1e6:.1f}M parameters) and its VAE ({counts[1] / 1e6:.1f}M) with the "
        "host's code in "
        f"{time.time() - started:.1f}s: {', '.join(written)}"
    )


if __name__ == "__main__":
    main(*sys.argv[1:4])
