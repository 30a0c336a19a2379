package pylogq.spark.jvm;

import java.util.zip.CRC32;
import pylogq.spark.jvm.CorruptRecordException.Kind;

/**
 * Magic v0 and v1 messages (Kafka 0.8-0.10), read as {@code pylogq.records.legacy} reads them.
 *
 * <pre>
 * Message entry =>                 offset  size
 *   Offset       int64             0       8   not covered by the CRC
 *   MessageSize  int32             8       4   bytes of what follows
 *   Crc          uint32            12      4   CRC-32 of Magic..end of Value
 *   Magic        int8              16      1   0 or 1
 *   Attributes   int8              17      1   bits 0-2 codec, bit 3 timestamp type (v1)
 *   Timestamp    int64             18      8   v1 only
 *   Key          bytes                         int32 length (-1 null), then the bytes
 *   Value        bytes
 * </pre>
 *
 * A compressed message (a wrapper) has codec bits set and its value is a whole message set
 * compressed: inner messages of the wrapper's magic, none compressed. v0 inner offsets are
 * absolute; v1 inner offsets are relative and the wrapper carries the offset of the last one, so
 * absolute = wrapper offset - last relative + relative (unless the wrapper's offset is below the
 * last relative one, a set no broker assigned offsets to: then the inner offsets stand). A v0
 * record has timestamp -1 and timestamp type -1; the records of a LogAppendTime v1 wrapper take
 * the wrapper's timestamp. Records have no headers.
 *
 * <p>Stateless; any number of threads may call it at once.
 */
final class Legacy {
    static final int CRC_OFFSET = Entries.LOG_OVERHEAD;
    static final int MAGIC_OFFSET = CRC_OFFSET + 4;
    static final int ATTRIBUTES_OFFSET = MAGIC_OFFSET + 1;
    static final int TIMESTAMP_OFFSET = ATTRIBUTES_OFFSET + 1;
    static final int KEY_SIZE_OFFSET_V0 = TIMESTAMP_OFFSET;
    static final int KEY_SIZE_OFFSET_V1 = TIMESTAMP_OFFSET + 8;
    /** Bytes of a message after its size field, with a null key and a null value. */
    static final int RECORD_OVERHEAD_V0 = KEY_SIZE_OFFSET_V0 - CRC_OFFSET + 4 + 4;
    static final int RECORD_OVERHEAD_V1 = KEY_SIZE_OFFSET_V1 - CRC_OFFSET + 4 + 4;

    private static final int CODEC_MASK = 0x07;
    private static final int TIMESTAMP_TYPE_MASK = 0x08;
    private static final int LZ4 = 3;

    private Legacy() {
    }

    /** One message's fields, as {@link #read} found them; reused from message to message. */
    private static final class Message {
        long offset;
        int magic;
        int attributes;
        long timestamp;
        int keyPos;
        int keyLength;
        int valuePos;
        int valueLength;
        int end;

        int timestampType() {
            if (magic == 0) {
                return -1;
            }
            return (attributes & TIMESTAMP_TYPE_MASK) != 0 ? Entries.LOG_APPEND_TIME : Entries.CREATE_TIME;
        }
    }

    /** See {@link Entries#decode}: the v0/v1 entry data[pos, pos + size). */
    static void decode(byte[] data, int pos, int size, long start, long end, RecordSink sink, int maxDecompressed) {
        Message m = new Message();
        read(data, pos, pos + size, true, false, "", m);
        int codec = m.attributes & CODEC_MASK;
        if (codec == 0) {
            if (m.offset >= start && m.offset < end) {
                sink.record(m.offset, m.timestamp, m.timestampType(), data, m.keyPos, m.keyLength, m.valuePos,
                            m.valueLength, m.end, 0);
            }
            return;
        }
        String where = "wrapper at offset " + m.offset + ": ";
        if (m.valueLength < 0) {
            throw new CorruptRecordException(Kind.BAD_WRAPPER, where + "compressed value is null");
        }
        Codecs.Section inner;
        try {
            inner = Codecs.decompressSection(codec, data, m.valuePos, m.valueLength, m.magic, maxDecompressed);
        } catch (CorruptRecordException e) {
            throw new CorruptRecordException(e.kind(), where + e.getMessage(), e);
        }
        if (inner.length == 0) {
            throw new CorruptRecordException(Kind.BAD_WRAPPER, where + "inner message set is empty");
        }
        byte[] buf = inner.bytes;
        int limit = inner.length;
        // Check the whole inner set first: a v1 set's offsets hang on its last message.
        Message im = new Message();
        String innerWhere = where + "inner ";
        long lastInner = 0;
        for (int p = 0; p < limit; p = im.end) {
            read(buf, p, limit, true, true, innerWhere, im);
            if (im.magic != m.magic) {
                throw new CorruptRecordException(Kind.BAD_MAGIC, String.format(
                    "%sinner message at offset %d has magic %d, the wrapper magic %d",
                    where, im.offset, im.magic, m.magic));
            }
            if ((im.attributes & CODEC_MASK) != 0) {
                throw new CorruptRecordException(Kind.BAD_WRAPPER, String.format(
                    "%sinner message at offset %d is itself compressed", where, im.offset));
            }
            lastInner = im.offset;
        }
        long shift = m.magic > 0 ? m.offset - lastInner : -1;
        int timestampType = m.timestampType();
        boolean logAppend = timestampType == Entries.LOG_APPEND_TIME;
        for (int p = 0; p < limit; p = im.end) {
            read(buf, p, limit, false, true, innerWhere, im);
            long offset = shift >= 0 ? im.offset + shift : im.offset;
            if (offset >= start && offset < end) {
                sink.record(offset, logAppend ? m.timestamp : im.timestamp, timestampType, buf, im.keyPos,
                            im.keyLength, im.valuePos, im.valueLength, im.end, 0);
            }
        }
    }

