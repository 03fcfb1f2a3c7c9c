"""Tell the owner when a night goes wrong: Prefect automations on the server PREFECT_API_URL names.

    python scripts/prefect_alerts.py --webhook https://hooks.example.com/T0/B0     # a webhook (Slack, Teams, ...)
    python scripts/prefect_alerts.py --block email/owner-mail                      # any notification block you made

Two automations, replaced when they exist (so the script can be rerun):
- "rlvrflow: retrain failed": a `retrain` flow run ends Failed or Crashed (a stage failed, the drift
  check stopped the night, a worker died); the message names the run and its state message.
- "rlvrflow: champion kept": a finished night's model was not promoted (the `rlvrflow.model.kept` event
  that the retrain flow emits, with the promotion rule's reasons).
With --webhook, a `custom-webhook` notification block named `rlvrflow-owner` is created (or updated)
that POSTs {"subject", "body"} as JSON. For e-mail, install `prefect-email`, make an email block in the
UI or in Python, and pass it with --block. `scripts/prefect_local.sh alerts ...` runs this script with
the local server's environment.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

FAILED = "rlvrflow: retrain failed"
KEPT = "rlvrflow: champion kept"


async def _block_id(args) -> str:
    from prefect.blocks.core import Block
    from prefect.blocks.notifications import CustomWebhookNotificationBlock

    if args.block:
        block = await Block.aload(args.block)
        return str(block._block_document_id)
    block = CustomWebhookNotificationBlock(
        name="rlvrflow owner",
        url=args.webhook,
        method="POST",
        json_data={"subject": "{{subject}}", "body": "{{body}}"},
        allow_private_urls=args.allow_private,
    )
    return str(await block.asave("rlvrflow-owner", overwrite=True))


async def install(args) -> list[str]:
    from prefect.automations import Automation, EventTrigger, Posture, SendNotification
    from prefect.client.orchestration import get_client

    block_id = await _block_id(args)
    async with get_client() as client:
        for automation in await client.read_automations():
            if automation.name in (FAILED, KEPT):
                await client.delete_automation(automation.id)
    failed = Automation(
        name=FAILED,
        description="a retrain flow run failed or crashed",
        trigger=EventTrigger(
            expect={"prefect.flow-run.Failed", "prefect.flow-run.Crashed"},
            match={"prefect.resource.id": "prefect.flow-run.*"},
            match_related={"prefect.resource.role": "flow", "prefect.resource.name": "retrain"},
            posture=Posture.Reactive,
            threshold=1,
        ),
        actions=[
            SendNotification(
                block_document_id=block_id,
                subject="rlvrflow: retrain {{ flow_run.name }} failed",
                body="Flow run {{ flow_run.name }} ended {{ flow_run.state.name }}: "
                "{{ flow_run.state.message }}. The champion stays in place.",
            )
        ],
    )
    kept = Automation(
        name=KEPT,
        description="a finished night's model was not promoted",
        trigger=EventTrigger(
            expect={"rlvrflow.model.kept"},
            match={"prefect.resource.id": "rlvrflow.registry.*"},
            posture=Posture.Reactive,
            threshold=1,
        ),
        actions=[
            SendNotification(
                block_document_id=block_id,
                subject="rlvrflow: {{ event.resource.name }} kept its champion",
                body="{{ event.payload.model }} was not promoted: {{ event.payload.reasons }}. "
                "Champion: {{ event.payload.champion }}.",
            )
        ],
    )
    created = [await failed.acreate(), await kept.acreate()]
    return [f"{a.name} ({a.id})" for a in created]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--webhook", help="URL that receives a JSON POST {subject, body}")
    where.add_argument("--block", help="an existing notification block, as TYPE/NAME (e.g. email/owner-mail)")
    ap.add_argument(
        "--allow-private",
        action="store_true",
        help="let the webhook block call a private or loopback address (a local receiver)",
    )
    args = ap.parse_args(argv)
    for line in asyncio.run(install(args)):
        print(f"automation: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
