"""The per-image browser and the hard set: its data, pictures and page."""
