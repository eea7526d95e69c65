"""From runs to a better generator: ``export`` (runs as datasets) and ``tune`` (a LoRA by
Diffusion-DPO or SFT with peft)."""
