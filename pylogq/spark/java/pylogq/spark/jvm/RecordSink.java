package pylogq.spark.jvm;

/** Where {@link Entries#decode} puts each record it decodes, in offset order. */
interface RecordSink {
    /**
     * One record. Its key and value are {@code buf[keyPos, keyPos + keyLen)} and
     * {@code buf[valuePos, valuePos + valueLen)}, a length of -1 meaning null. Its
     * {@code headerCount} headers start at {@code buf[headersPos]}, encoded as a v2 record
     * encodes them (zigzag varint key length, key bytes, zigzag varint value length, value
     * bytes, -1: null); a v0/v1 record has none. {@code buf} stays valid and unchanged after
     * the call: the sink may keep it.
     *
     * @param timestamp milliseconds since the epoch (-1 for v0 records)
     * @param timestampType 0 CreateTime, 1 LogAppendTime, -1 for v0 records
     */
    void record(long offset, long timestamp, int timestampType, byte[] buf, int keyPos, int keyLen,
                int valuePos, int valueLen, int headersPos, int headerCount);
}
