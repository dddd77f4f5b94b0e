"""Serving: export signatures, TF Serving configuration, REST/gRPC client."""
