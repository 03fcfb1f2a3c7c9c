"""Example rlvrflow verifier plugin for a support desk; see ticket_checks.status."""

from .status import verify_ticket_status

__all__ = ["verify_ticket_status"]
