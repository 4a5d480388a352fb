"""Publish: the OCI registry client, push and promote, and Harbor as configuration."""
