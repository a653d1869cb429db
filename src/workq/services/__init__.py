"""The operations of workq: one function, one transaction; schemas in, schemas out."""
