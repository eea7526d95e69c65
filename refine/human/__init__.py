"""People in the loop: ``rating`` (the study protocol of the Rate view) and ``agree`` (which
metric agrees with human ratings)."""
