"""rlvrflow: from raw domain logs to a GRPO-trained checkpoint, with every step verifiable.

One import root for the project's packages. In the source tree they stay at the top, where the
project was laid out (`cleaning/`, `verifiers/`, `curriculum/`, `training/`, `flows/`); the build
maps each into this package (`[tool.setuptools] package-dir` in pyproject.toml), so an install holds
`rlvrflow.verifiers` and never a top-level `verifiers`, which is another library's name on PyPI:

    from rlvrflow.verifiers import verify, Verdict
    from rlvrflow.training import train_grpo
"""

__version__ = "0.1.0"
