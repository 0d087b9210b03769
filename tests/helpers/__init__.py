"""Helpers of the reliability suite (planted data, subprocess workers)."""
