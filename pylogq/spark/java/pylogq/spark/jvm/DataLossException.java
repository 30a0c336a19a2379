package pylogq.spark.jvm;

/**
 * Records of a split were deleted (retention, DeleteRecords, a deleted topic) before the task
 * read them. The message names the offsets and says how to read on without them; it starts
 * with {@code DataLossError}, the name pylogq's Python reader gives the same failure.
 */
public final class DataLossException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public DataLossException(String message) {
        super("DataLossError: " + message);
    }
}
