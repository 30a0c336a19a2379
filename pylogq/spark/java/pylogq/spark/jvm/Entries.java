package pylogq.spark.jvm;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.zip.CRC32C;
import pylogq.spark.jvm.CorruptRecordException.Kind;

/**
 * The entries of a segment file and the records in them, read as pylogq's Python decoders read
 * them ({@code pylogq.records.decode_columns}): the same checks, the same records.
 *
 * <p>An entry is a magic v2 record batch or a v0/v1 message ({@link Legacy}); every magic starts
 * with the same 17 bytes, offset(8) size(4) then 4 bytes (a v2 batch's partition leader epoch,
 * a message's CRC) and the magic at byte 16. A v2 batch:
 *
 * <pre>
 * RecordBatch =>                        offset  size
 *   BaseOffset           int64          0       8   not covered by the CRC
 *   BatchLength          int32          8       4   bytes after this field
 *   PartitionLeaderEpoch int32          12      4   not covered by the CRC
 *   Magic                int8           16      1   2
 *   CRC                  uint32         17      4   CRC-32C of Attributes..end
 *   Attributes           int16          21      2   bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control
 *   LastOffsetDelta      int32          23      4
 *   BaseTimestamp        int64          27      8
 *   MaxTimestamp         int64          35      8
 *   ProducerId           int64          43      8
 *   ProducerEpoch        int16          51      2
 *   BaseSequence         int32          53      4
 *   RecordsCount         int32          57      4
 *   Records              [Record]       61          compressed as one block when codec != 0
 *
 * Record =>
 *   Length varint, Attributes int8, TimestampDelta varlong, OffsetDelta varint,
 *   KeyLength varint (-1 null), Key, ValueLength varint (-1 null), Value,
 *   HeadersCount varint, Headers => [KeyLength varint, Key, ValueLength varint (-1 null), Value]
 * </pre>
 *
 * Varints are zigzag varints of at most 5 bytes (32 bits), varlongs of at most 10. Every length is
 * checked against the bytes it lies in before it is used; bad bytes raise
 * {@link CorruptRecordException} naming the entry's offset and what is wrong.
 *
 * <p>Stateless: every method may be called from any number of threads at once.
 */
final class Entries {
    static final int V2_HEADER = 61;
    static final int LOG_OVERHEAD = 12;

    static final int BASE_OFFSET_OFFSET = 0;
    static final int LENGTH_OFFSET = BASE_OFFSET_OFFSET + 8;
    static final int PARTITION_LEADER_EPOCH_OFFSET = LENGTH_OFFSET + 4;
    static final int MAGIC_OFFSET = PARTITION_LEADER_EPOCH_OFFSET + 4;
    static final int CRC_OFFSET = MAGIC_OFFSET + 1;
    static final int ATTRIBUTES_OFFSET = CRC_OFFSET + 4;
    static final int LAST_OFFSET_DELTA_OFFSET = ATTRIBUTES_OFFSET + 2;
    static final int BASE_TIMESTAMP_OFFSET = LAST_OFFSET_DELTA_OFFSET + 4;
    static final int MAX_TIMESTAMP_OFFSET = BASE_TIMESTAMP_OFFSET + 8;
    static final int PRODUCER_ID_OFFSET = MAX_TIMESTAMP_OFFSET + 8;
    static final int PRODUCER_EPOCH_OFFSET = PRODUCER_ID_OFFSET + 8;
    static final int BASE_SEQUENCE_OFFSET = PRODUCER_EPOCH_OFFSET + 2;
    static final int RECORDS_COUNT_OFFSET = BASE_SEQUENCE_OFFSET + 4;
    static final int RECORDS_OFFSET = RECORDS_COUNT_OFFSET + 4;

    static final int COMPRESSION_MASK = 0x07;
    static final int TIMESTAMP_TYPE_MASK = 0x08;
    static final int TRANSACTIONAL_MASK = 0x10;
    static final int CONTROL_MASK = 0x20;
    static final int CREATE_TIME = 0;
    static final int LOG_APPEND_TIME = 1;

