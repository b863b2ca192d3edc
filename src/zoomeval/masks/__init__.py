"""Stage 2: foreground masks (boxes or Segment Anything) for FGSet and BGSet."""
