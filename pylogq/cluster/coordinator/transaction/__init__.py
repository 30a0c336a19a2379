"""The transaction coordinator (KIP-98): :mod:`.coordinator` answers InitProducerId for
transactional ids, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions and
ListTransactions, aborts transactions that run past their timeout and expires idle
transactional ids; :mod:`.metadata` is one transactional id's state and its transitions;
:mod:`.markers` writes the COMMIT and ABORT markers to a transaction's partitions through
their leaders; :mod:`.log_schema` the ``__transaction_state`` record formats."""

__all__: list[str] = []  # the API is the submodules
