package pylogq.spark.jvm;

import java.io.Serializable;

/**
 * One partition's offsets {@code [start, end)} to read from its directory, as the Python planner made them,
 * with the aborted transactions of a read_committed split.
 */
final class Split implements Serializable {
    private static final long serialVersionUID = 2L;

    final String topic;
    final int partition;
    final String directory;
    final long start;
    final long end;
    /** The aborted transactions overlapping the split (read_committed; empty otherwise): producer ids, ... */
    final long[] abortedProducers;
    /** ... each one's first offset, ... */
    final long[] abortedFirst;
    /** ... and the offset of its ABORT marker. */
    final long[] abortedMarker;

    Split(String topic, int partition, String directory, long start, long end, long[] abortedProducers,
          long[] abortedFirst, long[] abortedMarker) {
        if (abortedFirst.length != abortedProducers.length || abortedMarker.length != abortedProducers.length) {
            throw new IllegalArgumentException("the aborted transactions of " + topic + "-" + partition
                    + " need a producer id, a first offset and a marker offset each");
        }
        this.topic = topic;
        this.partition = partition;
        this.directory = directory;
        this.start = start;
        this.end = end;
        this.abortedProducers = abortedProducers;
        this.abortedFirst = abortedFirst;
        this.abortedMarker = abortedMarker;
    }

    String name() {
        return topic + "-" + partition;
    }

    boolean hasAborted() {
        return abortedProducers.length > 0;
    }

    /**
     * Whether a transactional data batch of {@code producerId} spanning {@code base..last} is aborted:
     * Kafka's consumer rule with a fetch's aborted transactions (one of the producer's aborted
     * transactions starts at or before the batch's last offset and its marker lies past its base).
     */
    boolean aborted(long producerId, long base, long last) {
        for (int i = 0; i < abortedProducers.length; i++) {
            if (abortedProducers[i] == producerId && abortedFirst[i] <= last && base < abortedMarker[i]) {
                return true;
            }
        }
        return false;
    }
}
