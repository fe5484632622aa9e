"""Notifications when a batch finishes (or a job fails): what is sent and one try of it (outbox),
the senders claiming and trying in parallel per target (sender), webhooks (webhook), e-mail (smtp)."""
