"""Coordinators a broker hosts: the consumer group coordinator (:mod:`.group`)."""

__all__: list[str] = []  # the API is the subpackages
