"""Storage: models, engine, migrations and driver-error translation."""
