"""Configuration: the variant matrix (variants.yaml) and the one YAML loader every config file uses."""
