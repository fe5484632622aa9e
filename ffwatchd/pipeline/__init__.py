"""The worker's pipeline: a job's processors run frame by frame on models loaded once (contract.py)."""
