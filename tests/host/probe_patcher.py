"""Which ModelPatcher the pack gives ComfyUI when dynamic VRAM is on (what can be checked without a GPU).

Run by the host suite with the HOST's interpreter:  probe_patcher.py COMFYUI_DIR PACK_DIR  -> one JSON line.

On CUDA with comfy-aimdo, ComfyUI's main.py swaps ``comfy.model_patcher.CoreModelPatcher`` for the dynamic
patcher, which streams comfy.ops layers. The MaSC models are plain torch / transformers layers, so the pack
must keep the legacy ``ModelPatcher`` (loaded in full, as core does for text encoders that disable
offloading). This swaps CoreModelPatcher for a recording subclass as main.py would, imports the installed
pack the way ComfyUI does, and reports which class ``make_patcher`` used and whether ComfyUI then loads it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys


def main(comfy_dir: str, pack_dir: str) -> None:
    sys.path[0] = comfy_dir  # this script's folder must not shadow the host's modules
    os.chdir(comfy_dir)
    import comfy.cli_args

    comfy.cli_args.args.cpu = True
    import torch

    import comfy.model_management
    import comfy.model_patcher

    used = []

    class Dynamic(comfy.model_patcher.ModelPatcher):  # stands for ModelPatcherDynamic, which needs CUDA
        def __init__(self, *args, **kwargs):
            used.append("CoreModelPatcher")
            super().__init__(*args, **kwargs)

    comfy.model_patcher.CoreModelPatcher = Dynamic
    name = os.path.basename(pack_dir)
    spec = importlib.util.spec_from_file_location(name, os.path.join(pack_dir, "__init__.py"))
    pack = importlib.util.module_from_spec(spec)
    sys.modules[name] = pack
    spec.loader.exec_module(pack)
    host = sys.modules[name + ".nodes.host"]
    cpu = torch.device("cpu")
    patcher = host.make_patcher(torch.nn.Linear(4, 4), cpu, cpu)
    comfy.model_management.load_models_gpu([patcher], force_full_load=True)
    print(
        json.dumps(
            {
                "class": f"{type(patcher).__module__}.{type(patcher).__qualname__}",
                "legacy": type(patcher) is comfy.model_patcher.ModelPatcher,
                "core_patcher_used": bool(used),
                "is_dynamic": patcher.is_dynamic() if hasattr(patcher, "is_dynamic") else None,
                "loaded": any(m.model is patcher for m in comfy.model_management.current_loaded_models),
            }
        )
    )


if __name__ == "__main__":
    main(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]))
