"""A one-variant matrix (cpu-debian12, amd64 + arm64) for images the registry tests build themselves."""

VARIANT = "cpu-debian12"
VARIANTS_YAML = """
defaults:
  registry_prefix: harbor.example.internal/dockerhub
  budget_bytes: 1000000
  uid: 1001
  user: rapids
  rapids: "26.10"
  python: "3.11"
  flavour: pip
  image: {image}
  env: dask-cpu
  conda_builder: library/python:3.11-slim-bookworm
oses:
  debian12: {{family: deb, distro: debian, version: "12", arches: [amd64, arm64],
             image: library/debian:bookworm-slim, python: "3.11"}}
axes: {{cuda: [cpu], os: [debian12]}}
"""
