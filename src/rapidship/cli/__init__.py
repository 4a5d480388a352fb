"""The invoke task collections: each parses flags into typed values and calls one stage."""
