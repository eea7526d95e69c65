"""The Hugging Face Space's entry point: the refinement app, configured from the Space's
variables and secrets (see ui/deploy.py for the list)."""

from ui.deploy import main

main()
