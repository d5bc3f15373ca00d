"""Language models taken apart and joined: parts (blocks, heads, layouts), scoring, adapter training."""
