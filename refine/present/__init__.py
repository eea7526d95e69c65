"""Presentation apart from work: ``html`` (the page shell and escaping), ``charts`` (every
SVG chart), ``report`` (one page per kind of result). Tasks never import these; the CLI and
the app render what tasks return."""
