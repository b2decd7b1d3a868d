"""The Verifier: what judges candidate programs (and nothing they import).

The isolated worker (worker.py) runs the Verification protocol (verify.py) with its
anti-hacking checks (antihack.py), timing (timing.py) and profiles (profile.py, ncu.py).
Importing this package imports nothing heavy.
"""
