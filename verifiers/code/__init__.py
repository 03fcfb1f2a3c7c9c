"""Code verifier: extract a Python solution (extract.py) and run it against reference tests in a
bubblewrap sandbox (sandbox.py, warm.py; processes.py holds the process helpers they and the pool
share): inside, zygote.py forks a solution process and a tests process (remote.py) whose report,
with a nonce only it holds, is the verdict (harness.py runs the tests in rlimits-only mode)."""
