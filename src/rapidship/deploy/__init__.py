"""invoke deploy: Compose stacks and Kubernetes manifests sized by the doctor's rules (docs/deploy.md)."""
