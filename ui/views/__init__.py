"""The app's views: each builds its block of the page and wires its own events."""
