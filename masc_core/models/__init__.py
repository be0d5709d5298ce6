"""The networks MaSC runs, and how they are found, checked, loaded and fed.

- ``checkpoints``: Hugging Face checkpoint folders (resolve, download, check, weights, identity);
- ``siglip`` / ``siglip_checkpoint`` / ``encoder``: SigLIP2 in plain torch, its folders, and
  ``MascEncoder`` (cached, batched forwards and the attention pool);
- ``segmenters`` / ``clipseg`` / ``sam3`` / ``segmenter_folders``: text-prompted subject masks, one
  ``Segmenter`` interface with two families (CLIPSeg, SAM3), chosen by the checkpoint folder;
- ``embedders``: CLIP and DINO, the DreamBench baselines;
- ``preprocess``, ``tokenizers``, ``cache``, ``devices``: what the models share.
"""
