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
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * The JVM reader as a Spark DataSource V2: reads the splits that pylogq's Python planner made
 * ({@code pylogq.spark.read_topic}), in Spark's task threads, as columnar batches.
 *
 * <p>Options: {@code splits}, a JSON list of tasks, each a list of splits {@code {"topic",
 * "partition", "directory", "start", "end"}}; {@code minTimestamp}/{@code maxTimestamp}
 * (milliseconds, the rows kept are {@code min <= timestamp < max}); {@code failOnDataLoss};
 * {@code batchRows}. The schema is the caller's: some of the Kafka source's columns, by name,
 * which Spark prunes further to what the query reads.
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

    /** The scan: Spark prunes its columns to what the query reads; its tasks are the planner's. */
    static final class SegmentScan implements ScanBuilder, SupportsPushDownRequiredColumns, Scan, Batch {
        private StructType schema;
        private final CaseInsensitiveStringMap options;

        SegmentScan(StructType schema, CaseInsensitiveStringMap options) {
            this.schema = schema;
            this.options = options;
        }

        @Override
        public void pruneColumns(StructType required) {
            schema = required;
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
            return "pylogq segments " + Arrays.toString(schema.fieldNames());
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
                    splits.add(new Split(s.get("topic").asText(), s.get("partition").asInt(),
                            s.get("directory").asText(), s.get("start").asLong(), s.get("end").asLong()));
                }
                out.add(new Task(splits.toArray(new Split[0])));
            }
            return out.toArray(new InputPartition[0]);
        }

        @Override
        public PartitionReaderFactory createReaderFactory() {
            return new ReaderFactory(schema.fieldNames(), options.getLong("minTimestamp", Long.MIN_VALUE),
                    options.getLong("maxTimestamp", Long.MAX_VALUE), options.getBoolean("failOnDataLoss", true),
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
