package pylogq.spark.jvm;

/** Bytes of a segment file that no valid entry can have: a bad CRC, size, codec or record. */
public final class CorruptRecordException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public CorruptRecordException(String message) {
        super(message);
    }

    public CorruptRecordException(String message, Throwable cause) {
        super(message, cause);
    }
}
