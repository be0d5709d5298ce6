"""Write small random LoRA files for the host suite's SD1.5, keyed as the host's own loader maps them.

Run by the host suite with the HOST's interpreter, inside the host checkout:

    MASC_COMFYUI_PYTHON build_loras.py COMFYUI_DIR CHECKPOINT OUT_DIR [PREFIX]

CHECKPOINT is a full checkpoint (the SD1.5) or a diffusion model of ``models/diffusion_models`` (the tiny Flux);
PREFIX (default ``masc-test``) starts each file's name.

The UNet's LoRA keys come from the host (``comfy.lora.model_lora_keys_unet`` on the loaded checkpoint), so the files
patch what LoraLoader really patches: rank-4 up/down pairs on the attention projections of the first transformer
blocks, one file per seed (``<PREFIX>-epoch1..3.safetensors``), large enough that a strength above 0 changes the
pixels. ``<PREFIX>-foreign.safetensors`` has keys no layer maps (a LoRA for another model). Prints one line.
"""

from __future__ import annotations

import os
import sys
import time

RANK = 4
LAYERS = 24
"""Attention projections patched per file (of the UNet's first blocks)."""


def main(comfy_dir: str, checkpoint: str, out_dir: str, prefix: str = "masc-test") -> None:
    sys.path.insert(0, comfy_dir)
    os.chdir(comfy_dir)
    started = time.perf_counter()
    import torch
    from safetensors.torch import save_file

    import comfy.cli_args

    comfy.cli_args.args.cpu = True  # before comfy.model_management looks for a GPU
    import comfy.lora
    import comfy.sd

    if os.path.basename(os.path.dirname(checkpoint)) == "diffusion_models":
        model = comfy.sd.load_diffusion_model(checkpoint)
    else:
        model = comfy.sd.load_checkpoint_guess_config(checkpoint, output_vae=False, output_clip=False)[0]
    weights = model.model.state_dict()
    key_map = comfy.lora.model_lora_keys_unet(model.model, {})
    targets = sorted(
        (lora_key, target)
        for lora_key, target in key_map.items()
        if isinstance(target, str)
        and lora_key.startswith("lora_unet_")
        and "attn" in target  # SD1.5's ".attn1.to_q", Flux's "_attn.qkv"
        and target in weights
        and weights[target].ndim == 2
    )[:LAYERS]
    if not targets:
        raise SystemExit("no attention weight of this model has a LoRA key: the host's key map changed")
    os.makedirs(out_dir, exist_ok=True)
    for seed in (1, 2, 3):
        generator = torch.Generator().manual_seed(seed)
        tensors = {}
        for lora_key, target in targets:
            rows, columns = weights[target].shape
            tensors[f"{lora_key}.lora_up.weight"] = torch.randn(rows, RANK, generator=generator) * 0.3
            tensors[f"{lora_key}.lora_down.weight"] = torch.randn(RANK, columns, generator=generator) * 0.3
            tensors[f"{lora_key}.alpha"] = torch.tensor(float(RANK))
        save_file(tensors, os.path.join(out_dir, f"{prefix}-epoch{seed}.safetensors"))
    foreign = {
        "lora_unet_not_a_layer_of_sd15.lora_up.weight": torch.zeros(8, RANK),
        "lora_unet_not_a_layer_of_sd15.lora_down.weight": torch.zeros(RANK, 8),
    }
    save_file(foreign, os.path.join(out_dir, f"{prefix}-foreign.safetensors"))
    print(f"built 3 LoRAs of {len(targets)} layers and a foreign one in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main(*sys.argv[1:5])
