package pylogq.spark.jvm;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The column vectors of a read: views of the rows a {@link Rows} holds, never copies of them.
 *
 * <p>A binary or string value is a slice of the bytes read (or of a decompressed batch):
 * {@code getBinary} copies it out when the query asks, {@code getUTF8String} does not copy at
 * all. Each vector answers only the getters of its own type.
 */
final class Columns {
    private Columns() {
    }

    /** The vector of a Kafka-source column by name, over {@code rows}. */
    static ColumnVector of(String name, Rows rows, String topic, int partition) {
        switch (name) {
            case "key":
                return new Slices(DataTypes.BinaryType, rows, true);
            case "value":
                return new Slices(DataTypes.BinaryType, rows, false);
            case "topic":
                return new Constant(DataTypes.StringType, UTF8String.fromString(topic), 0);
            case "partition":
                return new Constant(DataTypes.IntegerType, null, partition);
            case "offset":
                return new Longs(DataTypes.LongType, rows, false);
            case "timestamp":
                return new Longs(DataTypes.TimestampType, rows, true);
            case "timestampType":
                return new TimestampTypes(rows);
            case "headers":
                return new Headers(rows);
            default:
                throw new IllegalArgumentException("no column " + name);
        }
    }

    /** A vector that answers no getter: each subclass overrides those of its type. */
    abstract static class Base extends ColumnVector {
        Base(DataType type) {
            super(type);
        }

        private UnsupportedOperationException wrong(String what) {
            return new UnsupportedOperationException(what + " of a " + type.simpleString() + " column");
        }

        @Override public void close() { }
        @Override public boolean hasNull() { return true; }
        @Override public int numNulls() { throw wrong("numNulls"); }
        @Override public boolean isNullAt(int rowId) { return false; }
        @Override public boolean getBoolean(int rowId) { throw wrong("getBoolean"); }
        @Override public byte getByte(int rowId) { throw wrong("getByte"); }
        @Override public short getShort(int rowId) { throw wrong("getShort"); }
        @Override public int getInt(int rowId) { throw wrong("getInt"); }
        @Override public long getLong(int rowId) { throw wrong("getLong"); }
        @Override public float getFloat(int rowId) { throw wrong("getFloat"); }
        @Override public double getDouble(int rowId) { throw wrong("getDouble"); }
        @Override public ColumnarArray getArray(int rowId) { throw wrong("getArray"); }
        @Override public ColumnarMap getMap(int ordinal) { throw wrong("getMap"); }
        @Override public Decimal getDecimal(int rowId, int precision, int scale) { throw wrong("getDecimal"); }
        @Override public UTF8String getUTF8String(int rowId) { throw wrong("getUTF8String"); }
        @Override public byte[] getBinary(int rowId) { throw wrong("getBinary"); }
        @Override public ColumnVector getChild(int ordinal) { throw wrong("getChild"); }
    }

    /** A vector that has no null. */
    abstract static class NotNull extends Base {
        NotNull(DataType type) {
            super(type);
        }

        @Override public boolean hasNull() { return false; }
        @Override public int numNulls() { return 0; }
    }

    /** Keys or values: slices of each row's buffer, null where the length is -1. */
    static final class Slices extends Base {
        private final Rows rows;
        private final boolean key;

        Slices(DataType type, Rows rows, boolean key) {
            super(type);
            this.rows = rows;
            this.key = key;
        }

        @Override
        public boolean isNullAt(int rowId) {
            return (key ? rows.keyLen[rowId] : rows.valueLen[rowId]) < 0;
        }

        @Override
        public byte[] getBinary(int rowId) {
            int length = key ? rows.keyLen[rowId] : rows.valueLen[rowId];
            if (length < 0) {
                return null;
            }
            int from = key ? rows.keyPos[rowId] : rows.valuePos[rowId];
            return Arrays.copyOfRange(rows.buf[rowId], from, from + length);
        }
    }

    /** Offsets, or timestamps as Spark's microseconds. */
    static final class Longs extends NotNull {
        private final Rows rows;
        private final boolean micros;

        Longs(DataType type, Rows rows, boolean micros) {
            super(type);
            this.rows = rows;
            this.micros = micros;
        }


        @Override
        public long getLong(int rowId) {
            return micros ? rows.timestamp[rowId] * 1000L : rows.offset[rowId];
        }
    }

    static final class TimestampTypes extends NotNull {
        private final Rows rows;

        TimestampTypes(Rows rows) {
            super(DataTypes.IntegerType);
            this.rows = rows;
        }


        @Override
        public int getInt(int rowId) {
            return rows.timestampType[rowId];
        }
    }

    /** The topic's name or the partition's number, the same in every row. */
    static final class Constant extends NotNull {
        private final UTF8String text;
        private final int number;

        Constant(DataType type, UTF8String text, int number) {
            super(type);
            this.text = text;
            this.number = number;
        }

