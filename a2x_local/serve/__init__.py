"""Serving agents: an MCP server (stdio and streamable HTTP), a read-only HTTP API, a registry browser page,
searches batched across clients, and hot switching to a newly activated tree. Everything else in this package is
private to it."""

from a2x_local.serve.server import ServeOptions, serve_http, serve_stdio

__all__ = ["ServeOptions", "serve_http", "serve_stdio"]
