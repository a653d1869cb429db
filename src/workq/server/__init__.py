"""The MCP server: ``build_server`` in ``app``, ``serve`` in ``main``.

Importing this package imports nothing heavy; the server's modules load when used.
"""
