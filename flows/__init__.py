"""Orchestration: the domain spec, the Prefect flows that run each stage, and the `rlvrflow` CLI.

The libraries (cleaning, verifiers, curriculum, training) never import Prefect; this package wires
them together. Importing it is cheap: Prefect and the libraries load only when a flow runs.
"""

from rlvrflow.flows.spec import DomainSpec, SpecError, load_spec

__all__ = ["DomainSpec", "SpecError", "load_spec"]
