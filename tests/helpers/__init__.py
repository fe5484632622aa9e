"""Helpers the test modules share: plain functions and classes (fixtures live in conftest.py)."""
