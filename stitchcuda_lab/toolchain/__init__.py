"""The Verifier's machinery: builds (build.py, cache.py), the isolated worker (worker.py),
correctness and anti-hacking checks (verify.py, antihack.py), timing (timing.py), profiles
(profile.py, ncu.py). Importing this package imports nothing heavy.
"""
