"""A stateful fake GitHub REST API for tests."""
