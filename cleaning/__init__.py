"""rlvrflow.cleaning: raw domain logs -> ingest -> clean -> dedup -> validated prompt rows.

    from rlvrflow.cleaning import prepare
    result = prepare(sources, cleaning_cfg, validation_cfg, "retail", spec_dir, "runs/retail/clean")

`prepare` streams: memory follows `cleaning.chunk_rows`, not the input (cleaning/stream.py);
`cleaning.dask_run.prepare_on_dask(client_or_address, ...)` runs the same tasks on a Dask cluster.

Imports without torch or Great Expectations (GX is imported inside the validation step).
"""

from .config import CleaningConfig, SourceSpec, ValidationConfig
from .dedup import dedup
from .ingest import IngestError, ingest
from .prepare import clean_stage, prepare, row_id
from .stage import ReconciliationError, StageResult, write_stage
from .template import build_prompts, render_prompt
from .transforms import clean_frame, clean_value
from .validate import ValidationFailed, validate
from .width import to_half_width

__all__ = [
    "prepare",
    "StageResult",
    "write_stage",
    "ValidationFailed",
    "ReconciliationError",
    "IngestError",
    "SourceSpec",
    "CleaningConfig",
    "ValidationConfig",
    "clean_value",
    "clean_frame",
    "to_half_width",
    "render_prompt",
    "build_prompts",
    "row_id",
    "ingest",
    "clean_stage",
    "dedup",
    "validate",
]
