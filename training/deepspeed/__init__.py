"""ZeRO config templates (`zero2.json`, `zero3.json`) that `training.distributed.deepspeed_config` fills in.

A field set to "auto" is filled from the arguments of `deepspeed_config`; every other value is used as
written, so a user can tune buckets or offload here without touching code.
"""
