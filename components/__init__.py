"""Thin custom TFX components and the Beam jobs they run (data ingestion, label statistics)."""
