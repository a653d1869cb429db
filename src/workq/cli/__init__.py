"""The admin CLI (Typer): one module per group of commands."""