    /**
     * Reads and checks the message whose entry starts at buf[pos] and must end by limit into
     * {@code m}; {@code where} starts each error message (the wrapper of an inner message).
     * {@code inner}: the message is in a wrapper's decompressed set, so one that runs past the set's
     * end is the wrapper's fault ({@link Kind#BAD_WRAPPER}) rather than a bad length field.
     */
    private static void read(byte[] buf, int pos, int limit, boolean checkCrc, boolean inner, String where,
                             Message m) {
        int remaining = limit - pos;
        Kind overrun = inner ? Kind.BAD_WRAPPER : Kind.BAD_LENGTH;
        if (remaining < Entries.LOG_OVERHEAD) {
            throw new CorruptRecordException(overrun, String.format(
                "%smessage set ends with %d bytes at byte %d, fewer than an offset and a size", where, remaining, pos));
        }
        long offset = Entries.readLong(buf, pos);
        int size = Entries.readInt(buf, pos + 8);
        if (size < RECORD_OVERHEAD_V0) {
            throw new CorruptRecordException(Kind.BAD_LENGTH, String.format(
                "%smessage at offset %d has size %d, below the minimum of %d", where, offset, size, RECORD_OVERHEAD_V0));
        }
        if (size > remaining - Entries.LOG_OVERHEAD) {
            throw new CorruptRecordException(overrun, String.format(
                "%smessage at offset %d has size %d but only %d bytes follow",
                where, offset, size, remaining - Entries.LOG_OVERHEAD));
        }
        int end = pos + Entries.LOG_OVERHEAD + size;
        int magic = buf[pos + MAGIC_OFFSET];
        if (magic != 0 && magic != 1) {
            throw new CorruptRecordException(Kind.BAD_MAGIC, String.format(
                "%smessage at offset %d has magic %d, not 0 or 1", where, offset, magic));
        }
        int overhead = magic == 0 ? RECORD_OVERHEAD_V0 : RECORD_OVERHEAD_V1;
        if (size < overhead) {
            throw new CorruptRecordException(Kind.BAD_LENGTH, String.format(
                "%smessage at offset %d has size %d, below the minimum of %d for magic %d",
                where, offset, size, overhead, magic));
        }
        if (checkCrc) {
            CRC32 crc = new CRC32();
            crc.update(buf, pos + MAGIC_OFFSET, end - pos - MAGIC_OFFSET);
            int computed = (int) crc.getValue();
            int stored = Entries.readInt(buf, pos + CRC_OFFSET);
            if (computed != stored) {
                throw new CorruptRecordException(Kind.BAD_CRC, String.format(
                    "%smessage at offset %d fails its CRC-32 check: stored 0x%08x, computed 0x%08x",
                    where, offset, stored, computed));
            }
        }
        int attributes = buf[pos + ATTRIBUTES_OFFSET];
        int codec = attributes & CODEC_MASK;
        if (codec > LZ4) {
            // Codecs 5-7 exist nowhere; zstd (4) not in magic 0 or 1, which predate it.
            throw new CorruptRecordException(Kind.UNKNOWN_CODEC, String.format(
                "%smessage at offset %d names codec %d, which magic %d cannot carry", where, offset, codec, magic));
        }
        // The minimum-size check above leaves both length fields inside the message.
        int p = pos + (magic == 0 ? KEY_SIZE_OFFSET_V0 : KEY_SIZE_OFFSET_V1);
        int keyLength = Entries.readInt(buf, p);
        p += 4;
        int keyPos = p;
        if (keyLength >= 0) {
            if ((long) p + keyLength + 4 > end) {
                throw new CorruptRecordException(Kind.BAD_RECORD, String.format(
                    "%smessage at offset %d has a key of %d bytes that overruns the message", where, offset, keyLength));
            }
            p += keyLength;
        } else if (keyLength != -1) {
            throw new CorruptRecordException(Kind.BAD_RECORD, String.format(
                "%smessage at offset %d has key length %d", where, offset, keyLength));
        }
        int valueLength = Entries.readInt(buf, p);
        p += 4;
        int valuePos = p;
        if (valueLength >= 0) {
            if ((long) p + valueLength > end) {
                throw new CorruptRecordException(Kind.BAD_RECORD, String.format(
                    "%smessage at offset %d has a value of %d bytes that overruns the message",
                    where, offset, valueLength));
            }
            p += valueLength;
        } else if (valueLength != -1) {
            throw new CorruptRecordException(Kind.BAD_RECORD, String.format(
                "%smessage at offset %d has value length %d", where, offset, valueLength));
        }
        if (p != end) {
            throw new CorruptRecordException(Kind.BAD_RECORD, String.format(
                "%smessage at offset %d has size %d but its fields end %d bytes earlier", where, offset, size, end - p));
        }
        m.offset = offset;
        m.magic = magic;
        m.attributes = attributes;
        m.timestamp = magic == 0 ? -1 : Entries.readLong(buf, pos + TIMESTAMP_OFFSET);
        m.keyPos = keyPos;
        m.keyLength = keyLength;
        m.valuePos = valuePos;
        m.valueLength = valueLength;
        m.end = end;
    }
}