        @Override public int getInt(int rowId) { return number; }
        @Override public UTF8String getUTF8String(int rowId) { return text; }
    }

    /**
     * {@code array<struct<key: string, value: binary>>}: null for a row without headers (as
     * Spark's Kafka source gives), else that row's run of the batch's headers, which are decoded
     * from the records' bytes the first time the batch's headers are asked for.
     */
    static final class Headers extends Base {
        private final Rows rows;
        private final HeaderItems items;
        private int[] first = new int[0];
        private int decodedFor = -1;

        Headers(Rows rows) {
            this(rows, new HeaderItems());
        }

        private Headers(Rows rows, HeaderItems items) {
            super(new ArrayType(items.dataType(), true));
            this.rows = rows;
            this.items = items;
        }

        @Override
        public boolean isNullAt(int rowId) {
            return rows.headerCount[rowId] == 0;
        }

        @Override
        public ColumnarArray getArray(int rowId) {
            int count = rows.headerCount[rowId];
            if (count == 0) {
                return null;
            }
            if (decodedFor != rows.generation) {
                decode();
            }
            return new ColumnarArray(items, first[rowId], count);
        }

        private void decode() {
            int n = rows.size;
            if (first.length < n) {
                first = new int[Math.max(n, 1024)];
            }
            items.clear();
            for (int i = 0; i < n; i++) {
                first[i] = items.size;
                int count = rows.headerCount[i];
                if (count > 0) {
                    items.decode(rows.buf[i], rows.headersPos[i], count);
                }
            }
            decodedFor = rows.generation;
        }
    }

    /** The headers of a batch's rows, one after another: a struct vector of key and value. */
    static final class HeaderItems extends NotNull {
        int size;
        byte[][] buf = new byte[1024][];
        int[] keyPos = new int[1024];
        int[] keyLen = new int[1024];
        int[] valuePos = new int[1024];
        int[] valueLen = new int[1024];
        private final ColumnVector keys;
        private final ColumnVector values;

        HeaderItems() {
            super(new StructType().add("key", DataTypes.StringType).add("value", DataTypes.BinaryType));
            keys = new HeaderKeys(this);
            values = new HeaderValues(this);
        }

        void clear() {
            size = 0;
            Arrays.fill(buf, null);
        }

        /** Appends {@code count} headers encoded from {@code data[pos]} (a v2 record's encoding). */
        void decode(byte[] data, int pos, int count) {
            for (int h = 0; h < count; h++) {
                if (size == keyPos.length) {
                    grow();
                }
                // (The headers were checked when their record was decoded.)
                long kv = Entries.varint(data, pos, data.length);
                pos = (int) (kv >>> 32);
                int kl = (int) kv;
                buf[size] = data;
                keyPos[size] = pos;
                keyLen[size] = kl;
                pos += kl;
                long vv = Entries.varint(data, pos, data.length);
                pos = (int) (vv >>> 32);
                int vl = (int) vv;
                valuePos[size] = pos;
                valueLen[size] = vl;
                if (vl > 0) {
                    pos += vl;
                }
                size++;
            }
        }

        private void grow() {
            int n = keyPos.length * 2;
            buf = Arrays.copyOf(buf, n);
            keyPos = Arrays.copyOf(keyPos, n);
            keyLen = Arrays.copyOf(keyLen, n);
            valuePos = Arrays.copyOf(valuePos, n);
            valueLen = Arrays.copyOf(valueLen, n);
        }


        @Override
        public ColumnVector getChild(int ordinal) {
            return ordinal == 0 ? keys : values;
        }
    }

    /**
     * Header keys as strings. Keys that are not UTF-8 decode with replacement characters, as
     * Kafka's Java client decodes them.
     */
    static final class HeaderKeys extends NotNull {
        private final HeaderItems items;

        HeaderKeys(HeaderItems items) {
            super(DataTypes.StringType);
            this.items = items;
        }


        @Override
        public UTF8String getUTF8String(int rowId) {
            UTF8String key = UTF8String.fromBytes(items.buf[rowId], items.keyPos[rowId], items.keyLen[rowId]);
            if (key.isValid()) {
                return key;
            }
            return UTF8String.fromString(new String(items.buf[rowId], items.keyPos[rowId], items.keyLen[rowId],
                    StandardCharsets.UTF_8));
        }
    }

    static final class HeaderValues extends Base {
        private final HeaderItems items;

        HeaderValues(HeaderItems items) {
            super(DataTypes.BinaryType);
            this.items = items;
        }

        @Override
        public boolean isNullAt(int rowId) {
            return items.valueLen[rowId] < 0;
        }

        @Override
        public byte[] getBinary(int rowId) {
            int length = items.valueLen[rowId];
            if (length < 0) {
                return null;
            }
            int from = items.valuePos[rowId];
            return Arrays.copyOfRange(items.buf[rowId], from, from + length);
        }
    }
}
