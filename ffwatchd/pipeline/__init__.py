"""The worker's pipeline: the `JobPipeline` contract (contract), the `Pipeline` with its models
loaded once (pipeline), one job's processors run frame by frame (frames), why a face job
found nothing to work on (noface)."""
