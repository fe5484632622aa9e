"""Face models and stages: registry, sessions, detect, embed, select, swap, enhance, anonymize, label."""
