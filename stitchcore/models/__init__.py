"""What a model is and how to get one: refs, preprocessing, zoo architectures (``archs``), sources."""
