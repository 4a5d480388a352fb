"""Smoke: the spill smoke run in a built image with the hardened profile."""
