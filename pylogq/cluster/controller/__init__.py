"""The controller (:mod:`.controller`): elections, ISR changes, topic creation and
deletion and controlled shutdown, driven by the metadata store's watches, and its
channel of requests to the brokers (:mod:`.channel`)."""

__all__: list[str] = []  # the API is the submodules
