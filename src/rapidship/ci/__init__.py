"""CI: the GitLab child pipeline generated from the matrix."""
