"""The ZeroGPU Space's entry point: ``spaces`` is imported before anything else (ZeroGPU
prepares torch then), each model call leases the GPU (ui/zerogpu.py), and the app is
configured from the Space's variables and secrets (see ui/deploy.py for the list)."""

import spaces

from ui.zerogpu import main

main(spaces)
