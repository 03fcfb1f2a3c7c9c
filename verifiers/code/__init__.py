"""Code verifier: extract a Python solution (extract.py), run it against reference tests inside a
bubblewrap sandbox (sandbox.py) through a harness (harness.py) that reports over a nonce channel."""
