"""Math answer verifier: extraction (extract.py), normalization (normalize.py), the cheap voters
(compare.py), the sympy voter in a timed helper process (symbolic.py) and the entry (verifier.py)."""
