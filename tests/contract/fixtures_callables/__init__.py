"""Importable callables for the contract tests, good and bad."""

from tests.contract.fixtures_callables.good import transform as transform
