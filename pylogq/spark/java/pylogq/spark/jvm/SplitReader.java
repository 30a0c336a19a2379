package pylogq.spark.jvm;

import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * One task's read: its splits one after another, as columnar batches of at most about
 * {@code batchRows} rows, each of one split (the topic and partition columns are constants).
 */
final class SplitReader implements PartitionReader<ColumnarBatch> {
    /** The columns a batch header gives without reading its records. */
    private static final java.util.Set<String> FROM_HEADERS = java.util.Set.of("topic", "partition", "offset");

    private final Split[] splits;
    private final String[] columns;
    private final boolean failOnDataLoss;
    private final int batchRows;
    private final boolean headersOnly;
    private final int chunkBytes;
    private final long minTimestamp;
    private final Rows rows;
    private final ChunkPool pool = new ChunkPool();
    private int next;
    private SegmentWalk walk;
    private ColumnarBatch batch;
    private Split batchSplit;

    SplitReader(Split[] splits, String[] columns, long minTimestamp, long maxTimestamp, boolean failOnDataLoss,
                int batchRows) {
        this.splits = splits;
        this.columns = columns;
        this.failOnDataLoss = failOnDataLoss;
        this.batchRows = batchRows;
        boolean filtersRows = minTimestamp != Long.MIN_VALUE || maxTimestamp != Long.MAX_VALUE;
        boolean onlyHeaders = !filtersRows;
        for (String c : columns) {
            onlyHeaders &= FROM_HEADERS.contains(c);
        }
        this.headersOnly = onlyHeaders;
        this.minTimestamp = minTimestamp;
        this.chunkBytes = (int) Math.min(Math.max((long) batchRows * 128, 1 << 20), 64 << 20);
        this.rows = new Rows(Math.min(batchRows, 1 << 16), minTimestamp, maxTimestamp);
    }

    @Override
    public boolean next() {
        rows.reset();
        pool.recycle(walk == null ? null : walk.currentChunk());
        while (true) {
            if (walk == null) {
                if (next >= splits.length) {
                    return false;
                }
                Split split = splits[next++];
                walk = new SegmentWalk(split, failOnDataLoss, headersOnly, minTimestamp, chunkBytes, pool);
                if (batchSplit == null || batchSplit.partition != split.partition
                        || !batchSplit.topic.equals(split.topic)) {
                    ColumnVector[] vectors = new ColumnVector[columns.length];
                    for (int i = 0; i < columns.length; i++) {
                        vectors[i] = Columns.of(columns[i], rows, split.topic, split.partition);
                    }
                    batch = new ColumnarBatch(vectors);
                    batchSplit = split;
                }
            }
            boolean more = walk.fill(rows, batchRows);
            if (!more) {
                walk.close();
                walk = null;
            }
            if (rows.size >= batchRows || (!more && rows.size > 0)) {
                batch.setNumRows(rows.size);
                return true;
            }
        }
    }

    @Override
    public ColumnarBatch get() {
        return batch;
    }

    @Override
    public void close() {
        if (walk != null) {
            walk.close();
            walk = null;
        }
    }
}
