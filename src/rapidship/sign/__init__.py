"""Signatures and attestations in cosign's key-based format: keys, payloads, attach, verify."""
