"""The usage ledger: each model request's tokens and cost, kept and summed."""
