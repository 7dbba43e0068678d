"""Reaching a Redis: URLs and clients, an embedded server, a local cluster, health."""
