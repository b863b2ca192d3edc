"""Stage 3: every model over every zoom transform of every image."""
