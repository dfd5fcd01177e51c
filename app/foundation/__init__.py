"""Building blocks that several layers use and that know none of them.

Redaction, identifiers, waiting on shared futures, the timer heap, the YAML
loader and amounts of money sit below `contract`, the lowest layer: every layer may import them, and
nothing here imports from the rest of `app`.
"""
