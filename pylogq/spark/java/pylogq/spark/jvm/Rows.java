package pylogq.spark.jvm;

import java.util.Arrays;

/**
 * The records of one columnar batch as parallel arrays: what {@link Columns}' vectors read.
 *
 * <p>Keys, values and headers stay where they were decoded: each row keeps a reference to its
 * buffer and positions in it. Records outside the timestamp range {@code [minTimestamp,
 * maxTimestamp)} are dropped as they arrive. {@link #reset} starts the next batch; the vectors
 * of the previous batch are then no longer read (Spark consumes a batch before asking for the
 * next).
 */
final class Rows implements RecordSink {
    final long minTimestamp;
    final long maxTimestamp;
    int size;
    /** Bumped by each {@link #reset}, so vectors that cache decoded state know it is stale. */
    int generation;
    long[] offset;
    long[] timestamp;
    int[] timestampType;
    byte[][] buf;
    int[] keyPos;
    int[] keyLen;
    int[] valuePos;
    int[] valueLen;
    int[] headersPos;
    int[] headerCount;
    /** The offset of the last record offered, kept or not (-1: none since the last reset of the mark). */
    long lastOffered = -1;

    Rows(int capacity, long minTimestamp, long maxTimestamp) {
        this.minTimestamp = minTimestamp;
        this.maxTimestamp = maxTimestamp;
        allocate(Math.max(capacity, 16));
    }

    private void allocate(int n) {
        offset = new long[n];
        timestamp = new long[n];
        timestampType = new int[n];
        buf = new byte[n][];
        keyPos = new int[n];
        keyLen = new int[n];
        valuePos = new int[n];
        valueLen = new int[n];
        headersPos = new int[n];
        headerCount = new int[n];
    }

    private void grow() {
        int n = offset.length * 2;
        offset = Arrays.copyOf(offset, n);
        timestamp = Arrays.copyOf(timestamp, n);
        timestampType = Arrays.copyOf(timestampType, n);
        buf = Arrays.copyOf(buf, n);
        keyPos = Arrays.copyOf(keyPos, n);
        keyLen = Arrays.copyOf(keyLen, n);
        valuePos = Arrays.copyOf(valuePos, n);
        valueLen = Arrays.copyOf(valueLen, n);
        headersPos = Arrays.copyOf(headersPos, n);
        headerCount = Arrays.copyOf(headerCount, n);
    }

    void reset() {
        Arrays.fill(buf, 0, size, null);
        size = 0;
        generation++;
    }

    @Override
    public void record(long offset, long timestamp, int timestampType, byte[] buf, int keyPos, int keyLen,
                       int valuePos, int valueLen, int headersPos, int headerCount) {
        lastOffered = offset;
        if (timestamp < minTimestamp || timestamp >= maxTimestamp) {
            return;
        }
        int i = size;
        if (i == this.offset.length) {
            grow();
        }
        this.offset[i] = offset;
        this.timestamp[i] = timestamp;
        this.timestampType[i] = timestampType;
        this.buf[i] = buf;
        this.keyPos[i] = keyPos;
        this.keyLen[i] = keyLen;
        this.valuePos[i] = valuePos;
        this.valueLen[i] = valueLen;
        this.headersPos[i] = headersPos;
        this.headerCount[i] = headerCount;
        size = i + 1;
    }

    /** Offsets {@code from..to-1} of records known from their batch's header alone (offset columns only). */
    void offsets(long from, long to) {
        for (long o = from; o < to; o++) {
            int i = size;
            if (i == offset.length) {
                grow();
            }
            offset[i] = o;
            size = i + 1;
        }
        if (to > from) {
            lastOffered = to - 1;
        }
    }
}
