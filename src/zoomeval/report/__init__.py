"""Stage 5: tables and figures from the analysis outputs (no prediction file is re-read)."""
