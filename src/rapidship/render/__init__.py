"""Render: a Variant into its build context (Dockerfile, lock/, builder/, runtime/), and lint it."""
