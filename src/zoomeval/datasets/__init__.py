"""Stage 1: fetch inputs and turn each dataset into a manifest."""
