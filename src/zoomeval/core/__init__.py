"""Shared by every stage: atomic IO, hashing, manifests, image decoding, zoom geometry, config."""
