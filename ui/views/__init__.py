"""The app's views: each builds its block of the page and wires its own events.

Every view needs Gradio: without it, importing any of them (or ``ui.app``) says in one
line which extra to install."""

from refine.backends.imports import require

require("gradio", "gradio", "the app", "app")
