"""Version control: the one typed wrapper over the git CLI."""
