"""Stage 2: foreground masks (boxes or Segment Anything) for FGSet and BGSet."""

#: The mask and count methods that run Segment Anything (:mod:`zoomeval.masks.sam`, the ``sam`` extra).
SAM_METHODS = ("sam_box", "sam_auto")
