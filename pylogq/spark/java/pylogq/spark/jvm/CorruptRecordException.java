package pylogq.spark.jvm;

import java.util.Objects;

/**
 * Bytes of a segment file that no valid entry can have: a bad CRC, size, codec or record. Its
 * {@link #kind()} says which check failed, in the names pylogq's Python decoders give the same
 * failures ({@code pylogq.errors.RecordProblem}); the message says where and is for people.
 */
public final class CorruptRecordException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** What is wrong with the bytes. */
    public enum Kind {
        /** An entry's stored checksum (v2: CRC-32C over the batch; v0/v1: CRC-32 over the message) is wrong. */
        BAD_CRC,
        /** An entry's magic is not 0, 1 or 2, or a message in a compressed wrapper has another magic than it. */
        BAD_MAGIC,
        /** An entry's length field is impossible: below its magic's smallest entry, or past the bytes that follow. */
        BAD_LENGTH,
        /** The attributes name a compression codec that does not exist. */
        UNKNOWN_CODEC,
        /** The codec cannot decompress the payload: a truncated or corrupt stream, a bad frame or checksum. */
        BAD_COMPRESSED_DATA,
        /** Decompressing would produce more than the decompression bound. */
        TOO_LARGE_DECOMPRESSED,
        /** A record's own encoding is broken: a varint, length or header that overruns or disagrees. */
        BAD_RECORD,
        /** A v2 batch's record count disagrees with its bytes. */
        BAD_RECORD_COUNT,
        /** A v0/v1 wrapper holds what it may not: a null value, no inner message, a compressed or overrunning one. */
        BAD_WRAPPER,
    }

    private final Kind kind;

    public CorruptRecordException(Kind kind, String message) {
        super(message);
        this.kind = Objects.requireNonNull(kind, "kind");
    }

    public CorruptRecordException(Kind kind, String message, Throwable cause) {
        super(message, cause);
        this.kind = Objects.requireNonNull(kind, "kind");
    }

    /** Which check the bytes failed. */
    public Kind kind() {
        return kind;
    }
}
