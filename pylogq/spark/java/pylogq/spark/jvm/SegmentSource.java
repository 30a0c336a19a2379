package pylogq.spark.jvm;

import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * The JVM reader as a Spark DataSource V2: reads the splits that pylogq's Python planner made
 * ({@code pylogq.spark.read_topic}), in Spark's task threads, as columnar batches.
 *
 * <p>Options: {@code splits}, a JSON list of tasks, each a list of splits {@code {"topic",
 * "partition", "directory", "start", "end", "aborted"}} ({@code aborted}, optional: a read_committed
 * split's aborted transactions, each {@code [producer id, first offset, marker offset]}, whose
 * batches are not read); {@code minTimestamp}/{@code maxTimestamp}
 * (milliseconds, the rows kept are {@code min <= timestamp < max}); {@code failOnDataLoss};
 * {@code batchRows}. The schema is the caller's: some of the Kafka source's columns, by name,
 * which Spark prunes further to what the query reads.
 *
 * <p>A query's filters on {@code partition}, {@code offset} and {@code timestamp} narrow the
 * read ({@link SegmentScan#pushFilters}): splits of other partitions are dropped, offset bounds
 * cut the splits, and a timestamp lower bound starts each segment where its time index allows,
 * while rows outside the timestamp bounds are dropped as they are decoded. Spark still applies
 * every filter after the read.
 */
public final class SegmentSource implements TableProvider {
    private static final Set<String> COLUMNS = Set.of("key", "value", "topic", "partition", "offset", "timestamp",
            "timestampType", "headers");

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        throw new IllegalArgumentException("the pylogq segment reader needs its schema: use pylogq.spark.read_topic");
    }

    @Override
    public boolean supportsExternalMetadata() {
        return true;
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        for (StructField field : schema.fields()) {
            if (!COLUMNS.contains(field.name())) {
                throw new IllegalArgumentException("the pylogq segment reader has no column " + field.name());
            }
        }
        return new SegmentTable(schema);
    }

    static final class SegmentTable implements Table, SupportsRead {
        private final StructType schema;

        SegmentTable(StructType schema) {
            this.schema = schema;
        }

        @Override
        public String name() {
            return "pylogq segments";
        }

        @Override
        public StructType schema() {
            return schema;
        }

        @Override
        public Set<TableCapability> capabilities() {
            return EnumSet.of(TableCapability.BATCH_READ);
        }

        @Override
        public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
            return new SegmentScan(schema, options);
        }
    }

    /** The scan: Spark prunes its columns to what the query reads and pushes its filters; its tasks are the planner's. */
    static final class SegmentScan implements ScanBuilder, SupportsPushDownRequiredColumns, SupportsPushDownFilters,
            Scan, Batch {
        private StructType schema;
        private final CaseInsensitiveStringMap options;
        private Filter[] pushed = new Filter[0];
        private Set<Integer> partitions;  // null: all
        private long minOffset = Long.MIN_VALUE;
        private long maxOffset = Long.MAX_VALUE;  // exclusive
        private long minTimestamp = Long.MIN_VALUE;  // milliseconds
        private long maxTimestamp = Long.MAX_VALUE;  // milliseconds, exclusive

        SegmentScan(StructType schema, CaseInsensitiveStringMap options) {
            this.schema = schema;
            this.options = options;
        }

        @Override
        public void pruneColumns(StructType required) {
            schema = required;
        }

        /**
         * Folds the filters this reader can use into its bounds, and hands every filter back: Spark
         * evaluates them all after the read, so a bound needs only to keep every row that passes.
         */
        @Override
        public Filter[] pushFilters(Filter[] filters) {
            List<Filter> used = new ArrayList<>();
            for (Filter f : filters) {
                if (take(f)) {
                    used.add(f);
                }
            }
            pushed = used.toArray(new Filter[0]);
            return filters;
        }

        @Override
        public Filter[] pushedFilters() {
            return pushed;
        }

        private boolean take(Filter f) {
            String column;
            Object value;
            if (f instanceof In) {
                In in = (In) f;
                if (!in.attribute().equals("partition") && !in.attribute().equals("offset")) {
                    return false;
                }
                long low = Long.MAX_VALUE;
                long high = Long.MIN_VALUE;
                Set<Integer> numbers = new java.util.HashSet<>();
                for (Object v : in.values()) {
                    if (!(v instanceof Integer || v instanceof Long)) {
                        return false;
                    }
                    long n = ((Number) v).longValue();
                    low = Math.min(low, n);
                    high = Math.max(high, n);
                    numbers.add((int) n);
                }
                if (in.attribute().equals("partition")) {
                    narrowPartitions(numbers);
                } else if (low <= high) {
                    minOffset = Math.max(minOffset, low);
                    maxOffset = Math.min(maxOffset, high + 1);
                } else {
                    maxOffset = Long.MIN_VALUE;  // IN (): no row
                }
                return true;
            }
            if (f instanceof EqualTo) {
                column = ((EqualTo) f).attribute();
                value = ((EqualTo) f).value();
            } else if (f instanceof GreaterThan) {
                column = ((GreaterThan) f).attribute();
                value = ((GreaterThan) f).value();
            } else if (f instanceof GreaterThanOrEqual) {
                column = ((GreaterThanOrEqual) f).attribute();
                value = ((GreaterThanOrEqual) f).value();
            } else if (f instanceof LessThan) {
                column = ((LessThan) f).attribute();
                value = ((LessThan) f).value();
            } else if (f instanceof LessThanOrEqual) {
                column = ((LessThanOrEqual) f).attribute();
                value = ((LessThanOrEqual) f).value();
            } else {
                return false;
            }
            if (column.equals("timestamp")) {
                Long micros = micros(value);
                if (micros == null) {
                    return false;
                }
                // A row's timestamp is whole milliseconds: t * 1000 compared with the literal's microseconds.
                long floor = Math.floorDiv(micros, 1000L);
                long ceil = -Math.floorDiv(-micros, 1000L);
                if (f instanceof GreaterThanOrEqual || f instanceof EqualTo) {
                    minTimestamp = Math.max(minTimestamp, ceil);
                }
                if (f instanceof GreaterThan) {
                    minTimestamp = Math.max(minTimestamp, floor + 1);
                }
                if (f instanceof LessThan) {
                    maxTimestamp = Math.min(maxTimestamp, ceil);
                }
                if (f instanceof LessThanOrEqual || f instanceof EqualTo) {
                    maxTimestamp = Math.min(maxTimestamp, floor + 1);
                }
                return true;
            }
            if (!(value instanceof Integer || value instanceof Long)) {
                return false;
            }
            long n = ((Number) value).longValue();
            long low = f instanceof GreaterThan ? n + 1 : f instanceof GreaterThanOrEqual || f instanceof EqualTo ? n
                    : Long.MIN_VALUE;
            long high = f instanceof LessThan ? n : f instanceof LessThanOrEqual || f instanceof EqualTo ? n + 1
                    : Long.MAX_VALUE;
            if (column.equals("offset")) {
                minOffset = Math.max(minOffset, low);
                maxOffset = Math.min(maxOffset, high);
                return true;
            }
            if (column.equals("partition")) {
                if (f instanceof EqualTo) {
                    narrowPartitions(Set.of((int) n));
                    return true;
                }
                return false;
            }
            return false;
        }

        private void narrowPartitions(Set<Integer> numbers) {
            if (partitions == null) {
                partitions = new java.util.HashSet<>(numbers);
            } else {
                partitions.retainAll(numbers);
            }
        }

        /** A timestamp literal as microseconds since the epoch (null: not a timestamp). */
        private static Long micros(Object value) {
            if (value instanceof java.sql.Timestamp) {
                java.sql.Timestamp t = (java.sql.Timestamp) value;
                return Math.floorDiv(t.getTime(), 1000L) * 1_000_000L + t.getNanos() / 1000;
            }
            if (value instanceof java.time.Instant) {
                java.time.Instant t = (java.time.Instant) value;
                return t.getEpochSecond() * 1_000_000L + t.getNano() / 1000;
            }
            return null;
        }

        @Override
        public Scan build() {
            return this;
        }

        @Override
        public StructType readSchema() {
            return schema;
        }

        @Override
        public String description() {
            return "pylogq segments " + Arrays.toString(schema.fieldNames())
                    + (pushed.length == 0 ? "" : " PushedFilters: " + Arrays.toString(pushed));
        }

        @Override
        public Batch toBatch() {
            return this;
        }

        @Override
        public InputPartition[] planInputPartitions() {
            String json = options.get("splits");
            if (json == null) {
                throw new IllegalArgumentException("the pylogq segment reader needs its splits");
            }
            JsonNode tasks;
            try {
                tasks = new ObjectMapper().readTree(json);
            } catch (IOException e) {
                throw new UncheckedIOException("the splits option is not JSON: " + e.getMessage(), e);
            }
            List<InputPartition> out = new ArrayList<>();
            for (JsonNode task : tasks) {
                List<Split> splits = new ArrayList<>();
                for (JsonNode s : task) {
                    int partition = s.get("partition").asInt();
                    long start = Math.max(s.get("start").asLong(), minOffset);
                    long end = Math.min(s.get("end").asLong(), maxOffset);
                    if ((partitions == null || partitions.contains(partition)) && start < end
                            && minTimestamp < maxTimestamp) {
                        JsonNode aborted = s.get("aborted");
                        int n = aborted == null ? 0 : aborted.size();
                        long[] producers = new long[n];
                        long[] firsts = new long[n];
                        long[] markers = new long[n];
                        for (int i = 0; i < n; i++) {
                            JsonNode txn = aborted.get(i);
                            producers[i] = txn.get(0).asLong();
                            firsts[i] = txn.get(1).asLong();
                            markers[i] = txn.get(2).asLong();
                        }
                        splits.add(new Split(s.get("topic").asText(), partition, s.get("directory").asText(), start,
                                end, producers, firsts, markers));
                    }
                }
                if (!splits.isEmpty()) {
                    out.add(new Task(splits.toArray(new Split[0])));
                }
            }
            return out.toArray(new InputPartition[0]);
        }

        @Override
        public PartitionReaderFactory createReaderFactory() {
            long low = Math.max(minTimestamp, options.getLong("minTimestamp", Long.MIN_VALUE));
            long high = Math.min(maxTimestamp, options.getLong("maxTimestamp", Long.MAX_VALUE));
            return new ReaderFactory(schema.fieldNames(), low, high, options.getBoolean("failOnDataLoss", true),
                    options.getInt("batchRows", 65536));
        }
    }

    /** One task's splits. */
    static final class Task implements InputPartition {
        private static final long serialVersionUID = 1L;
        final Split[] splits;

        Task(Split[] splits) {
            this.splits = splits;
        }
    }

    static final class ReaderFactory implements PartitionReaderFactory, Serializable {
        private static final long serialVersionUID = 1L;
        private final String[] columns;
        private final long minTimestamp;
        private final long maxTimestamp;
        private final boolean failOnDataLoss;
        private final int batchRows;

        ReaderFactory(String[] columns, long minTimestamp, long maxTimestamp, boolean failOnDataLoss, int batchRows) {
            if (batchRows < 1) {
                throw new IllegalArgumentException("batchRows must be at least 1, not " + batchRows);
            }
            this.columns = columns;
            this.minTimestamp = minTimestamp;
            this.maxTimestamp = maxTimestamp;
            this.failOnDataLoss = failOnDataLoss;
            this.batchRows = batchRows;
        }

        @Override
        public boolean supportColumnarReads(InputPartition partition) {
            return true;
        }

        @Override
        public PartitionReader<InternalRow> createReader(InputPartition partition) {
            throw new UnsupportedOperationException("the pylogq segment reader reads columnar batches only");
        }

        @Override
        public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
            return new SplitReader(((Task) partition).splits, columns, minTimestamp, maxTimestamp, failOnDataLoss,
                    batchRows);
        }
    }
}
