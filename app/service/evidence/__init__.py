"""The hash chain's read side: a run's proof, and audit bundles to verify offline."""
