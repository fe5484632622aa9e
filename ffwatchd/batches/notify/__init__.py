"""Notifications when a batch finishes (or a job fails): the durable outbox, webhooks, e-mail."""
