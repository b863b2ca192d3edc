"""Results handed out: the leaderboard across studies and bundles, and the exports other tools read
(timm's results CSV, Hugging Face model-index, Every Eval Ever)."""
