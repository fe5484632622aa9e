"""Reading the samples of a Prometheus text exposition."""
from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def samples(text: bytes | str) -> dict[tuple[str, frozenset], float]:
    """(sample name, labels) -> value."""
    if isinstance(text, bytes):
        text = text.decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(text: bytes | str, name: str, **labels: str) -> float:
    return samples(text)[(name, frozenset(labels.items()))]