    /** Bytes needed to read an entry's size and magic. */
    private static final int FRAME_BYTES = MAGIC_OFFSET + 1;
    /** The smallest entry of each magic, offset and size included. */
    private static final int[] MIN_ENTRY = {LOG_OVERHEAD + Legacy.RECORD_OVERHEAD_V0,
                                            LOG_OVERHEAD + Legacy.RECORD_OVERHEAD_V1, V2_HEADER};
    /** The smallest record: a 1-byte length, then six fields of at least 1 byte. */
    private static final int MIN_RECORD_SIZE = 7;

    private static final VarHandle SHORT = MethodHandles.byteArrayViewVarHandle(short[].class, ByteOrder.BIG_ENDIAN);
    private static final VarHandle INT = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.BIG_ENDIAN);
    private static final VarHandle LONG = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);

    // What a record's fields can have wrong, in the words of pylogq's decoders.
    private static final int ERR_VARINT = 0;
    private static final int ERR_LENGTH = 1;
    private static final int ERR_DELTA = 2;
    private static final int ERR_KEY = 3;
    private static final int ERR_VALUE = 4;
    private static final int ERR_HEADERS = 5;
    private static final int ERR_TRAILING = 6;
    private static final String[] RECORD_ERRORS = {
        "a malformed or truncated varint",
        "a record length that overruns the batch",
        "an offset delta out of order or past the last offset delta",
        "a key length that overruns its record",
        "a value length that overruns its record",
        "a malformed header",
        "bytes beyond its fields",
    };

    private Entries() {
    }

    /**
     * Frames the entry at data[pos, limit): its byte size (LOG_OVERHEAD + the size field), or 0
     * when no whole entry starts there: fewer than the 17 bytes that hold an entry's size and
     * magic, a zero-filled tail (a preallocated segment), or an entry running past limit. Throws
     * CorruptRecordException for a size or magic no entry can have. Reads no byte past the 17th
     * and checks no CRC ({@link #decode} does).
     */
    static int frame(byte[] data, int pos, int limit) {
        int remaining = limit - pos;
        if (remaining < FRAME_BYTES) {
            return 0;
        }
        int length = readInt(data, pos + LENGTH_OFFSET);
        int magic = data[pos + MAGIC_OFFSET] & 0xFF;
        if (length == 0 && magic == 0 && readLong(data, pos) == 0
                && readInt(data, pos + PARTITION_LEADER_EPOCH_OFFSET) == 0) {
            return 0;  // a preallocated segment's zeros: where its data ends
        }
        long size = LOG_OVERHEAD + (long) length;
        if (magic > 2 || size < MIN_ENTRY[magic]) {
            throw badEntry(data, pos, length, magic);
        }
        return size > remaining ? 0 : (int) size;
    }

    private static CorruptRecordException badEntry(byte[] data, int pos, int length, int magic) {
        if (magic > 2) {
            return new CorruptRecordException(Kind.BAD_MAGIC, String.format(
                "entry at offset %d has unknown magic %d", readLong(data, pos), magic));
        }
        return new CorruptRecordException(Kind.BAD_LENGTH, String.format(
            "entry at offset %d claims length %d, too small for magic %d", readLong(data, pos), length, magic));
    }

    /** The magic of the entry at pos (0, 1 or 2 in an entry {@link #frame} accepted). */
    static int magic(byte[] data, int pos) {
        return data[pos + MAGIC_OFFSET] & 0xFF;
    }

    /**
     * A v2 batch's base offset; a v0/v1 message's offset field. A v0/v1 compressed wrapper's
     * offset field is the offset of its last inner record: the first is known only once it is
     * decompressed, so a v0/v1 entry whose offset field is at or past a range's end may still hold
     * records in the range.
     */
    static long baseOffset(byte[] data, int pos) {
        return readLong(data, pos + BASE_OFFSET_OFFSET);
    }

    /** A v2 batch's base offset plus its last offset delta; a v0/v1 message's offset field. */
    static long lastOffset(byte[] data, int pos) {
        long offset = readLong(data, pos + BASE_OFFSET_OFFSET);
        if (magic(data, pos) != 2) {
            return offset;
        }
        return offset + readInt(data, pos + LAST_OFFSET_DELTA_OFFSET);
    }

    /** The records count of a v2 batch's header. */
    static int recordsCount(byte[] data, int pos) {
        return readInt(data, pos + RECORDS_COUNT_OFFSET);
    }

    /** Whether a v2 batch is transactional (written inside a transaction; its marker says how it ended). */
    static boolean isTransactional(byte[] data, int pos) {
        return (readShort(data, pos + ATTRIBUTES_OFFSET) & TRANSACTIONAL_MASK) != 0;
    }

    /** The producer id of a v2 batch's header (-1: none). */
    static long producerId(byte[] data, int pos) {
        return readLong(data, pos + PRODUCER_ID_OFFSET);
    }

    /** Whether a v2 batch is a control batch (transaction markers: no application records). */
    static boolean isControl(byte[] data, int pos) {
        return (readShort(data, pos + ATTRIBUTES_OFFSET) & CONTROL_MASK) != 0;
    }

    /**
     * Decodes the whole entry data[pos, pos + size): checks its CRC (v2: CRC-32C over
     * attributes..end; v0/v1: CRC-32 over magic..end), skips a v2 control batch entirely,
     * decompresses (never more than {@link Codecs#MAX_DECOMPRESSED} bytes), flattens v0/v1
     * compressed wrappers, and calls sink.record for each record with start &lt;= offset &lt; end,
     * in order. {@code size} is what {@link #frame} returned for pos.
     *
     * <p>A v2 batch that has no offset in [start, end) is only CRC-checked, as pylogq's decoder
     * does; an included batch has every record checked, in range or not. An uncompressed v2
     * batch's records point into {@code data} itself; a compressed entry's into its decompressed
     * bytes. A CorruptRecordException may come after some of the entry's records reached the sink.
     */
    static void decode(byte[] data, int pos, int size, long start, long end, RecordSink sink) {
        decode(data, pos, size, start, end, sink, Codecs.MAX_DECOMPRESSED);
    }

    /** {@link #decode(byte[], int, int, long, long, RecordSink)} with a bound of its own on decompressed bytes. */
    static void decode(byte[] data, int pos, int size, long start, long end, RecordSink sink, int maxDecompressed) {
        if (pos < 0 || size < FRAME_BYTES || size > data.length - pos
                || size != LOG_OVERHEAD + (long) readInt(data, pos + LENGTH_OFFSET)) {
            throw new IllegalArgumentException(String.format(
                "no entry of %d bytes at byte %d of %d (decode takes what frame returned)", size, pos, data.length));
        }
        int magic = magic(data, pos);
        if (magic > 2 || size < MIN_ENTRY[magic]) {
            throw badEntry(data, pos, size - LOG_OVERHEAD, magic);
        }
        if (magic == 2) {
            decodeV2(data, pos, size, start, end, sink, maxDecompressed);
        } else {
            Legacy.decode(data, pos, size, start, end, sink, maxDecompressed);
        }
    }

    private static void decodeV2(byte[] data, int pos, int size, long start, long end, RecordSink sink,
                                 int maxDecompressed) {
        long base = readLong(data, pos + BASE_OFFSET_OFFSET);
        int stored = readInt(data, pos + CRC_OFFSET);
        CRC32C crc = new CRC32C();
        crc.update(data, pos + ATTRIBUTES_OFFSET, size - ATTRIBUTES_OFFSET);
        int computed = (int) crc.getValue();
        if (computed != stored) {
            throw new CorruptRecordException(Kind.BAD_CRC, String.format(
                "record batch at offset %d fails its CRC-32C check: stored 0x%08x, computed 0x%08x",
                base, stored, computed));
        }
        int attributes = readShort(data, pos + ATTRIBUTES_OFFSET);
        if ((attributes & CONTROL_MASK) != 0) {
            return;  // transaction markers: no application records
        }
        int lastDelta = readInt(data, pos + LAST_OFFSET_DELTA_OFFSET);
        if (base + lastDelta < start || base >= end) {
            return;
        }
        int codec = attributes & COMPRESSION_MASK;
        byte[] buf;
        int sectionStart;
        int sectionEnd;
        if (codec == 0) {
            buf = data;
            sectionStart = pos + RECORDS_OFFSET;
            sectionEnd = pos + size;
        } else {
            if (codec > Codecs.ZSTD) {
                throw new CorruptRecordException(Kind.UNKNOWN_CODEC, String.format(
                    "record batch at offset %d names compression codec %d, which does not exist", base, codec));
            }
            Codecs.Section section;
            try {
                section = Codecs.decompressSection(codec, data, pos + RECORDS_OFFSET, size - RECORDS_OFFSET, 2,
                                                   maxDecompressed);
            } catch (CorruptRecordException e) {
                throw new CorruptRecordException(e.kind(), "record batch at offset " + base + ": " + e.getMessage(), e);
            }
            buf = section.bytes;
            sectionStart = 0;
            sectionEnd = section.length;
        }
        int count = readInt(data, pos + RECORDS_COUNT_OFFSET);
        if (count < 0 || (long) count * MIN_RECORD_SIZE > sectionEnd - sectionStart) {
            throw new CorruptRecordException(Kind.BAD_RECORD_COUNT, String.format(
                "record batch at offset %d claims %d records in %d bytes", base, count, sectionEnd - sectionStart));
        }
        boolean logAppend = (attributes & TIMESTAMP_TYPE_MASK) != 0;
        int timestampType = logAppend ? LOG_APPEND_TIME : CREATE_TIME;
        long baseTimestamp = readLong(data, pos + BASE_TIMESTAMP_OFFSET);
        long maxTimestamp = readLong(data, pos + MAX_TIMESTAMP_OFFSET);
        int p = sectionStart;
        int prev = -1;
        for (int i = 0; i < count; i++) {
            int recordStart = p;
            long v = varint(buf, p, sectionEnd);
            if (v < 0) {
                throw recordError(ERR_VARINT, recordStart - sectionStart, base);
            }
            p = (int) (v >>> 32);
            int length = (int) v;
            if (length < MIN_RECORD_SIZE - 1 || length > sectionEnd - p) {
                throw recordError(ERR_LENGTH, recordStart - sectionStart, base);
            }
            int recordEnd = p + length;
            p++;  // attributes: unused
            // The timestamp delta, a varlong.
            long timestampDelta;
            int b = buf[p];  // the length check above leaves at least 5 bytes
            if (b >= 0) {
                timestampDelta = (b >>> 1) ^ -(b & 1);
                p++;
            } else {
                long raw = 0;
                int shift = 0;
                int first = p;
                while (true) {
                    if (p >= recordEnd || p - first >= 10) {
                        throw recordError(ERR_VARINT, recordStart - sectionStart, base);
                    }
                    b = buf[p++];
                    raw |= (long) (b & 0x7F) << shift;
                    if (b >= 0) {
                        break;
                    }
                    shift += 7;
                }
                timestampDelta = (raw >>> 1) ^ -(raw & 1);
            }
            v = varint(buf, p, recordEnd);
            if (v < 0) {
                throw recordError(ERR_VARINT, recordStart - sectionStart, base);
            }
            p = (int) (v >>> 32);
            int delta = (int) v;
            if (delta <= prev || delta > lastDelta) {
                throw recordError(ERR_DELTA, recordStart - sectionStart, base);
            }
            prev = delta;
            v = varint(buf, p, recordEnd);
            if (v < 0) {
                throw recordError(ERR_VARINT, recordStart - sectionStart, base);
            }
            p = (int) (v >>> 32);
            int keyLength = (int) v;
            int keyPos = p;
            if (keyLength < -1 || keyLength > recordEnd - p) {
                throw recordError(ERR_KEY, recordStart - sectionStart, base);
            }
            if (keyLength > 0) {
                p += keyLength;
            }
            v = varint(buf, p, recordEnd);
            if (v < 0) {
                throw recordError(ERR_VARINT, recordStart - sectionStart, base);
            }
            p = (int) (v >>> 32);
            int valueLength = (int) v;
            int valuePos = p;
            if (valueLength < -1 || valueLength > recordEnd - p) {
                throw recordError(ERR_VALUE, recordStart - sectionStart, base);
            }
            if (valueLength > 0) {
                p += valueLength;
            }
            v = varint(buf, p, recordEnd);
            if (v < 0) {
                throw recordError(ERR_VARINT, recordStart - sectionStart, base);
            }
            p = (int) (v >>> 32);
            int headerCount = (int) v;
            int headersPos = p;
            if (headerCount < 0 || headerCount > recordEnd - p) {
                throw recordError(ERR_HEADERS, recordStart - sectionStart, base);
            }
            for (int h = 0; h < headerCount; h++) {
                v = varint(buf, p, recordEnd);
                int n = (int) v;
                if (v < 0 || n < 0 || n > recordEnd - (int) (v >>> 32)) {
                    throw recordError(ERR_HEADERS, recordStart - sectionStart, base);
                }
                p = (int) (v >>> 32) + n;
                v = varint(buf, p, recordEnd);
                n = (int) v;
                if (v < 0 || n < -1 || n > recordEnd - (int) (v >>> 32)) {
                    throw recordError(ERR_HEADERS, recordStart - sectionStart, base);
                }
                p = (int) (v >>> 32) + Math.max(n, 0);
            }
            if (p != recordEnd) {
                throw recordError(ERR_TRAILING, recordStart - sectionStart, base);
            }
            long offset = base + delta;
            if (offset >= start && offset < end) {
                sink.record(offset, logAppend ? maxTimestamp : baseTimestamp + timestampDelta, timestampType, buf,
                            keyPos, keyLength, valuePos, valueLength, headersPos, headerCount);
            }
        }
        if (p != sectionEnd) {
            throw new CorruptRecordException(Kind.BAD_RECORD_COUNT, String.format(
                "record batch at offset %d has %d bytes after its %d records", base, sectionEnd - p, count));
        }
    }

    /**
     * The zigzag varint of at most 5 bytes at buf[p, limit), as (the position after it) &lt;&lt; 32
     * | (its value, 32 bits); -1 when it runs past limit, is longer or overflows 32 bits.
     * Positions are at least 1, so a result is never negative otherwise.
     */
    static long varint(byte[] buf, int p, int limit) {
        if (p < limit) {
            int b = buf[p];
            if (b >= 0) {
                return ((long) (p + 1) << 32) | (((b >>> 1) ^ -(b & 1)) & 0xFFFFFFFFL);
            }
        }
        return longVarint(buf, p, limit);
    }

    private static long longVarint(byte[] buf, int p, int limit) {
        int raw = 0;
        for (int shift = 0; shift < 28; shift += 7) {
            if (p >= limit) {
                return -1;
            }
            int b = buf[p++];
            raw |= (b & 0x7F) << shift;
            if (b >= 0) {
                return ((long) p << 32) | (((raw >>> 1) ^ -(raw & 1)) & 0xFFFFFFFFL);
            }
        }
        if (p >= limit) {
            return -1;
        }
        int b = buf[p++];
        if ((b & 0xF0) != 0) {
            return -1;  // a sixth byte follows, or the value needs more than 32 bits
        }
        raw |= b << 28;
        return ((long) p << 32) | (((raw >>> 1) ^ -(raw & 1)) & 0xFFFFFFFFL);
    }

    /** A record's own fields are wrong ({@code what}: one of the ERR_ constants): {@link Kind#BAD_RECORD}. */
    private static CorruptRecordException recordError(int what, int at, long base) {
        return new CorruptRecordException(Kind.BAD_RECORD, String.format(
            "record at byte %d of the batch at offset %d has %s", at, base, RECORD_ERRORS[what]));
    }

    static short readShort(byte[] data, int pos) {
        return (short) SHORT.get(data, pos);
    }

    static int readInt(byte[] data, int pos) {
        return (int) INT.get(data, pos);
    }

    static long readLong(byte[] data, int pos) {
        return (long) LONG.get(data, pos);
    }
}
