"""Client side of the protocol: consumer group partition assignment."""
