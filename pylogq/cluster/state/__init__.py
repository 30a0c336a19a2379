"""Partition and producer state: a partition's replicas, leader epoch, ISR and high
watermark (:mod:`.partition`), the idempotent producers' sequence state
(:mod:`.producer_state`) and the allocation of producer ids (:mod:`.producer_ids`)."""

__all__: list[str] = []  # the API is the submodules
