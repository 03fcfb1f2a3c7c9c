"""rlvrflow.cleaning: raw domain logs -> ingest -> clean -> dedup -> validated prompt rows.

Imports without torch or Great Expectations (GX is imported inside the validation step).
"""
from .config import CleaningConfig, SourceSpec, ValidationConfig

__all__ = ["SourceSpec", "CleaningConfig", "ValidationConfig"]
